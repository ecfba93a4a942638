// The Hopper varlen forward kernel: one CTA = a producer warpgroup (one thread issues TMA loads
// of Q and of the K/V tiles into 2-stage mbarrier rings) and two consumer warpgroups (64 q rows
// each: S = Q K^T by wgmma, online softmax in registers, O += P V by wgmma with P in registers).
// The consumers overlap the softmax of kv tile n with the P V product of tile n + 1 and take
// turns on the tensor cores (ping-pong); kv tiles run last to first, so the masked ones (the
// sequence's end, the causal diagonal) come first.
#pragma once

#include <cmath>
#include <cstdint>

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_conversion.h>
#include <cute/arch/cluster_sm90.hpp>
#include <cute/tensor.hpp>

#include "engines/native/attention/fwd_softmax.cuh"
#include "engines/native/attention/fwd_traits.cuh"
#include "engines/native/attention/tasks.cuh"

namespace eagle::native::attention::fwd {

using namespace cute;
using Barrier = cutlass::arch::ClusterTransactionBarrier;

template <class Traits>
struct FwdParams {
  VarlenShape shape;
  TaskGrid grid;
  typename Traits::Element* o;
  float* lse;
  float scale_log2;  // scale * log2(e)
  typename Traits::TmaQ tma_q;
  typename Traits::TmaKV tma_k;
  typename Traits::TmaKV tma_v;
};

// Where a ring of kStages slots stands: the slot, and the parity of its barriers' phase.
template <int kStages>
struct RingState {
  int stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

// Keeps this thread's ordinary shared-memory accesses on their side of a barrier's asm statement
// (CUTLASS's mbarrier and named-barrier asm carries no memory clobber).
__device__ __forceinline__ void compiler_fence() {
  asm volatile("" ::: "memory");
}

// One task's geometry as both roles see it (they must agree on `kv_blocks`).
template <class Traits>
struct TileWork {
  int64_t row_begin, row_end;  // the q tile's rows
  int q_first;                 // sequence-local index of the tile's first q row
  int q_len, kv_len;
  int64_t kv_begin;
  int kv_blocks;  // kv tiles this q tile reads: [0, kv_blocks)

  __device__ __forceinline__ explicit TileWork(const Task& t, bool causal) {
    row_begin = t.row_begin;
    row_end = t.row_end;
    q_first = int(t.row_begin - t.q_begin);
    q_len = int(t.q_end - t.q_begin);
    kv_len = int(t.kv_end - t.kv_begin);
    kv_begin = t.kv_begin;
    int64_t blocks = (int64_t(kv_len) + Traits::kBlockN - 1) / Traits::kBlockN;
    if (causal) {
      // The tile's last row sees keys up to last_q + kv_len - q_len.
      const int64_t last_key = (t.row_end - 1 - t.q_begin) + int64_t(kv_len) - q_len;
      const int64_t causal_blocks = last_key < 0 ? 0 : last_key / Traits::kBlockN + 1;
      blocks = blocks < causal_blocks ? blocks : causal_blocks;
    }
    kv_blocks = t.seq < 0 || t.row_end <= t.row_begin ? 0 : int(blocks);
  }

