#include <algorithm>

#include "engines/native/dtype_dispatch.cuh"
#include "engines/native/launch_status.hpp"
#include "engines/native/norm_bwd_kernels.hpp"
#include "engines/native/pack_io.cuh"
#include "engines/native/row_stats.cuh"
#include "engines/native/rows.cuh"

namespace eagle::native {

namespace {

// g = dy * scale and xhat = (x - mu) * inv for one pack.
template <class T, int VEC>
__device__ __forceinline__ void pack_g_xhat(const T* scale, int64_t i, float mu, float inv,
                                            const float (&dy)[VEC], const float (&x)[VEC],
                                            float (&g)[VEC], float (&xhat)[VEC]) {
  float s[VEC];
  if (scale) rows::load<T, VEC>(scale, i, s);
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    // Rounded here, never fused into a later fma: dx subtracts the row mean of these very g,
    // and a fused g - mean_g would leave g's rounding error where exact math has 0.
    g[j] = scale ? __fmul_rn(dy[j], s[j]) : dy[j];
    xhat[j] = (x[j] - mu) * inv;
  }
}

// A pack's terms of the row sums of g and g * xhat, added in float (the caller folds the
// thread's float sums into double once per row or per pack).
template <int VEC>
__device__ __forceinline__ void pack_sums(const float (&g)[VEC], const float (&xhat)[VEC],
                                          float& sum_g, float& sum_gx) {
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    sum_g += g[j];
    sum_gx += g[j] * xhat[j];
  }
}

template <int VEC>
__device__ __forceinline__ void pack_dx(const float (&g)[VEC], const float (&xhat)[VEC], float inv,
                                        float mean_g, float mean_gx, float (&dx)[VEC]) {
#pragma unroll
  for (int j = 0; j < VEC; ++j) dx[j] = inv * (g[j] - mean_g - xhat[j] * mean_gx);
}

template <class T, int VEC>
__device__ __forceinline__ void unpack(const rows::Pack<T, VEC>& p, float (&out)[VEC]) {
#pragma unroll
  for (int j = 0; j < VEC; ++j) out[j] = detail::to_acc(p.v[j]);
}

// One row's packs of dy and x as loaded (16-bit types stay packed: half the registers of
// floats), with its statistics.
template <class T, int VEC>
struct CachedRow {
  rows::Pack<T, VEC> dy[kCachedPacks], x[kCachedPacks];
  float mu, inv;
};

// Issues the loads of row r (the packs this thread owns); they complete while the previous row
// is reduced and written.
template <class T, int VEC>
__device__ __forceinline__ void load_row(const NormBwdArgs& a, int64_t r, int64_t start,
                                         int64_t stride, CachedRow<T, VEC>& row) {
  using P = rows::Pack<T, VEC>;
  const T* dyr = static_cast<const T*>(a.dy) + r * a.len;
  const T* xr = static_cast<const T*>(a.x) + r * a.len;
#pragma unroll
  for (int k = 0; k < kCachedPacks; ++k) {
    const int64_t i = start + k * stride;
    if (i < a.len) {
      row.dy[k] = *reinterpret_cast<const P*>(dyr + i);
      row.x[k] = *reinterpret_cast<const P*>(xr + i);
    }
  }
  row.mu = a.mean ? a.mean[r] : 0.0f;
  row.inv = a.inv_std[r];
}

