// Host side of the Hopper varlen forward: which shapes it serves, the TMA descriptors, the grid
// of each schedule and the launch.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "engines/native/attention/fwd_kernel.cuh"
#include "engines/native/attention/varlen_kernels.hpp"

namespace eagle::native::attention {

namespace {

constexpr int kFwdBlockRows = 128;

bool serves(const VarlenShape& s) {
  return (s.dtype == DType::bf16 || s.dtype == DType::f16) && s.head_dim == s.value_dim &&
         (s.head_dim == 64 || s.head_dim == 128);
}

bool aligned16(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0;
}

template <class Traits>
bool launch(const FwdArgs& a, cudaStream_t stream) {
  using Element = typename Traits::Element;
  const VarlenShape& s = a.shape;
  // A TMA dimension must be >= 1; a side with no rows is never loaded (its sequences are empty).
  const int32_t rows_q = int32_t(s.rows_q > 0 ? s.rows_q : 1);
  const int32_t rows_kv = int32_t(s.rows_kv > 0 ? s.rows_kv : 1);
  fwd::FwdParams<Traits> params{
      s,
      a.grid,
      static_cast<Element*>(a.o),
      a.lse,
      s.scale * float(M_LOG2E),
      Traits::make_tma_q(static_cast<const Element*>(a.q), rows_q, s.heads),
      Traits::make_tma_kv(static_cast<const Element*>(a.k), rows_kv, s.kv_heads),
      Traits::make_tma_kv(static_cast<const Element*>(a.v), rows_kv, s.kv_heads)};

  auto kernel = fwd::varlen_fwd_kernel<Traits>;
  // Every call, not once: cheap, and right after a device reset or on another device too.
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           Traits::kSmemBytes) != cudaSuccess)
    return false;
  dim3 grid;
  if (a.grid.schedule == Schedule::flat)
    grid = dim3(unsigned(a.grid.capacity_tiles), unsigned(s.heads));
  else
    grid = dim3(unsigned(persistent_workers(a.grid, s.heads, 1)));
  kernel<<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(params);
  return cudaPeekAtLastError() == cudaSuccess;
}

template <class Element>
bool dispatch_dim(const FwdArgs& a, cudaStream_t stream) {
  if (a.shape.head_dim == 64) return launch<fwd::FwdTraits<Element, 64>>(a, stream);
  return launch<fwd::FwdTraits<Element, 128>>(a, stream);
}

}  // namespace

int fwd_block_rows(const VarlenShape& shape) {
  return serves(shape) ? kFwdBlockRows : 0;
}

bool varlen_fwd(const FwdArgs& a, void* stream) noexcept {
  const VarlenShape& s = a.shape;
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  if (!serves(s) || s.slots < 1 || s.heads < 1 || s.kv_heads < 1 || s.heads % s.kv_heads != 0)
    return false;
  if (!a.q || !a.k || !a.v || !a.o || !s.cu_q || !s.cu_kv || !a.grid.tile_offsets) return false;
  if (!aligned16(a.q) || !aligned16(a.k) || !aligned16(a.v) || !aligned16(a.o)) return false;
  // TMA coordinates and grid sizes are 32-bit.
  if (s.rows_q < 0 || s.rows_kv < 0 || s.rows_q > kInt32Max || s.rows_kv > kInt32Max ||
      a.grid.capacity_tiles < 0 || a.grid.capacity_tiles > kInt32Max)
    return false;
  if (a.grid.schedule == Schedule::flat) {
    if (s.heads > 65535) return false;  // gridDim.y
  } else if (a.grid.schedule != Schedule::persistent) {
    return false;
  }
  if (a.grid.capacity_tiles == 0) return true;
  const auto st = static_cast<cudaStream_t>(stream);
  if (s.dtype == DType::bf16) return dispatch_dim<cutlass::bfloat16_t>(a, st);
  return dispatch_dim<cutlass::half_t>(a, st);
}

}  // namespace eagle::native::attention