  // Whether kv tile n holds keys past the sequence or past the diagonal of the tile's first row.
  __device__ __forceinline__ bool needs_mask(int n, bool causal) const {
    const int64_t last_col = int64_t(n + 1) * Traits::kBlockN - 1;
    return last_col >= kv_len || (causal && last_col > int64_t(q_first) + kv_len - q_len);
  }
  __device__ __forceinline__ bool partial(int n) const {
    return int64_t(n + 1) * Traits::kBlockN > kv_len;
  }
};

// ragged::sequence_of_chunk (upper_bound(offsets[0..slots], j) - 1) searched 8-ary: each round
// loads 8 offsets at once, so a task costs about log8 rather than log2 of N dependent loads (the
// producer's search is on the way to a flat CTA's first Q load). The offsets are non-decreasing
// (an exclusive scan); the result is clamped to [0, slots - 1] all the same.
__device__ __forceinline__ int64_t tile_sequence(const int32_t* offsets, int64_t slots, int64_t j) {
  // The first index whose offset exceeds j lies in [lo, hi]; [lo, hi) is still unread.
  int64_t lo = 0, hi = slots + 1;
  while (lo < hi) {
    const int64_t step = (hi - lo + 7) / 8;
    // Segment i is [lo + i * step, lo + (i + 1) * step); `below` counts the leading segments
    // whose last offset is <= j (a prefix, the offsets being sorted).
    int below = 0;
    bool run = true;
    CUTE_UNROLL
    for (int i = 0; i < 8; ++i) {
      const int64_t last = lo + (i + 1) * step - 1;
      const bool le = last < hi && int64_t(offsets[last < hi ? last : lo]) <= j;
      run = run && le;
      below += run ? 1 : 0;
    }
    lo += below * step;
    const int64_t end = lo + step - 1;  // segment `below`'s last index: its offset exceeds j
    hi = end < hi ? end : hi;
  }
  const int64_t s = lo - 1;
  return s < 0 ? 0 : (s > slots - 1 ? slots - 1 : s);
}

// make_task for the q side with tile_sequence: ragged::chunk_task's rows and clamps. With
// `reverse`, j stands for the sequence's tiles counted from its last one (same sequence, same
// set of tiles).
__device__ __forceinline__ Task make_q_task(const VarlenShape& s, const TaskGrid& g, int block,
                                            int64_t j, int head, bool reverse) {
  Task t;
  t.head = head;
  if (j < 0 || j >= g.tile_offsets[s.slots]) return t;
  t.seq = tile_sequence(g.tile_offsets, s.slots, j);
  sequence_rows(s.cu_q, t.seq, s.rows_q, t.q_begin, t.q_end);
  sequence_rows(s.cu_kv, t.seq, s.rows_kv, t.kv_begin, t.kv_end);
  const int64_t first = g.tile_offsets[t.seq], end = g.tile_offsets[t.seq + 1];
  t.tile = reverse ? end - 1 - j : j - first;
  t.row_begin = ragged::clamp_row(t.q_begin + t.tile * block, t.q_begin, t.q_end);
  t.row_end = ragged::clamp_row(t.row_begin + block, t.row_begin, t.q_end);
  return t;
}

// The tasks of this CTA, in the same order for every role (a loop, not a callback: the consumer
// body must inline into the kernel for ptxas to keep wgmma accumulators in flight).
// Flat: CTA x runs the sequence's tiles last to first, so the expensive ones (the last tiles of
// a sequence see the most keys under a causal mask) are dispatched first and the cheap ones fill
// the tail. Persistent: round k hands tasks k * W .. k * W + W - 1 to the W workers, worker w
// taking slot w in even rounds and slot W - 1 - w in odd ones (a snake). A plain round-robin
// gives a worker the same tile of every head when W is near a multiple of the active tiles (the
// worker that draws a long sequence's tile draws it H times); the snake breaks that period.
// Pure index arithmetic, no atomics: every role of a CTA walks the same sequence of tasks.
struct TaskCursor {
  int64_t round, count, active;
  int64_t workers, worker;
  bool flat;