// Rows that fit the group's registers: one read of dy and x, the next row's loads in flight
// while this one is reduced. PARAMS: the group also sums dscale's and dbias's columns over its
// rows in float registers and writes them once to its slot of the workspace.
template <class T, int VEC, bool PARAMS>
__global__ void __launch_bounds__(kNormBwdCachedThreads)
    norm_bwd_cached_kernel(NormBwdArgs a, int group) {
  __shared__ row_stats::Sum2 scratch[2][32];
  const T* scale = static_cast<const T*>(a.scale);
  T* __restrict__ dx = static_cast<T*>(a.dx);
  const rows::Walk w = rows::walk(group);
  const int64_t len = a.len, stride = int64_t{group} * VEC, start = int64_t{w.lane} * VEC;
  const double n = static_cast<double>(len);
  float ps[PARAMS ? kCachedPacks : 1][VEC] = {}, pb[PARAMS ? kCachedPacks : 1][VEC] = {};
  CachedRow<T, VEC> cur;
  if (w.first < a.rows) load_row<T, VEC>(a, w.first, start, stride, cur);
  int parity = 0;
  for (int64_t r = w.first; r < a.rows; r += w.step) {
    const int64_t next = r + w.step;
    float sum_g = 0.0f, sum_gx = 0.0f;  // at most kCachedPacks * VEC terms a thread
#pragma unroll
    for (int k = 0; k < kCachedPacks; ++k) {
      const int64_t i = start + k * stride;
      if (i < len) {
        float vd[VEC], vx[VEC], g[VEC], xh[VEC];
        unpack<T, VEC>(cur.dy[k], vd);
        unpack<T, VEC>(cur.x[k], vx);
        pack_g_xhat<T, VEC>(scale, i, cur.mu, cur.inv, vd, vx, g, xh);
        pack_sums<VEC>(g, xh, sum_g, sum_gx);
        if constexpr (PARAMS) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            ps[k][j] += vd[j] * xh[j];
            pb[k][j] += vd[j];
          }
        }
      }
    }
    const row_stats::Sum2 t = row_stats::group_sum2({sum_g, sum_gx}, scratch[parity], group);
    parity ^= 1;
    const float mean_g = a.mean ? static_cast<float>(t.a / n) : 0.0f;
    const auto mean_gx = static_cast<float>(t.b / n);
    T* dxr = dx + r * len;
#pragma unroll
    for (int k = 0; k < kCachedPacks; ++k) {
      const int64_t i = start + k * stride;
      if (i < len) {
        float vd[VEC], vx[VEC], g[VEC], xh[VEC], out[VEC];
        unpack<T, VEC>(cur.dy[k], vd);
        unpack<T, VEC>(cur.x[k], vx);
        pack_g_xhat<T, VEC>(scale, i, cur.mu, cur.inv, vd, vx, g, xh);
        pack_dx<VEC>(g, xh, cur.inv, mean_g, mean_gx, out);
        pack_io::store<T, VEC>(dxr, i, out);
      }
    }
    if (next < a.rows) load_row<T, VEC>(a, next, start, stride, cur);
  }
  if constexpr (PARAMS) {
    // Slot w.first (one per group of the grid, w.step of them); a group that ran no row writes
    // its zeros too, so the finish adds every slot.
    float* slots = static_cast<float*>(a.workspace);
#pragma unroll
    for (int k = 0; k < kCachedPacks; ++k) {
      const int64_t i = start + k * stride;
      if (i < len)
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          slots[w.first * len + i + j] = ps[k][j];
          slots[(w.step + w.first) * len + i + j] = pb[k][j];
        }
    }
  }
}

// Registers of a staged thread: 16-bit rows of 512 packs (256 threads) with parameter gradients
// (32 column sums a thread) fit 80 (3 blocks an SM, no spills at sm_90a); f32 rows of 1024 packs
// take 512 threads, so 64 (2 blocks); without parameter gradients 64.
constexpr int norm_bwd_staged_registers(std::size_t elem, bool params) {
  return params && elem < 4 ? 80 : 64;
}

