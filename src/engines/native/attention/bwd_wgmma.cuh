// Hopper wgmma (m64nNk16, f32 accumulators) for the varlen attention backward: shared-memory
// descriptors of 128-byte-swizzled tiles, and the SS / RS instructions for N in {64, 128}
// (CUTLASS's GMMA ops).
// Accumulator layout per warp w of the warpgroup (g = lane / 4, t = lane % 4): d[4j + 0..1] =
// (row 16w + g, cols 8j + 2t..), d[4j + 2..3] = (row 16w + g + 8, same cols), the mma.sync C
// layout per n8 tile, so two neighbouring n8 tiles repack into one register A tile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <cute/arch/mma_sm90_gmma.hpp>

namespace eagle::native::attention::bwd {

// Descriptor of a tile in shared memory laid out in 128-byte swizzle atoms (8 rows of 64
// 16-bit elements, 1024-byte aligned): start address, leading and stride byte offsets (bytes).
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr >> 4) & 0x3FFF) |
         (static_cast<uint64_t>((lbo >> 4) & 0x3FFF) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
// All but the newest committed group complete.
__device__ __forceinline__ void wgmma_wait_prev() {
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
}
// Pins registers an in-flight wgmma reads or writes: no instruction moves across this point.
template <int kN>
__device__ __forceinline__ void fence_regs(float (&r)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int kN>
__device__ __forceinline__ void fence_regs(uint32_t (&r)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// CUTLASS's wgmma instructions (cute/arch/mma_sm90_gmma.hpp), m64nNk16 with f32 accumulators,
// picked by element type, N (kRegs = N / 2 accumulators per thread) and operand majors (1 = MN).
namespace gmma = cute::SM90::GMMA;
constexpr gmma::Major major(int mn) {
  return mn ? gmma::Major::MN : gmma::Major::K;
}

template <bool kBf16, int kRegs, int kTa, int kTb>
using GmmaSS = std::conditional_t<
    kRegs == 32,
    std::conditional_t<kBf16, gmma::MMA_64x64x16_F32BF16BF16_SS<major(kTa), major(kTb)>,
                       gmma::MMA_64x64x16_F32F16F16_SS<major(kTa), major(kTb)>>,
    std::conditional_t<kBf16, gmma::MMA_64x128x16_F32BF16BF16_SS<major(kTa), major(kTb)>,
                       gmma::MMA_64x128x16_F32F16F16_SS<major(kTa), major(kTb)>>>;

template <bool kBf16, int kRegs, int kTb>
using GmmaRS = std::conditional_t<
    kRegs == 32,
    std::conditional_t<kBf16, gmma::MMA_64x64x16_F32BF16BF16_RS<gmma::Major::K, major(kTb)>,
                       gmma::MMA_64x64x16_F32F16F16_RS<gmma::Major::K, major(kTb)>>,
    std::conditional_t<kBf16, gmma::MMA_64x128x16_F32BF16BF16_RS<gmma::Major::K, major(kTb)>,
                       gmma::MMA_64x128x16_F32F16F16_RS<gmma::Major::K, major(kTb)>>>;

template <class Op, int kRegs, std::size_t... I>
__device__ __forceinline__ void gmma_ss(float (&d)[kRegs], uint64_t da, uint64_t db,
                                        std::index_sequence<I...>) {
  Op::fma(da, db, d[I]...);
}

template <class Op, int kRegs, std::size_t... I>
__device__ __forceinline__ void gmma_rs(float (&d)[kRegs], const uint32_t (&a)[4], uint64_t db,
                                        std::index_sequence<I...>) {
  Op::fma(a[0], a[1], a[2], a[3], db, d[I]...);
}

// d (64 x N) += A (64 x 16, descriptor) * B (16 x N, descriptor), N = 2 kRegs in {64, 128};
// kTa / kTb: 1 = MN-major.
template <bool kBf16, int kTa, int kTb, int kRegs>
__device__ __forceinline__ void wgmma_ss(float (&d)[kRegs], uint64_t da, uint64_t db) {
  static_assert(kRegs == 32 || kRegs == 64, "wgmma_ss: N must be 64 or 128");
  gmma_ss<GmmaSS<kBf16, kRegs, kTa, kTb>>(d, da, db, std::make_index_sequence<kRegs>{});
}

// d (64 x N) += A (64 x 16, registers) * B (16 x N, descriptor); kTb: 1 = MN-major.
template <bool kBf16, int kTb, int kRegs>
__device__ __forceinline__ void wgmma_rs(float (&d)[kRegs], const uint32_t (&a)[4], uint64_t db) {
  static_assert(kRegs == 32 || kRegs == 64, "wgmma_rs: N must be 64 or 128");
  gmma_rs<GmmaRS<kBf16, kRegs, kTb>>(d, a, db, std::make_index_sequence<kRegs>{});
}

// acc1 = A1 B1^T and acc2 = A2 B2^T over the head dim kD, A and B K-major tiles of kD columns in
// 64-column swizzle panels of kRowsA and kRowsB rows (addresses of their first rows), as two
// commit groups: on return acc1 is complete and acc2 still in the tensor cores (wgmma_wait_all
// and fence_regs(acc2) before reading it), so the caller works on acc1 meanwhile.
template <bool kBf16, int kD, int kRowsA, int kRowsB>
__device__ __forceinline__ void two_products(float (&acc1)[32], float (&acc2)[32], uint32_t a1,
                                             uint32_t b1, uint32_t a2, uint32_t b2) {
#pragma unroll
  for (int i = 0; i < 32; ++i) acc1[i] = acc2[i] = 0.f;
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    const uint32_t ao = (kk / 4) * kRowsA * 128 + (kk % 4) * 32;
    const uint32_t bo = (kk / 4) * kRowsB * 128 + (kk % 4) * 32;
    wgmma_ss<kBf16, 0, 0>(acc1, sw128_desc(a1 + ao, 16, 1024), sw128_desc(b1 + bo, 16, 1024));
  }
  wgmma_commit();
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    const uint32_t ao = (kk / 4) * kRowsA * 128 + (kk % 4) * 32;
    const uint32_t bo = (kk / 4) * kRowsB * 128 + (kk % 4) * 32;
    wgmma_ss<kBf16, 0, 0>(acc2, sw128_desc(a2 + ao, 16, 1024), sw128_desc(b2 + bo, 16, 1024));
  }
  wgmma_commit();
  wgmma_wait_prev();
  fence_regs(acc1);
}

}  // namespace eagle::native::attention::bwd
