// CPU implementations of the standard kernels, split over the thread team.
#include <algorithm>
#include <limits>

#include "eagle/kernel/thread_team.hpp"
#include "kernel/standard_impl.hpp"

namespace eagle::detail {

namespace {

// Arithmetic type for an element type: float for the 16-bit formats, the type itself otherwise.
template <class T>
struct acc_of {
  using type = T;
};
template <>
struct acc_of<half> {
  using type = float;
};
template <>
struct acc_of<bfloat16> {
  using type = float;
};

constexpr int64_t kGrain = 1 << 14;

template <EwOp op, class T>
void elementwise(const KernelArgs& a, const ThreadTeam& team) {
  using Acc = typename acc_of<T>::type;
  constexpr int out_index = ew_output_index(op);
  T* out = static_cast<T*>(a.arrays[out_index].data);
  auto load = [&a](int arg, int64_t i) -> Acc {
    return static_cast<Acc>(static_cast<const T*>(a.arrays[arg].data)[i]);
  };
  team.parallel_for(a.arrays[out_index].numel, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = T(ew_apply<op, Acc>(a, i, load));
  });
}

template <EwOp op>
CpuFn pick(DType d) {
  switch (d) {
    case DType::f64:
      return &elementwise<op, double>;
    case DType::f32:
      return &elementwise<op, float>;
    case DType::f16:
      return &elementwise<op, half>;
    case DType::bf16:
      return &elementwise<op, bfloat16>;
    case DType::i64:
      return &elementwise<op, int64_t>;
    case DType::i32:
      return &elementwise<op, int32_t>;
    case DType::u32:
      return &elementwise<op, uint32_t>;
    default:
      return nullptr;
  }
}

// Sums and maxima in a fixed chunking, combined in order, so results do not depend on timing.
template <ReduceOp op, class T>
void reduce(const KernelArgs& a, const ThreadTeam& team) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  const T* x = static_cast<const T*>(a.arrays[0].data);
  const int64_t n = a.arrays[0].numel;
  constexpr int kMaxChunks = 64;
  const int chunks =
      static_cast<int>(std::clamp<int64_t>((n + (1 << 16) - 1) >> 16, 1, kMaxChunks));
  // The identity of max is -inf for floats (an all -inf input has max -inf) and T's lowest value
  // for integers (the lowest of the wider Acc would not survive the conversion back to T).
  const Acc identity = [] {
    if constexpr (op == ReduceOp::sum) {
      return Acc(0);
    } else if constexpr (std::is_floating_point_v<T>) {
      return -std::numeric_limits<Acc>::infinity();
    } else {
      return static_cast<Acc>(std::numeric_limits<T>::lowest());
    }
  }();
  Acc partial[kMaxChunks];
  auto run_chunk = [&](int c) {
    const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    Acc acc = identity;
    if constexpr (op == ReduceOp::sum) {
      for (int64_t i = begin; i < end; ++i) acc += static_cast<Acc>(x[i]);
    } else {
      for (int64_t i = begin; i < end; ++i) acc = std::max(acc, static_cast<Acc>(x[i]));
    }
    partial[c] = acc;
  };
  if (chunks == 1) {
    run_chunk(0);
  } else {
    team.tasks(chunks, run_chunk);
  }
  Acc total = identity;
  for (int c = 0; c < chunks; ++c)
    total = op == ReduceOp::sum ? total + partial[c] : std::max(total, partial[c]);
  *static_cast<T*>(a.arrays[1].data) = static_cast<T>(total);
}

template <ReduceOp op>
CpuFn pick_reduce(DType d) {
  switch (d) {
    case DType::f64:
      return &reduce<op, double>;
    case DType::f32:
      return &reduce<op, float>;
    case DType::i64:
      return &reduce<op, int64_t>;
    case DType::i32:
      return &reduce<op, int32_t>;
    default:
      return nullptr;
  }
}

}  // namespace

CpuFn cpu_elementwise(EwOp op, DType dtype) {
  switch (op) {
    case EwOp::fill:
      return pick<EwOp::fill>(dtype);
    case EwOp::copy:
      return pick<EwOp::copy>(dtype);
    case EwOp::scale:
      return pick<EwOp::scale>(dtype);
    case EwOp::axpy:
      return pick<EwOp::axpy>(dtype);
    case EwOp::add:
      return pick<EwOp::add>(dtype);
    case EwOp::mul:
      return pick<EwOp::mul>(dtype);
    case EwOp::where:
      return pick<EwOp::where>(dtype);
    case EwOp::broadcast:
      return pick<EwOp::broadcast>(dtype);
    case EwOp::equal_mask:
      return pick<EwOp::equal_mask>(dtype);
    case EwOp::mul_div:
      return pick<EwOp::mul_div>(dtype);
  }
  return nullptr;
}

CpuFn cpu_reduce(ReduceOp op, DType dtype) {
  return op == ReduceOp::sum ? pick_reduce<ReduceOp::sum>(dtype)
                             : pick_reduce<ReduceOp::max>(dtype);
}

}  // namespace eagle::detail