// Aligned rows of a block, staged: each thread copies its own packs of dy and x for the rows
// kNormBwdStages - 1 ahead into shared memory (cp.async) and reads back only those, so the wait
// on its own copies suffices (no barrier; a stage is refilled one row after this thread last
// read it, and those reads fed the stores before). Loads stay in flight through the row's
// reduction (one barrier) and its dx stores; registers hold only the scale's packs and, with
// PARAMS, the thread's columns' sums over its rows, written once to the block's slot.
template <class T, bool PARAMS>
__global__ void __maxnreg__(norm_bwd_staged_registers(sizeof(T), PARAMS))
    norm_bwd_staged_kernel(NormBwdArgs a) {
  constexpr int VEC = 16 / sizeof(T), P = kNormBwdStagedPacks, D = kNormBwdStages;
  using Pk = rows::Pack<T, VEC>;
  extern __shared__ uint4 smem[];  // packs [D][2 (dy, x)][P][threads], then the scratch
  const int threads = static_cast<int>(blockDim.x), tid = static_cast<int>(threadIdx.x);
  auto* scratch = reinterpret_cast<row_stats::Sum2*>(smem + D * 2 * P * threads);  // [2][32]
  const T* dy = static_cast<const T*>(a.dy);
  const T* x = static_cast<const T*>(a.x);
  const T* scale = static_cast<const T*>(a.scale);
  T* __restrict__ dx = static_cast<T*>(a.dx);
  const int64_t len = a.len, first = blockIdx.x, step = gridDim.x;
  const int64_t start = int64_t{tid} * VEC, stride = int64_t{threads} * VEC;
  const double n = static_cast<double>(len);
  const auto slot = [&](int stage, int t, int k) {
    return smem + ((stage * 2 + t) * P + k) * threads + tid;
  };
  // Copies row r's packs of this thread into `stage`; a commit group even when empty, so the
  // wait below always counts D - 1 newer groups.
  const auto issue = [&](int64_t r, int stage) {
    if (r < a.rows) {
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const int64_t i = start + k * stride;
        if (i < len) {
          row_stats::cp_async16(slot(stage, 0, k), dy + r * len + i);
          row_stats::cp_async16(slot(stage, 1, k), x + r * len + i);
        }
      }
    }
    row_stats::cp_async_commit();
  };
#pragma unroll
  for (int st = 0; st < D - 1; ++st) issue(first + st * step, st);
  Pk sc[P];
#pragma unroll
  for (int k = 0; k < P; ++k) {
    const int64_t i = start + k * stride;
    if (scale && i < len) sc[k] = *reinterpret_cast<const Pk*>(scale + i);
  }
  float ps[PARAMS ? P : 1][VEC] = {}, pb[PARAMS ? P : 1][VEC] = {};
  float mu = 0.0f, inv = 0.0f;
  if (first < a.rows) {
    mu = a.mean ? a.mean[first] : 0.0f;
    inv = a.inv_std[first];
  }
  int stage = 0, parity = 0;
  for (int64_t r = first; r < a.rows; r += step) {
    issue(r + (D - 1) * step, stage == 0 ? D - 1 : stage - 1);
    const int64_t next = r + step;
    float next_mu = 0.0f, next_inv = 0.0f;
    if (next < a.rows) {
      next_mu = a.mean ? a.mean[next] : 0.0f;
      next_inv = a.inv_std[next];
    }
    row_stats::cp_async_wait<D - 1>();  // row r's copies (this thread's) have landed
    float sum_g = 0.0f, sum_gx = 0.0f;  // at most P * VEC terms a thread
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int64_t i = start + k * stride;
      if (i < len) {
        float vd[VEC], vx[VEC], s[VEC];
        pack_io::unpack<T, VEC>(*slot(stage, 0, k), vd);
        pack_io::unpack<T, VEC>(*slot(stage, 1, k), vx);
        if (scale) unpack<T, VEC>(sc[k], s);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          // g rounded here, never fused (see pack_g_xhat).
          const float g = scale ? __fmul_rn(vd[j], s[j]) : vd[j];
          const float xh = (vx[j] - mu) * inv;
          sum_g += g;
          sum_gx += g * xh;
          if constexpr (PARAMS) {
            ps[k][j] += vd[j] * xh;
            pb[k][j] += vd[j];
          }
        }
      }
    }
    const row_stats::Sum2 t =
        row_stats::group_sum2({sum_g, sum_gx}, scratch + 32 * parity, threads);
    parity ^= 1;
    const float mean_g = a.mean ? static_cast<float>(t.a / n) : 0.0f;
    const auto mean_gx = static_cast<float>(t.b / n);
    T* dxr = dx + r * len;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int64_t i = start + k * stride;
      if (i < len) {
        float vd[VEC], vx[VEC], s[VEC], out[VEC];
        pack_io::unpack<T, VEC>(*slot(stage, 0, k), vd);
        pack_io::unpack<T, VEC>(*slot(stage, 1, k), vx);
        if (scale) unpack<T, VEC>(sc[k], s);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float g = scale ? __fmul_rn(vd[j], s[j]) : vd[j];
          out[j] = inv * (g - mean_g - ((vx[j] - mu) * inv) * mean_gx);
        }
        pack_io::store<T, VEC>(dxr, i, out);
      }
    }
    mu = next_mu;
    inv = next_inv;
    stage = stage + 1 == D ? 0 : stage + 1;
  }
  row_stats::cp_async_wait<0>();  // only empty groups remain; nothing left in flight at exit
  if constexpr (PARAMS) {
    // Slot blockIdx.x (one per block of the grid); a block that ran no row writes its zeros
    // too, so the finish adds every slot.
    float* slots = static_cast<float*>(a.workspace);
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int64_t i = start + k * stride;
      if (i < len)
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          slots[first * len + i + j] = ps[k][j];
          slots[(step + first) * len + i + j] = pb[k][j];
        }
    }
  }
}

