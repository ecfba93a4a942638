// What our GEMMs serve, apart from the kernels (so that every build, with or without Hopper
// kernels, declines the same shapes for the same reasons).
#include <cstdint>
#include <limits>

#include "engines/native/gemm/gemm_epilogue.hpp"
#include "engines/native/structured_support.hpp"

namespace eagle::native::gemm {

namespace {

// The rules every kernel shares: bf16 or f16, sizes in [1, 2^31).
const char* common_refusal(DType dtype, int64_t m, int64_t n, int64_t k) noexcept {
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  if (dtype != DType::bf16 && dtype != DType::f16) return "the kernels hold bf16 and f16";
  if (m < 1 || n < 1 || k < 1) return "M, N and K must be at least 1";
  if (m > kMaxInt || n > kMaxInt || k > kMaxInt) return "M, N and K must fit in 32 bits";
  return "";
}

}  // namespace

const char* epilogue_gemm_refusal(const EpilogueGemmArgs& a) noexcept {
  if (const char* why = common_refusal(a.dtype, a.m, a.n, a.k); *why) return why;
  // TMA moves 16-byte pieces: each contiguous extent and each leading dimension a multiple of 8.
  if (a.n % 8 != 0 || a.k % 8 != 0) return "N and K must be multiples of 8 (16-byte rows)";
  if (a.lda % 8 != 0 || a.ldb % 8 != 0 || a.ldy % 8 != 0 || a.ld_aux % 8 != 0)
    return "every leading dimension must be a multiple of 8 elements (16 bytes)";
  if (a.lda < a.k || a.ldb < (a.b_col_major ? a.k : a.n) || a.ldy < a.n || a.ld_aux < a.n)
    return "a leading dimension is shorter than its row";
  return "";
}

bool epilogue_gemm_aligned(const EpilogueGemmArgs& a) noexcept {
  return aligned16(a.a) && aligned16(a.b) && aligned16(a.y) && (!a.aux || aligned16(a.aux)) &&
         (!a.bias || aligned16(a.bias));
}

}  // namespace eagle::native::gemm
