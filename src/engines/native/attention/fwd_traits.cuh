// Compile-time shape of the Hopper varlen forward: tile sizes, shared-memory layouts, the two
// wgmma tilings and the TMA load types, per (element type, head dim).
#pragma once

#include <cstdint>

// cute/tensor.hpp first: the atom headers lean on what it declares.
#include <cute/tensor.hpp>

#include <cutlass/numeric_types.h>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_atom.hpp>

namespace eagle::native::attention::fwd {

using namespace cute;

template <class Element_, int kHeadDim_>
struct FwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = 128;  // q rows per tile: 64 per consumer warpgroup
  static constexpr int kBlockN = 128;  // kv rows per pipeline stage
  static constexpr int kStages = 2;
  static constexpr int kConsumerWarpgroups = kBlockM / 64;
  static constexpr int kConsumerThreads = 128 * kConsumerWarpgroups;
  // The consumer warpgroups take turns on the tensor cores (fwd_kernel.cuh, consume).
  static constexpr bool kPingpong = true;
  static constexpr int kThreads = kConsumerThreads + 128;  // warpgroup 0 produces
  // setmaxnreg budgets: 24 * 128 + 240 * 256 <= 64 K registers of the SM.
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = 240;

  using BlockM = Int<kBlockM>;
  using BlockN = Int<kBlockN>;
  using HeadDim = Int<kHeadDim>;

  // Each consumer warpgroup owns 64 rows of both products.
  using AtomLayout = Layout<Shape<Int<kConsumerWarpgroups>, _1, _1>>;
  // S = Q K^T: both operands from shared memory, K-major.
  using MmaS = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, BlockN, HeadDim>>(), AtomLayout{}));
  // O += P V: P from registers, V^T from shared memory (V rows are kv, so V^T is MN-major).
  using MmaO = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, HeadDim, BlockN>, GMMA::Major::K,
                           GMMA::Major::MN>(),
      AtomLayout{}));

  // 128-byte swizzle: a row of 64 16-bit elements per swizzle atom, as TMA writes it.
  using SmemAtom = GMMA::Layout_K_SW128_Atom<Element>;
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom{}, Shape<BlockM, HeadDim>{}));
  using SmemLayoutKV = decltype(tile_to_shape(SmemAtom{}, Shape<BlockN, HeadDim, Int<kStages>>{}));
  // The same bytes as V, indexed (dim, kv row, stage).
  using SmemLayoutVt = decltype(composition(
      SmemLayoutKV{},
      make_ordered_layout(Shape<HeadDim, BlockN, Int<kStages>>{}, Step<_2, _1, _3>{})));

  static constexpr int kOStride = kHeadDim + 8;  // elements per staged output row

  static constexpr int kQBytes = kBlockM * kHeadDim * int(sizeof(Element));
  static constexpr int kKVBytes = kBlockN * kHeadDim * int(sizeof(Element));

  // Global tensors as (row, dim, head): [T, heads, D] row-major.
  using GmemLayout = Layout<Shape<int32_t, HeadDim, int32_t>, Stride<int64_t, _1, int64_t>>;

  static auto gmem_layout(int32_t rows, int32_t heads) {
    return make_layout(make_shape(rows, HeadDim{}, heads),
                       make_stride(int64_t(heads) * kHeadDim, _1{}, int64_t(kHeadDim)));
  }
  static auto make_tma_q(const Element* ptr, int32_t rows, int32_t heads) {
    return make_tma_copy(SM90_TMA_LOAD{}, make_tensor(make_gmem_ptr(ptr), gmem_layout(rows, heads)),
                         SmemLayoutQ{}, Shape<BlockM, HeadDim>{}, _1{});
  }
  static auto make_tma_kv(const Element* ptr, int32_t rows, int32_t heads) {
    return make_tma_copy(SM90_TMA_LOAD{}, make_tensor(make_gmem_ptr(ptr), gmem_layout(rows, heads)),
                         take<0, 2>(SmemLayoutKV{}), Shape<BlockN, HeadDim>{}, _1{});
  }
  using TmaQ = decltype(make_tma_q(nullptr, 1, 1));
  using TmaKV = decltype(make_tma_kv(nullptr, 1, 1));

  struct SharedStorage {
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutQ>> q;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutKV>> k;
    alignas(1024) cute::array_aligned<Element, cosize_v<SmemLayoutKV>> v;
    // The output tile on its way out, rows padded by 16 bytes (no bank conflicts either way).
    alignas(128) Element o[kBlockM * kOStride];
    uint64_t q_full, q_empty;
    uint64_t k_full[kStages], k_empty[kStages];
    uint64_t v_full[kStages], v_empty[kStages];
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
};

}  // namespace eagle::native::attention::fwd