// Rows longer than the registers: one pass for the row sums, a second that writes dx.
template <class T, int VEC>
__global__ void norm_bwd_stream_kernel(NormBwdArgs a, int group) {
  __shared__ row_stats::Sum2 scratch[2][32];
  const T* __restrict__ dy = static_cast<const T*>(a.dy);
  const T* __restrict__ x = static_cast<const T*>(a.x);
  const T* scale = static_cast<const T*>(a.scale);
  T* __restrict__ dx = static_cast<T*>(a.dx);
  const rows::Walk w = rows::walk(group);
  const int64_t len = a.len, stride = int64_t{group} * VEC, start = int64_t{w.lane} * VEC;
  const double n = static_cast<double>(len);
  int parity = 0;
  for (int64_t r = w.first; r < a.rows; r += w.step) {
    const float mu = a.mean ? a.mean[r] : 0.0f, inv = a.inv_std[r];
    const T* dyr = dy + r * len;
    const T* xr = x + r * len;
    T* dxr = dx + r * len;
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t i = start; i < len; i += stride) {
      float vd[VEC], vx[VEC], g[VEC], xh[VEC], pg = 0.0f, pgx = 0.0f;
      rows::load<T, VEC>(dyr, i, vd);
      rows::load<T, VEC>(xr, i, vx);
      pack_g_xhat<T, VEC>(scale, i, mu, inv, vd, vx, g, xh);
      pack_sums<VEC>(g, xh, pg, pgx);
      sum_g += pg;  // float within the pack, double across packs
      sum_gx += pgx;
    }
    const row_stats::Sum2 t = row_stats::group_sum2({sum_g, sum_gx}, scratch[parity], group);
    parity ^= 1;
    const float mean_g = a.mean ? static_cast<float>(t.a / n) : 0.0f;
    const auto mean_gx = static_cast<float>(t.b / n);
    for (int64_t i = start; i < len; i += stride) {
      float vd[VEC], vx[VEC], g[VEC], xh[VEC], out[VEC];
      rows::load<T, VEC>(dyr, i, vd);
      rows::load<T, VEC>(xr, i, vx);
      pack_g_xhat<T, VEC>(scale, i, mu, inv, vd, vx, g, xh);
      pack_dx<VEC>(g, xh, inv, mean_g, mean_gx, out);
      pack_io::store<T, VEC>(dxr, i, out);
    }
  }
}

