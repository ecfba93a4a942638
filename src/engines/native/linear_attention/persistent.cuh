// Internal, CUDA sources only: the grid of a persistent launch, whose CTAs each loop over tasks
// blockIdx.x, blockIdx.x + gridDim.x, ... instead of taking one task each (the flat schedule).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace eagle::native::linear_attention {

// The SMs of the current device (host, no device sync: safe while a stream is captured); 0 when
// the runtime cannot say.
inline int device_multiprocessors() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return 0;
  return sms;
}

// Lowers `tasks` (the flat grid's first dimension) to the CTAs of `kernel` resident on the device
// at once, divided over the `others` CTAs of the grid's other dimensions, at least 1. Host calls
// only (no device sync): safe while a stream is captured. False when the runtime cannot say.
template <typename Kernel>
bool persistent_workers(Kernel kernel, int threads, std::size_t smem, unsigned others,
                        unsigned& tasks) {
  const int sms = device_multiprocessors();
  int per_sm = 0;
  if (sms == 0 ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) != cudaSuccess)
    return false;
  const int64_t resident = static_cast<int64_t>(sms) * (per_sm > 0 ? per_sm : 1) / others;
  const int64_t workers = resident > 1 ? resident : 1;
  if (workers < tasks) tasks = static_cast<unsigned>(workers);
  return true;
}

// The loop of a kernel over its tasks (chunk tasks or slots) along the grid's first dimension:
// flat, the CTA's one task blockIdx.x; persistent, blockIdx.x, blockIdx.x + gridDim.x, ... below
// `tasks`. `task(j)` runs task j and returns false when j is past the batch (tasks are in order,
// so every later one is too).
template <class Task>
__device__ __forceinline__ void for_each_task(int64_t tasks, bool persistent, Task&& task) {
  for (int64_t j = blockIdx.x; j < tasks; j += gridDim.x) {
    if (!task(j) || !persistent) return;
    __syncthreads();  // the next task reuses shared memory
  }
}

// The loop of a sequential kernel (a state recurrence) over its (sequence slot, V block) tasks:
// task t = slot * Blocks + block along the grid's first dimension, so that the V blocks of one
// sequence and head are launched side by side. They read the same chunk rows, which then come
// from L2 for all but the first (slot-major grids had the blocks a whole grid plane apart).
// `task(slot, block)`.
template <int Blocks, class Task>
__device__ __forceinline__ void for_each_slot_block(int64_t slots, bool persistent, Task&& task) {
  for_each_task(slots * Blocks, persistent, [&](int64_t t) {
    task(t / Blocks, static_cast<int>(t % Blocks));
    return true;
  });
}

// The most slots a flat state-rows launch orders longest first (slot_by_length's cost grows with
// their square).
constexpr int kLongestFirstSlots = 256;

// Longest first: the slot of rank `rank` when the batch's slots are ordered by their chunk
// counts (offsets[s + 1] - offsets[s]), longest first, ties by index; `rank` itself (the given
// order) past MaxSlots slots, where each CTA's O(slots^2 / threads) count would cost more than the
// order saves. Every thread of the CTA calls it. For flat launches of sequential kernels over
// (slot, head) pairs: the sequences on the critical path start in the first wave.
template <int MaxSlots>
__device__ __forceinline__ int64_t slot_by_length(const int32_t* offsets, int64_t slots,
                                                  int64_t rank) {
  __shared__ int64_t picked;
  if (threadIdx.x == 0) picked = rank;
  __syncthreads();
  if (slots <= MaxSlots)
    for (int64_t i = threadIdx.x; i < slots; i += blockDim.x) {
      const int32_t li = offsets[i + 1] - offsets[i];
      int64_t r = 0;
      for (int64_t j = 0; j < slots; ++j) {
        const int32_t lj = offsets[j + 1] - offsets[j];
        r += lj > li || (lj == li && j < i);
      }
      if (r == rank) picked = i;
    }
  __syncthreads();
  const int64_t out = picked;
  __syncthreads();  // before a later call writes it again
  return out;
}

// The flat launch of a sequential kernel over (slot, head) pairs, grid (slots, heads), longest
// sequences first: CTA L = blockIdx.x + gridDim.x blockIdx.y takes the slot of rank L / heads
// (slot_by_length) and head L % heads: `task(slot, head)`. Parts = 2 (the split state rows):
// grid (slots + k, heads), k = split_rank_limit(...): the k longest slots have two CTAs per head,
// side by side (they read the same chunk rows) and first, the others one: `task(slot, head,
// part, may_split)`, may_split for the k longest (only those may be past a balanced share).
template <int MaxSlots, int Parts = 1, class Task>
__device__ __forceinline__ void longest_first(const int32_t* offsets, int64_t slots, Task&& task) {
  static_assert(Parts == 1 || Parts == 2, "one or two CTAs per (slot, head)");
  const int64_t heads = gridDim.y;
  const int64_t at = blockIdx.x + static_cast<int64_t>(gridDim.x) * blockIdx.y;
  const int64_t k = Parts == 2 ? static_cast<int64_t>(gridDim.x) - slots : 0;
  int64_t rank = at / heads;
  int head = static_cast<int>(at % heads), part = 0;
  if (at < 2 * k * heads) {
    rank = at / (2 * heads);
    head = static_cast<int>(at % (2 * heads)) / 2;
    part = static_cast<int>(at % 2);
  } else if (k > 0) {
    rank = k + (at - 2 * k * heads) / heads;
  }
  const int64_t slot = slot_by_length<MaxSlots>(offsets, slots, rank);
  if constexpr (std::is_invocable_v<Task, int64_t, int>)
    task(slot, head);
  else
    task(slot, head, part, rank < k);
}

