// The ragged kernels, written once (eagle/kernel/typed.hpp) for the CPU and the GPU. Compiled as
// CUDA in a CUDA build and as C++ otherwise (CMake: *_typed.cu).
#include <array>
#include <memory>

#include "eagle/core/dtype.hpp"
#include "eagle/kernel/typed.hpp"
#include "eagle/ragged/capacity.hpp"
#include "eagle/ragged/kernels.hpp"
#include "eagle/ragged/schedule.hpp"
#include "ragged/row_derivative.hpp"

#ifdef __CUDACC__
#include <climits>

#include "ragged/block_schedule.cuh"
#endif

namespace eagle::ragged {

namespace {

// The active end L = cu_seqlens[N] clamped to [0, T]: O(1) per element (each element of a row
// kernel reads it), in bounds whatever the metadata.
EAGLE_HD int64_t active_end(const In<int32_t>& cu, int64_t tokens) {
  return clamp_row(cu[cu.numel() - 1], 0, tokens);
}

ArrayMeta cells(int64_t n, DType d) {
  return {Shape{n}, d};
}

void need_cu_seqlens(const std::vector<ArrayMeta>& in, std::size_t at, const char* kernel) {
  if (in.size() <= at || in[at].dtype != DType::i32 || in[at].shape.size() != 1 ||
      in[at].shape[0] < 1)
    throw InvalidArgument(std::string(kernel) +
                          ": cu_seqlens must be a 1-D i32 array of N + 1 >= 1 entries");
}

int64_t int_scalar(const std::vector<ScalarArg>& s, std::size_t at, const char* kernel,
                   const char* name, int64_t least) {
  const int64_t v = at < s.size() ? s[at].i : 0;
  if (at >= s.size() || v < least)
    throw InvalidArgument(std::string(kernel) + ": " + name +
                          " must be >= " + std::to_string(least) + ", got " +
                          (at < s.size() ? std::to_string(v) : std::string("none")));
  return v;
}

#ifdef __CUDACC__
// The cu_seqlens rules of ragged::validate_cu_seqlens over the n = N + 1 entries, into
// error[0..1] = {rule, index}: 1 cu[0] != 0 (index 0); 2 the first i with cu[i] < cu[i - 1];
// 3 cu[N] > T (index N); {0, 0} when they hold.
__device__ void block_validate(const int32_t* cu, int64_t n, int64_t tokens, uint32_t* error) {
  __shared__ unsigned first_bad;
  if (threadIdx.x == 0) first_bad = UINT_MAX;
  __syncthreads();
  for (int64_t i = 1 + threadIdx.x; i < n; i += blockDim.x) {
    if (cu[i] < cu[i - 1]) {  // this thread's first; the block keeps the least of them
      atomicMin(&first_bad, static_cast<unsigned>(i));
      break;
    }
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  uint32_t rule = static_cast<uint32_t>(Rule::ok), index = 0;
  if (cu[0] != 0) {
    rule = static_cast<uint32_t>(Rule::first_not_zero);
  } else if (first_bad != UINT_MAX) {
    rule = static_cast<uint32_t>(Rule::decreasing), index = first_bad;
  } else if (cu[n - 1] > tokens) {
    rule = static_cast<uint32_t>(Rule::past_capacity), index = static_cast<uint32_t>(n - 1);
  }
  error[0] = rule;
  error[1] = index;
}
#endif

// The kernels one block runs over a whole cu_seqlens (the check, the chunk offsets, the seqlen
// bucket): integer outputs, constants to reverse mode; one point; 1024 threads on the GPU, one
// pass on the CPU.
struct OneBlockOverCu {
  static constexpr bool no_gradient = true;
  using types = eagle::types<int32_t>;
  static constexpr bool per_sample = false;
  template <class Args>
  EAGLE_HD static int64_t extent(const Args&) {
    return 1;
  }
  static constexpr bool one_block = true;
  static constexpr unsigned block = 1024;
};

struct Validate : OneBlockOverCu {
  static constexpr const char* name = "ragged_validate_cu_seqlens";
  static constexpr std::array<const char*, 3> params = {"cu_seqlens", "error", "tokens"};
  static std::vector<ArrayMeta> infer(const std::vector<ArrayMeta>& in,
                                      const std::vector<ScalarArg>& s) {
    need_cu_seqlens(in, 0, name);
    int_scalar(s, 0, name, "tokens (T)", 0);
    return {cells(2, DType::u32)};
  }
  // One block on the GPU (block_validate); one pass on the CPU.
  template <class T>
  EAGLE_HD static void cpu_point(int64_t, In<T> cu, Out<uint32_t> error, int64_t tokens) {
    uint32_t rule = 0, index = 0;
    const int64_t n = cu.numel();
    if (cu[0] != 0) {
      rule = static_cast<uint32_t>(Rule::first_not_zero);
    } else {
      for (int64_t i = 1; i < n && rule == 0; ++i)
        if (cu[i] < cu[i - 1]) rule = static_cast<uint32_t>(Rule::decreasing), index = i;
      if (rule == 0 && cu[n - 1] > tokens)
        rule = static_cast<uint32_t>(Rule::past_capacity), index = static_cast<uint32_t>(n - 1);
    }
    error[0] = rule;
    error[1] = index;
  }
#ifdef __CUDACC__
  template <class T>
  __device__ static void cuda_point(int64_t, In<T> cu, Out<uint32_t> error, int64_t tokens) {
    block_validate(cu.data(), cu.numel(), tokens, error.data());
  }
#endif
};

struct ChunkOffsets : OneBlockOverCu {
  static constexpr const char* name = "ragged_chunk_offsets";
  static constexpr std::array<const char*, 4> params = {"cu_seqlens", "offsets", "tokens", "chunk"};
  static std::vector<ArrayMeta> infer(const std::vector<ArrayMeta>& in,
                                      const std::vector<ScalarArg>& s) {
    need_cu_seqlens(in, 0, name);
    int_scalar(s, 0, name, "tokens (T)", 0);
    int_scalar(s, 1, name, "chunk (C)", 1);
    return {cells(in[0].shape[0], DType::i32)};
  }
  // One block scans the N + 1 boundaries on the GPU (block_chunk_offsets), one pass on the CPU.
  template <class T>
  EAGLE_HD static void cpu_point(int64_t, In<T> cu, Out<int32_t> offsets, int64_t tokens,
                                 int64_t chunk) {
    scan_chunk_offsets(cu.data(), cu.numel() - 1, tokens, chunk, offsets.data());
  }
#ifdef __CUDACC__
  template <class T>
  __device__ static void cuda_point(int64_t, In<T> cu, Out<int32_t> offsets, int64_t tokens,
                                    int64_t chunk) {
    block_chunk_offsets(cu.data(), cu.numel() - 1, tokens, chunk, offsets.data());
  }
#endif
};

// Sequence s's length as seqlen_bucket reads it: its boundaries each clamped into [0, T].
EAGLE_HD int64_t clamped_length(const int32_t* cu, int64_t s, int64_t tokens) {
  const int64_t begin = clamp_row(cu[s], 0, tokens), end = clamp_row(cu[s + 1], 0, tokens);
  return end > begin ? end - begin : 0;
}

// The index of the first bound of seqlen_buckets(T, S0) that `longest` fits.
EAGLE_HD uint32_t bucket_of(int64_t longest, int64_t tokens, int64_t smallest) {
  uint32_t i = 0;
  for (int64_t bound = first_seqlen_bound(tokens, smallest); longest > bound && bound < tokens; ++i)
    bound = next_seqlen_bound(bound, tokens);
  return i;
}

struct SeqlenBucket : OneBlockOverCu {
  static constexpr const char* name = "ragged_seqlen_bucket";
  static constexpr std::array<const char*, 4> params = {"cu_seqlens", "bucket", "tokens",
                                                        "smallest"};
  static std::vector<ArrayMeta> infer(const std::vector<ArrayMeta>& in,
                                      const std::vector<ScalarArg>& s) {
    need_cu_seqlens(in, 0, name);
    int_scalar(s, 0, name, "tokens (T)", 1);
    int_scalar(s, 1, name, "smallest (S0)", 1);
    return {cells(1, DType::u32)};
  }
  // One block takes the longest length on the GPU (a block-wide max), one pass on the CPU.
  template <class T>
  EAGLE_HD static void cpu_point(int64_t, In<T> cu, Out<uint32_t> bucket, int64_t tokens,
                                 int64_t smallest) {
    int64_t longest = 0;
    for (int64_t s = 0; s + 1 < cu.numel(); ++s) {
      const int64_t len = clamped_length(cu.data(), s, tokens);
      longest = len > longest ? len : longest;
    }
    bucket[0] = bucket_of(longest, tokens, smallest);
  }
#ifdef __CUDACC__
  template <class T>
  __device__ static void cuda_point(int64_t, In<T> cu, Out<uint32_t> bucket, int64_t tokens,
                                    int64_t smallest) {
    __shared__ int32_t scratch[32];
    int64_t longest = 0;  // this thread's sequences, then the block's (lengths fit in int32: <= T)
    for (int64_t s = threadIdx.x; s + 1 < cu.numel(); s += blockDim.x) {
      const int64_t len = clamped_length(cu.data(), s, tokens);
      longest = len > longest ? len : longest;
    }
    const block_scan::Scanned m =
        block_scan::scan(static_cast<int32_t>(longest), block_scan::Max{}, 0, scratch);
    if (threadIdx.x == 0) bucket[0] = bucket_of(m.total, tokens, smallest);
  }
#endif
};

struct ChunkTasks {
  static constexpr const char* name = "ragged_chunk_tasks";
  static constexpr bool no_gradient = true;  // integer tasks: constants to reverse mode
  static constexpr std::array<const char*, 6> params = {"cu_seqlens", "chunk_offsets", "tasks",
                                                        "tokens",     "chunk",         "count"};
  using types = eagle::types<int32_t>;
  static std::vector<ArrayMeta> infer(const std::vector<ArrayMeta>& in,
                                      const std::vector<ScalarArg>& s) {
    need_cu_seqlens(in, 0, name);
    need_cu_seqlens(in, 1, name);
    if (in[1].shape != in[0].shape)
      throw InvalidArgument(std::string(name) +
                            ": chunk_offsets must have cu_seqlens' N + 1 entries");
    int_scalar(s, 0, name, "tokens (T)", 0);
    int_scalar(s, 1, name, "chunk (C)", 1);
    return {{Shape{int_scalar(s, 2, name, "count (G)", 0), 3}, DType::i32}};
  }
  template <class Args>
  EAGLE_HD static int64_t extent(const Args& a) {
    return a.arrays[2].dims[0];
  }
  template <class T>
  EAGLE_HD static void point(int64_t j, In<T> cu, In<int32_t> offsets, Out<int32_t> tasks,
                             int64_t tokens, int64_t chunk, int64_t) {
    const ChunkTask t = chunk_task(cu.data(), offsets.data(), cu.numel() - 1, tokens, chunk, j);
    tasks[3 * j] = static_cast<int32_t>(t.sequence);
    tasks[3 * j + 1] = static_cast<int32_t>(t.row_begin);
    tasks[3 * j + 2] = static_cast<int32_t>(t.row_end);
  }
};

struct ActiveRows {
  static constexpr const char* name = "ragged_active_rows";
  static constexpr bool no_gradient = true;  // a u8 mask: constant to reverse mode
  static constexpr std::array<const char*, 3> params = {"cu_seqlens", "mask", "tokens"};
  using types = eagle::types<int32_t>;
  static std::vector<ArrayMeta> infer(const std::vector<ArrayMeta>& in,
                                      const std::vector<ScalarArg>& s) {
    need_cu_seqlens(in, 0, name);
    return {cells(int_scalar(s, 0, name, "tokens (T)", 0), DType::u8)};
  }
  template <class T>
  EAGLE_HD static void point(int64_t i, In<T> cu, Out<uint8_t> mask, int64_t tokens) {
    mask[i] = i < active_end(cu, tokens) ? 1 : 0;
  }
};

// The row of flat element i of an array whose first dim is T.
template <class A>
EAGLE_HD int64_t row_of(int64_t i, const A& x) {
  const int64_t per_row = x.dim(0) > 0 ? x.numel() / x.dim(0) : 1;
  return per_row > 0 ? i / per_row : 0;
}

std::vector<ArrayMeta> rows_like_x(const std::vector<ArrayMeta>& in, const char* kernel) {
  if (in.empty() || in[0].shape.empty())
    throw InvalidArgument(std::string(kernel) + ": x must have a first (token row) dim");
  need_cu_seqlens(in, 1, kernel);
  return {in[0]};
}

// x [T, ...] and cu_seqlens in, y like x out: the row kernels' signature, and their derivative:
// dx = mask_rows(dy) (mask_rows' own; gradient_barrier's by design, zeroing the padding rows of
// the gradient an ordinary producer receives).
struct RowKernel {
  static constexpr std::array<const char*, 3> params = {"x", "cu_seqlens", "y"};
  using types = eagle::types<float, double, half, bfloat16>;
  static std::shared_ptr<const Derivative> derivative() { return detail::masked_cotangent_rule(); }
};

struct MaskRows : RowKernel {
  static constexpr const char* name = "ragged_mask_rows";
  static std::vector<ArrayMeta> infer(const std::vector<ArrayMeta>& in,
                                      const std::vector<ScalarArg>&) {
    return rows_like_x(in, name);
  }
  template <class T>
  EAGLE_HD static void point(int64_t i, In<T> x, In<int32_t> cu, Out<T> y) {
    // T{} is +0 (half and bfloat16 are plain bits on this side).
    y[i] = row_of(i, x) < active_end(cu, x.dim(0)) ? x[i] : T{};
  }
};

struct GradientBarrier : RowKernel {
  static constexpr const char* name = "ragged_gradient_barrier";
  static std::vector<ArrayMeta> infer(const std::vector<ArrayMeta>& in,
                                      const std::vector<ScalarArg>&) {
    return rows_like_x(in, name);
  }
  template <class T>
  EAGLE_HD static void point(int64_t i, In<T> x, In<int32_t>, Out<T> y) {
    y[i] = x[i];
  }
};

}  // namespace

EAGLE_TYPED_KERNEL(validate_cu_seqlens, Validate)
EAGLE_TYPED_KERNEL(chunk_offsets, ChunkOffsets)
EAGLE_TYPED_KERNEL(chunk_tasks, ChunkTasks)
EAGLE_TYPED_KERNEL(seqlen_bucket, SeqlenBucket)
EAGLE_TYPED_KERNEL(active_rows, ActiveRows)
EAGLE_TYPED_KERNEL(mask_rows, MaskRows)
EAGLE_TYPED_KERNEL(gradient_barrier, GradientBarrier)

}  // namespace eagle::ragged