// Adds the slots' float partials per column in double, in a fixed order: block (32 columns,
// 32 lanes of slots); lane l adds slots l, l + 32, ... (a warp reads 32 adjacent columns of
// one slot), then lane 0 adds the 32 lane sums in lane order.
template <class T>
__global__ void __launch_bounds__(kFinishLanes* kFinishColumns)
    norm_bwd_finish_slots_kernel(NormBwdArgs a, int64_t count) {
  __shared__ double part[2][kFinishLanes][kFinishColumns];
  const float* slots = static_cast<const float*>(a.workspace);
  const int cx = static_cast<int>(threadIdx.x % kFinishColumns);
  const int lane = static_cast<int>(threadIdx.x / kFinishColumns);
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kFinishColumns + cx;
  double s = 0.0, b = 0.0;
  if (col < a.len) {
#pragma unroll 4
    for (int64_t k = lane; k < count; k += kFinishLanes) {
      s += slots[k * a.len + col];
      b += slots[(count + k) * a.len + col];
    }
  }
  part[0][lane][cx] = s;
  part[1][lane][cx] = b;
  __syncthreads();
  if (lane != 0 || col >= a.len) return;
  for (int l = 1; l < kFinishLanes; ++l) {
    s += part[0][l][cx];
    b += part[1][l][cx];
  }
  if (a.dscale) static_cast<T*>(a.dscale)[col] = detail::from_acc<T>(static_cast<float>(s));
  if (a.dbias) static_cast<T*>(a.dbias)[col] = detail::from_acc<T>(static_cast<float>(b));
}

// Block (column tile, chunk of rows): double partial sums of dy * xhat and dy per column.
template <class T>
__global__ void norm_bwd_columns_kernel(NormBwdArgs a) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= a.len) return;
  const T* dy = static_cast<const T*>(a.dy);
  const T* x = static_cast<const T*>(a.x);
  const int64_t chunk = blockIdx.y;
  const int64_t begin = chunk * a.chunk_rows, end = min(a.rows, begin + a.chunk_rows);
  double s = 0.0, b = 0.0;
  for (int64_t r = begin; r < end; ++r) {
    const float d = detail::to_acc(dy[r * a.len + col]);
    if (a.dscale) {
      const float mu = a.mean ? a.mean[r] : 0.0f;
      s += static_cast<double>(d) * ((detail::to_acc(x[r * a.len + col]) - mu) * a.inv_std[r]);
    }
    b += d;
  }
  double* partials = static_cast<double*>(a.workspace);
  partials[chunk * a.len + col] = s;
  partials[(a.chunks + chunk) * a.len + col] = b;
}

template <class T>
__global__ void norm_bwd_finish_kernel(NormBwdArgs a) {
  const double* partials = static_cast<const double*>(a.workspace);
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < a.len;
       col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double s = 0.0, b = 0.0;
    for (int64_t c = 0; c < a.chunks; ++c) {
      s += partials[c * a.len + col];
      b += partials[(a.chunks + c) * a.len + col];
    }
    if (a.dscale) static_cast<T*>(a.dscale)[col] = detail::from_acc<T>(static_cast<float>(s));
    if (a.dbias) static_cast<T*>(a.dbias)[col] = detail::from_acc<T>(static_cast<float>(b));
  }
}

// The blocks of a cached launch: g.grid (the plan's bound, which sized the workspace) capped at
// one wave of what is resident on this device, so no partial second wave runs after the first.
unsigned resident_grid(const void* kernel, const RowGeometry& g, int smem = 0) noexcept {
  int device = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, g.threads, smem) !=
          cudaSuccess ||
      per_sm < 1) {
    cudaGetLastError();  // a failed query leaves the plan's grid; the launch reports errors
    return g.grid;
  }
  const int64_t wave = int64_t{sms} * std::min(per_sm, kNormBwdBlocksPerSm);
  return static_cast<unsigned>(std::clamp<int64_t>(wave, 1, g.grid));
}