// How many of a batch's longest slots a split state-rows launch gives two CTAs (longest_first):
// a slot is split when its chunks exceed heads x the batch's chunks / SMs by a quarter
// (rows_split), so fewer than SMs / heads slots ever are.
inline int64_t split_rank_limit(int64_t slots, int heads, int multiprocessors) {
  const int64_t k = heads > 0 ? multiprocessors / heads : 0;
  return k < slots ? k : slots;
}

// The first grid dimension of a sequential kernel's launch (for_each_slot_block): one CTA per
// task, false past what a grid's first dimension holds.
inline bool slot_block_tasks(int64_t slots, int blocks, unsigned& tasks) {
  const int64_t n = slots * blocks;
  if (slots < 0 || n > 0x7fffffff) return false;
  tasks = static_cast<unsigned>(n);
  return true;
}

// A state-rows launch with two CTAs per (slot, head) (knob `state` = 3 of native_kda and
// native_gdn): what CTA `part` of slot s does, decided on the device from the chunk offsets. A
// slot whose chunks exceed a balanced share of the launch by a quarter (heads x the batch's
// chunks / SMs: its chain of chunks would outlast the rest) is split: each CTA runs half of its
// warps, over half the value columns, so the chain runs on two SMs with half the work per chunk
// on each. Other slots run whole in part 0 (part 1 returns at once). A CTA has its SM alone
// either way (its shared memory is the unsplit launch's). The quarter: a split costs (each half
// reads the chunk's W and k rows again), so a chain only a little past the share gains less than
// that (session 22, H100: with the longest slot 1.11x and 1.13x its share, splitting was 1-2%
// slower than state 2; at 1.76x, 10% faster).
struct RowsSplit {
  bool runs;       // this CTA has work
  int warps;       // warps 0 .. warps - 1 run; the rest return at once
  int col0, cols;  // the value columns they cover
};
template <int Warps>
__device__ __forceinline__ RowsSplit rows_split(const int32_t* offsets, int64_t slots, int64_t s,
                                                int part, bool may_split, int heads, int sms,
                                                int cols) {
  const int64_t chunks = offsets[s + 1] - offsets[s], total = offsets[slots];
  if (!may_split || 4 * chunks * sms <= 5 * static_cast<int64_t>(heads) * total)
    return {part == 0, Warps, 0, cols};
  return {true, Warps / 2, part * (cols / 2), cols / 2};
}

// rows_split in a launch of Parts CTAs per (slot, head): with one, every slot runs whole.
template <int Warps, int Parts>
__device__ __forceinline__ RowsSplit rows_part(const int32_t* offsets, int64_t slots, int64_t s,
                                               int part, bool may_split, int heads, int sms,
                                               int cols) {
  if constexpr (Parts == 1)
    return {true, Warps, 0, cols};
  else
    return rows_split<Warps>(offsets, slots, s, part, may_split, heads, sms, cols);
}

// A barrier over threads 0 .. threads - 1 (a multiple of 32; barrier 1, so that a kernel's
// __syncthreads elsewhere is not disturbed): the state-rows launches after rows_split.
__device__ __forceinline__ void sync_rows(int threads) {
  asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory");
}

// A sequential kernel's launch over (slot, V-block group) tasks (for_each_slot_block), checked
// before anything is launched: the kernel, its threads, shared memory and tasks per slot (its
// V-block groups), then plan() sets the first grid dimension.
template <class P>
struct SlotBlockLaunch {
  void (*kernel)(const P) = nullptr;
  int threads = 0;
  std::size_t bytes = 0;
  int blocks = 1;
  unsigned x = 0;
  // The split state rows: the SMs their kernel's rule reads (its Params' count, from one
  // device_multiprocessors call), for a flat grid of slots + split_rank_limit CTAs per head
  // (longest_first); 0 for every other launch.
  int split_multiprocessors = 0;

  // Allows the kernel its shared memory and sets the grid's first dimension to slots * blocks
  // tasks (persistent: the CTAs resident at once over `heads`). False where any step fails.
  bool plan(int64_t slots, bool persistent, unsigned heads) {
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(bytes)) != cudaSuccess ||
        !slot_block_tasks(slots, blocks, x))
      return false;
    if (persistent) return persistent_workers(kernel, threads, bytes, heads, x);
    if (split_multiprocessors > 0)
      x = static_cast<unsigned>(
          slots + split_rank_limit(slots, static_cast<int>(heads), split_multiprocessors));
    return true;
  }
  void launch(unsigned heads, cudaStream_t stream, const P& p) const {
    kernel<<<dim3(x, heads), threads, bytes, stream>>>(p);
  }
};

}  // namespace eagle::native::linear_attention
