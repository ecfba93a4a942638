#include <cuda_runtime.h>

#include "engines/native/embedding_kernels.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/rows.cuh"

namespace eagle::native {

namespace {

// The NaN pattern as one copy unit, built from its words (no wide load from the parameters).
template <class U>
__device__ __forceinline__ U nan_unit(const EmbeddingArgs& a) {
  if constexpr (sizeof(U) == 16) {
    return make_uint4(a.nan[0], a.nan[1], a.nan[2], a.nan[3]);
  } else {
    return static_cast<U>(a.nan[0]);
  }
}

template <class U, class Id>
__global__ void embedding_kernel(EmbeddingArgs a, int group) {
  const U* __restrict__ table = static_cast<const U*>(a.table);
  const Id* __restrict__ ids = static_cast<const Id*>(a.ids);
  U* __restrict__ y = static_cast<U*>(a.y);
  const U nan = nan_unit<U>(a);
  const rows::Walk w = rows::walk(group);
  for (int64_t r = w.first; r < a.rows; r += w.step) {
    const int64_t id = static_cast<int64_t>(ids[r]);
    U* yr = y + r * a.units;
    if (id < 0 || id >= a.vocab) {  // the reference refuses this call; never read outside
      for (int64_t i = w.lane; i < a.units; i += group) yr[i] = nan;
      continue;
    }
    const U* src = table + id * a.units;
#pragma unroll 4
    for (int64_t i = w.lane; i < a.units; i += group) yr[i] = src[i];
  }
}

template <class U, class Id>
bool launch(const EmbeddingArgs& a, const RowGeometry& g, void* stream) noexcept {
  embedding_kernel<U, Id><<<g.grid, g.threads, 0, static_cast<cudaStream_t>(stream)>>>(a, g.group);
  return launch_succeeded();
}

template <class Id>
EmbeddingLauncher pick(int unit_bytes) {
  switch (unit_bytes) {
    case 16:
      return &launch<uint4, Id>;
    case 4:
      return &launch<uint32_t, Id>;
    case 2:
      return &launch<uint16_t, Id>;
    default:
      return nullptr;
  }
}

}  // namespace

EmbeddingLauncher embedding_launcher(int unit_bytes, DType ids) {
  if (ids == DType::i32) return pick<int32_t>(unit_bytes);
  if (ids == DType::i64) return pick<int64_t>(unit_bytes);
  return nullptr;
}

}  // namespace eagle::native