// Launches the staged kernel: its shared memory (over the default 48 KB for 512 threads) and a
// shared-memory carveout asked first. The grid, or 0 on an error.
template <class T, bool PARAMS>
unsigned launch_staged(const NormBwdArgs& a, const RowGeometry& g, cudaStream_t s) noexcept {
  const auto kernel = &norm_bwd_staged_kernel<T, PARAMS>;
  const int smem = norm_bwd_staged_smem(g.threads);
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) !=
          cudaSuccess ||
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                           cudaSharedmemCarveoutMaxShared) != cudaSuccess) {
    launch_succeeded();  // records the error
    return 0;
  }
  const unsigned grid = resident_grid(reinterpret_cast<const void*>(kernel), g, smem);
  kernel<<<grid, g.threads, smem, s>>>(a);
  return launch_succeeded() ? grid : 0;
}

enum class Path { stream, cached, staged };

template <class T, int VEC, Path PATH, bool PARAMS>
bool launch(const NormBwdArgs& a, const RowGeometry& g, void* stream) noexcept {
  const auto s = static_cast<cudaStream_t>(stream);
  unsigned grid = g.grid;
  if (a.rows > 0 && a.len > 0) {
    if constexpr (PATH == Path::staged) {
      grid = launch_staged<T, PARAMS>(a, g, s);
      if (grid == 0) return false;
    } else if constexpr (PATH == Path::cached) {
      const auto kernel = &norm_bwd_cached_kernel<T, VEC, PARAMS>;
      grid = resident_grid(reinterpret_cast<const void*>(kernel), g);
      kernel<<<grid, g.threads, 0, s>>>(a, g.group);
      if (!launch_succeeded()) return false;
    } else {
      norm_bwd_stream_kernel<T, VEC><<<g.grid, g.threads, 0, s>>>(a, g.group);
      if (!launch_succeeded()) return false;
    }
  }
  if ((!a.dscale && !a.dbias) || a.len == 0) return true;
  if constexpr (PATH != Path::stream && PARAMS) {
    // The rows kernel did not run (no rows): no slot was written, the finish adds none.
    const int64_t count = a.rows > 0 ? int64_t{grid} * (g.threads / g.group) : 0;
    const auto tiles = static_cast<unsigned>((a.len + kFinishColumns - 1) / kFinishColumns);
    norm_bwd_finish_slots_kernel<T><<<tiles, kFinishLanes * kFinishColumns, 0, s>>>(a, count);
    return launch_succeeded();
  }
  const auto tiles = static_cast<unsigned>((a.len + kColumnThreads - 1) / kColumnThreads);
  if (a.chunks > 0) {
    norm_bwd_columns_kernel<T>
        <<<dim3(tiles, static_cast<unsigned>(a.chunks)), kColumnThreads, 0, s>>>(a);
    if (!launch_succeeded()) return false;
  }
  norm_bwd_finish_kernel<T><<<std::min(tiles, 1024u), kColumnThreads, 0, s>>>(a);
  return launch_succeeded();
}

template <class T, int VEC>
NormBwdLauncher pick_vec(const RowGeometry& g, bool params) {
  if (!g.cached) return &launch<T, VEC, Path::stream, false>;
  if constexpr (VEC > 1) {
    if (norm_bwd_staged(g)) {
      if (g.threads > kNormBwdStagedThreads) return nullptr;
      return params ? &launch<T, VEC, Path::staged, true> : &launch<T, VEC, Path::staged, false>;
    }
  }
  if (g.threads > kNormBwdCachedThreads) return nullptr;  // norm_bwd_geometry streams these
  return params ? &launch<T, VEC, Path::cached, true> : &launch<T, VEC, Path::cached, false>;
}

template <class T>
NormBwdLauncher pick(const RowGeometry& g, bool params) {
  constexpr int kVec = 16 / sizeof(T);
  if (g.vec == kVec) return pick_vec<T, kVec>(g, params);
  if (g.vec == 1) return pick_vec<T, 1>(g, params);
  return nullptr;
}

}  // namespace

NormBwdLauncher norm_bwd_launcher(DType dtype, const RowGeometry& g, bool params) {
  return by_float_dtype(dtype, [&]<class T>() { return pick<T>(g, params); });
}

}  // namespace eagle::native