  __device__ __forceinline__ TaskCursor(const VarlenShape& s, const TaskGrid& g) {
    active = active_tiles(s, g);
    flat = g.schedule == Schedule::flat;
    round = 0;
    workers = flat ? 1 : int64_t(gridDim.x);
    worker = flat ? 0 : int64_t(blockIdx.x);
    count = flat ? 1 : active * s.heads;  // flat: one task, tile blockIdx.x (< active)
  }
  __device__ __forceinline__ bool next(const VarlenShape& s, const TaskGrid& g, int block,
                                       Task& task) {
    for (;;) {
      const int64_t base = round * workers;
      if (base >= count) return false;
      const int64_t slot = (round & 1) != 0 ? workers - 1 - worker : worker;
      ++round;
      const int64_t i = base + slot;
      if (i >= count) continue;  // the last, partial round (the next one ends the loop)
      int64_t tile;
      int head;
      if (flat) {
        tile = int64_t(blockIdx.x);
        head = int(blockIdx.y);
      } else {
        decode_task(i, active, tile, head);
      }
      task = make_q_task(s, g, block, tile, head, flat);
      return true;
    }
  }
};

template <class Traits>
__device__ __forceinline__ void produce(const FwdParams<Traits>& p,
                                        typename Traits::SharedStorage& smem) {
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN;
  prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
  prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
  prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());

  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutKV{});
  Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutKV{});
  const int32_t rows_q = int32_t(p.shape.rows_q), rows_kv = int32_t(p.shape.rows_kv);
  Tensor mQ = p.tma_q.get_tma_tensor(
      make_shape(rows_q, typename Traits::HeadDim{}, int32_t(p.shape.heads)));
  Tensor mK = p.tma_k.get_tma_tensor(
      make_shape(rows_kv, typename Traits::HeadDim{}, int32_t(p.shape.kv_heads)));
  Tensor mV = p.tma_v.get_tma_tensor(
      make_shape(rows_kv, typename Traits::HeadDim{}, int32_t(p.shape.kv_heads)));
  const int group = p.shape.heads / p.shape.kv_heads;

  RingState<Traits::kStages> k_ring, v_ring;
  uint32_t q_phase = 0;
  TaskCursor tasks(p.shape, p.grid);
  Task task;
  while (tasks.next(p.shape, p.grid, kBlockM, task)) {
    const TileWork<Traits> work(task, p.shape.causal);
    if (work.kv_blocks == 0) continue;
    const int kv_head = task.head / group;

    // Q: wait until the consumers finished the previous task's S products.
    Tensor gQ =
        local_tile(domain_offset(make_coord(int32_t(work.row_begin), _0{}), mQ(_, _, task.head)),
                   Shape<Int<kBlockM>, typename Traits::HeadDim>{}, make_coord(_0{}, _0{}));
    auto [tQg, tQs] = tma_partition(p.tma_q, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
    Barrier::wait(&smem.q_empty, q_phase ^ 1u);
    Barrier::arrive_and_expect_tx(&smem.q_full, Traits::kQBytes);
    copy(p.tma_q.with(smem.q_full), tQg, tQs);
    q_phase ^= 1u;

    const auto kv_origin = make_coord(int32_t(work.kv_begin), _0{});
    Tensor gK = local_tile(domain_offset(kv_origin, mK(_, _, kv_head)),
                           Shape<Int<kBlockN>, typename Traits::HeadDim>{}, make_coord(_, _0{}));
    Tensor gV = local_tile(domain_offset(kv_origin, mV(_, _, kv_head)),
                           Shape<Int<kBlockN>, typename Traits::HeadDim>{}, make_coord(_, _0{}));
    auto [tKg, tKs] = tma_partition(p.tma_k, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
    auto [tVg, tVs] = tma_partition(p.tma_v, group_modes<0, 2>(sV), group_modes<0, 2>(gV));
    // Last kv tile first: the masked tiles (sequence end, diagonal) come first.
    for (int n = work.kv_blocks - 1; n >= 0; --n) {
      Barrier::wait(&smem.k_empty[k_ring.stage], k_ring.phase ^ 1u);
      Barrier::arrive_and_expect_tx(&smem.k_full[k_ring.stage], Traits::kKVBytes);
      copy(p.tma_k.with(smem.k_full[k_ring.stage]), tKg(_, n), tKs(_, k_ring.stage));
      k_ring.advance();
      Barrier::wait(&smem.v_empty[v_ring.stage], v_ring.phase ^ 1u);
      Barrier::arrive_and_expect_tx(&smem.v_full[v_ring.stage], Traits::kKVBytes);
      copy(p.tma_v.with(smem.v_full[v_ring.stage]), tVg(_, n), tVs(_, v_ring.stage));
      v_ring.advance();
    }
  }
}

template <class Traits>
__device__ __forceinline__ void consume(const FwdParams<Traits>& p,
                                        typename Traits::SharedStorage& smem, int tid) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kThreads = Traits::kConsumerThreads;
  // Named barriers among the consumers (ids after CUTLASS's reserved ones).
  constexpr int kZeroBarrier = 0, kTurnBarrier = 1, kEpilogueBarrier = 3;

  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutKV{});
  Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutKV{});
  Tensor sVt = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutVt{});

  typename Traits::MmaS mma_s;
  typename Traits::MmaO mma_o;
  auto thr_s = mma_s.get_thread_slice(tid);
  auto thr_o = mma_o.get_thread_slice(tid);
  Tensor tSrQ = thr_s.partition_fragment_A(sQ);   // (MMA, MMA_M, MMA_K)
  Tensor tSrK = thr_s.partition_fragment_B(sK);   // (MMA, MMA_N, MMA_K, stage)
  Tensor tOrV = thr_o.partition_fragment_B(sVt);  // (MMA, MMA_N, MMA_K, stage)
  Tensor tSrS = partition_fragment_C(mma_s, Shape<Int<kBlockM>, Int<kBlockN>>{});
  Tensor tOrO = partition_fragment_C(mma_o, Shape<Int<kBlockM>, Int<kHeadDim>>{});
  // (row, col) of each accumulator element within the tile.
  Tensor tScS =
      rowcol(thr_s.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{})));
  Tensor tOcO =
      rowcol(thr_o.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{})));
  Tensor S = rowcol(tSrS);
  Tensor O = rowcol(tOrO);
  constexpr int kRows = decltype(size<0>(S))::value;
  static_assert(kRows == 2);

  constexpr int kSize = decltype(size(tSrS))::value;
  // P in the element type, laid out as the A operand of the P V product.
  Tensor tOrP = make_tensor<Element>(acc_as_operand_a(tSrS.layout()));

  const bool causal = p.shape.causal;
  const int heads = p.shape.heads;
  RingState<Traits::kStages> k_ring, v_ring;
  uint32_t q_phase = 0;

  // S = Q K^T of the next K stage, left in flight.
  auto issue_s = [&] {
    Barrier::wait(&smem.k_full[k_ring.stage], k_ring.phase);
    wgmma_chain<true, false>(mma_s, tSrQ, tSrK(_, _, _, k_ring.stage), tSrS);
  };
  // Once S is complete: hand its K stage (and, after the task's last S, Q) back.
  auto release_k = [&](bool last_of_task) {
    Barrier::arrive(&smem.k_empty[k_ring.stage]);
    k_ring.advance();
    if (last_of_task) {
      Barrier::arrive(&smem.q_empty);
      q_phase ^= 1u;
    }
  };
  // Waits for kv tile n's V (the next V stage) and zeroes its rows past the sequence: they may
  // be NaN and 0 * NaN = NaN. Both consumer warpgroups take part (a barrier among them), so this
  // never runs inside a warpgroup's tensor-core turn.
  auto prepare_v = [&](const TileWork<Traits>& work, int n) {
    Barrier::wait(&smem.v_full[v_ring.stage], v_ring.phase);
    if (work.partial(n)) {
      compiler_fence();
      // 16 bytes at a time: the swizzle keeps 8-element runs contiguous.
      constexpr int kChunks = kHeadDim / 8;
      const int first = work.kv_len - n * kBlockN;
      for (int i = first * kChunks + tid; i < kBlockN * kChunks; i += kThreads) {
        Element* dst = &sV(i / kChunks, (i % kChunks) * 8, v_ring.stage);
        *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
      }
      // The tensor cores read through the async proxy.
      compiler_fence();
      cutlass::arch::fence_view_async_shared();
      cutlass::arch::NamedBarrier::sync(kThreads, kZeroBarrier);
    }
  };
  // O += P V of the V stage prepare_v waited for, left in flight.
  auto issue_pv = [&] { wgmma_chain<false, true>(mma_o, tOrP, tOrV(_, _, _, v_ring.stage), tOrO); };
  // Ping-pong: the two warpgroups take turns issuing their products, so one's softmax runs
  // while the other's products occupy the tensor cores. Warpgroup w waits on turn barrier w,
  // which the other warpgroup's arrival completes.
  const int warpgroup = tid / 128;
  auto wait_turn = [&] {
    if constexpr (Traits::kPingpong)
      cutlass::arch::NamedBarrier::sync(kThreads, kTurnBarrier + warpgroup);
  };
  auto pass_turn = [&] {
    if constexpr (Traits::kPingpong)
      cutlass::arch::NamedBarrier::arrive(kThreads, kTurnBarrier + (1 - warpgroup));
  };
  auto release_v = [&] {
    Barrier::arrive(&smem.v_empty[v_ring.stage]);
    v_ring.advance();
  };
  // Masks kv tile n's scores where needed and folds them into the running softmax.
  auto softmax_step = [&](const TileWork<Traits>& work, OnlineSoftmax<kRows>& softmax, int n,
                          float(&correction)[kRows]) {
    if (work.needs_mask(n, causal)) {
      // Replace (never add): keys past the sequence may be NaN padding. Column c of the tile
      // is key n * kBlockN + c; a row sees the columns below its limit.
      const int64_t key0 = int64_t(n) * kBlockN;
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        int64_t limit = work.kv_len;
        if (causal) {
          const int64_t q_row = work.q_first + get<0>(tScS(r, 0));
          const int64_t diag = q_row + work.kv_len - work.q_len + 1;
          limit = diag < limit ? diag : limit;
        }
        limit -= key0;
        const int col_limit = int(limit < 0 ? 0 : (limit > kBlockN ? kBlockN : limit));
        CUTE_UNROLL
        for (int c = 0; c < size<1>(S); ++c)
          if (int(get<1>(tScS(0, c))) >= col_limit) S(r, c) = -INFINITY;
      }
    }
    softmax.update(S, correction);
  };
  auto rescale_o = [&](const float(&correction)[kRows]) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      CUTE_UNROLL
      for (int c = 0; c < size<1>(O); ++c) O(r, c) *= correction[r];
    }
  };
  auto convert_p = [&] {
    cutlass::NumericArrayConverter<Element, float, kSize> convert;
    *reinterpret_cast<cutlass::Array<Element, kSize>*>(tOrP.data()) =
        convert(*reinterpret_cast<const cutlass::Array<float, kSize>*>(tSrS.data()));
  };

  // Warpgroup 0 takes the first turn. Every turn ends with one arrival on the other's barrier;
  // with this one, barrier 0 gets one arrival more than warpgroup 0 waits in its turns, which its
  // last wait below takes, so no arrival is left pending at exit.
  if constexpr (Traits::kPingpong)
    if (warpgroup == 1) cutlass::arch::NamedBarrier::arrive(kThreads, kTurnBarrier + 0);

  TaskCursor tasks(p.shape, p.grid);
  Task task;
  while (tasks.next(p.shape, p.grid, kBlockM, task)) {
    const TileWork<Traits> work(task, causal);
    OnlineSoftmax<kRows> softmax(p.scale_log2);
    clear(tOrO);
    if (work.kv_blocks > 0) {
      Barrier::wait(&smem.q_full, q_phase);
      // Last kv tile first (the masked ones). O is still zero: its first rescale is harmless.
      int n = work.kv_blocks - 1;
      float correction[kRows];
      wait_turn();
      issue_s();
      pass_turn();
      warpgroup_wait<0>();
      warpgroup_fence_operand(tSrS);
      release_k(n == 0);
      softmax_step(work, softmax, n, correction);
      convert_p();
      // Steady state: S of tile n runs on the tensor cores while P V of tile n + 1 does too,
      // and the softmax of tile n overlaps the P V product. O takes tile n + 1's correction
      // while S runs, before P V of tile n + 1 adds to it.
      for (--n; n >= 0; --n) {
        prepare_v(work, n + 1);
        wait_turn();
        issue_s();
        rescale_o(correction);
        issue_pv();
        pass_turn();
        warpgroup_wait<1>();
        warpgroup_fence_operand(tSrS);
        release_k(n == 0);
        softmax_step(work, softmax, n, correction);
        warpgroup_wait<0>();
        warpgroup_fence_operand(tOrO);
        release_v();
        convert_p();
      }
      prepare_v(work, 0);
      wait_turn();
      rescale_o(correction);
      issue_pv();
      pass_turn();
      warpgroup_wait<0>();
      warpgroup_fence_operand(tOrO);
      release_v();
    }

    // Epilogue: normalise, stage this warpgroup's 64 rows in shared memory, then store them 16
    // bytes a thread, coalesced, for the rows of this sequence only (the tile may run into the
    // next sequence's rows).
    float inv_sum[kRows], lse[kRows];
    softmax.finish(inv_sum, lse, p.scale_log2 * float(M_LN2));
    // The previous task's rows are out of the staging rows before they are overwritten.
    compiler_fence();
    cutlass::arch::NamedBarrier::sync(128, kEpilogueBarrier + warpgroup);
    compiler_fence();
    const bool writes_lse = p.lse != nullptr && (tid % 4) == 0;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int tile_row = get<0>(tOcO(r, 0));
      CUTE_UNROLL
      for (int c = 0; c < size<1>(O); c += 2) {
        cutlass::Array<float, 2> pair;
        pair[0] = O(r, c) * inv_sum[r];
        pair[1] = O(r, c + 1) * inv_sum[r];
        cutlass::NumericArrayConverter<Element, float, 2> to_element;
        *reinterpret_cast<cutlass::Array<Element, 2>*>(
            &smem.o[tile_row * Traits::kOStride + get<1>(tOcO(r, c))]) = to_element(pair);
      }
      const int64_t row = work.row_begin + tile_row;
      if (writes_lse && row < work.row_end) p.lse[row * heads + task.head] = lse[r];
    }
    compiler_fence();
    cutlass::arch::NamedBarrier::sync(128, kEpilogueBarrier + warpgroup);
    compiler_fence();
    constexpr int kChunks = kHeadDim / 8;
    for (int i = tid % 128; i < 64 * kChunks; i += 128) {
      const int tile_row = warpgroup * 64 + i / kChunks;
      const int col = (i % kChunks) * 8;
      const int64_t row = work.row_begin + tile_row;
      if (row < work.row_end)
        *reinterpret_cast<uint4*>(p.o + (row * heads + task.head) * kHeadDim + col) =
            *reinterpret_cast<const uint4*>(&smem.o[tile_row * Traits::kOStride + col]);
    }
  }
  if constexpr (Traits::kPingpong)
    if (warpgroup == 0) cutlass::arch::NamedBarrier::sync(kThreads, kTurnBarrier + 0);
}

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    varlen_fwd_kernel(const __grid_constant__ FwdParams<Traits> params) {
  extern __shared__ __align__(1024) unsigned char smem_bytes[];
  auto& smem = *reinterpret_cast<typename Traits::SharedStorage*>(smem_bytes);
  const int warpgroup = int(threadIdx.x) / 128;
  // Flat grids are sized for the capacity: CTAs past the batch's tiles leave at once.
  if (params.grid.schedule == Schedule::flat &&
      int64_t(blockIdx.x) >= active_tiles(params.shape, params.grid))
    return;

  if (threadIdx.x == 0) {
    Barrier::init(&smem.q_full, 1);
    Barrier::init(&smem.q_empty, Traits::kConsumerThreads);
    for (int s = 0; s < Traits::kStages; ++s) {
      Barrier::init(&smem.k_full[s], 1);
      Barrier::init(&smem.v_full[s], 1);
      Barrier::init(&smem.k_empty[s], Traits::kConsumerThreads);
      Barrier::init(&smem.v_empty[s], Traits::kConsumerThreads);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  if (warpgroup == 0) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegisters>();
    if (threadIdx.x == 0) produce<Traits>(params, smem);
  } else {
    cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegisters>();
    consume<Traits>(params, smem, int(threadIdx.x) - 128);
  }
}

}  // namespace eagle::native::attention::fwd
