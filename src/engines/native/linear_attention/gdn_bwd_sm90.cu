// The gdn backward through the kda backward (gdn_bwd_kernels.hpp): the gate broadcast before it,
// the sum over K after it.
#include <cuda_runtime.h>

#include "engines/native/linear_attention/gdn_bwd_kernels.hpp"

namespace eagle::native::kda {

namespace {

constexpr int kThreads = 256;
constexpr std::size_t kAlign = 256;

std::size_t round_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

struct Params {
  const int32_t* cu;
  int64_t slots, rows;
  int value_heads, dim;
  const float *g, *beta, *a_log, *dt_bias;
  bool safe_gate, beta_sigmoid;
  float* gate;                  // [T, HV, K] the broadcast log decay
  float* beta_eff;              // [T, HV] sigmoid(beta) (use_beta_sigmoid)
  float* dg_channels;           // [T, HV, K] kda's dg
  float *dg, *dbeta;            // [T, HV]
  float *dz_rows, *dalog_rows;  // [T, HV] per-row terms of d_dt_bias and d_a_log (safe_gate)
  float *d_a_log, *d_dt_bias;   // [HV]
};

__device__ __forceinline__ int64_t clamp_row(int64_t x, int64_t lo, int64_t hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}

// The rows inside the batch's sequences, [cu[0], cu[N]) clamped to the buffer, as the kda
// backward's finish launch reads them.
struct Active {
  int64_t lo, hi;
  __device__ bool has(int64_t row) const { return row >= lo && row < hi; }
};

__device__ __forceinline__ Active active_rows(const Params& p) {
  const int64_t lo = clamp_row(p.cu[0], 0, p.rows);
  return {lo, clamp_row(p.cu[p.slots], lo, p.rows)};
}

// As gdn's forward (gdn_fwd_sm90.cu).
__device__ __forceinline__ float softplus(float z) {
  return z > 0 ? z + log1pf(expf(-z)) : log1pf(expf(z));
}
__device__ __forceinline__ float sigmoid(float z) {
  return 1.0f / (1.0f + expf(-z));
}

// The log decay of row-and-head i (= row * HV + hv): g itself, or its safe_gate transform.
__device__ __forceinline__ float log_decay(const Params& p, int64_t i, int hv) {
  const float g = p.g[i];
  if (!p.safe_gate) return g;
  return -expf(p.a_log[hv]) * softplus(g + p.dt_bias[hv]);
}

// One thread per (row, value head, key channel): the gate broadcast over K (the same value for
// every channel, so kda's recurrence is gdn's), and beta's sigmoid once per (row, value head).
// Padding rows get 0 (the kda backward never reads them).
__global__ void __launch_bounds__(kThreads) prepare_kernel(const Params p) {
  const Active act = active_rows(p);
  const int64_t HV = p.value_heads, K = p.dim, n = p.rows * HV * K;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t i = e / K, row = i / HV;
    const int hv = static_cast<int>(i % HV);
    const bool in = act.has(row);
    p.gate[e] = in ? log_decay(p, i, hv) : 0.f;
    if (p.beta_sigmoid && e % K == 0) p.beta_eff[i] = in ? sigmoid(p.beta[i]) : 0.f;
  }
}

// One warp per (row, value head): d_log = sum_c dg[row, hv, c] in a fixed order (each lane its
// channels lane, lane + 32, ..., then the xor shuffle tree), then the chain through safe_gate
// and beta's sigmoid. Padding rows: 0 in dg and the partials; dbeta's are already 0.
__global__ void __launch_bounds__(kThreads) reduce_kernel(const Params p) {
  const Active act = active_rows(p);
  const int64_t HV = p.value_heads, K = p.dim;
  const int lane = threadIdx.x & 31;
  const int64_t i = (blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x) >> 5;
  if (i >= p.rows * HV) return;
  const int64_t row = i / HV;
  const int hv = static_cast<int>(i % HV);
  if (!act.has(row)) {
    if (lane == 0) {
      if (p.dg) p.dg[i] = 0.f;
      if (p.safe_gate) p.dz_rows[i] = p.dalog_rows[i] = 0.f;
    }
    return;
  }
  float d_log = 0.f;
  if (p.dg_channels) {
    for (int64_t c = lane; c < K; c += 32) d_log += p.dg_channels[i * K + c];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) d_log += __shfl_xor_sync(0xffffffffu, d_log, o);
  }
  if (lane != 0) return;
  if (p.safe_gate) {
    // a = -exp(a_log) softplus(z), z = g + dt_bias: da/dz = -exp(a_log) sigmoid(z), da/da_log = a.
    const float z = p.g[i] + p.dt_bias[hv], e = expf(p.a_log[hv]);
    const float dz = -d_log * e * sigmoid(z);
    if (p.dg) p.dg[i] = dz;
    p.dz_rows[i] = dz;
    p.dalog_rows[i] = d_log * (-e * softplus(z));
  } else if (p.dg) {
    p.dg[i] = d_log;
  }
  if (p.beta_sigmoid && p.dbeta) {
    const float s = p.beta_eff[i];
    p.dbeta[i] *= s * (1.f - s);
  }
}

// One CTA per value head (safe_gate): d_dt_bias and d_a_log summed over every row (padding rows
// hold 0), each thread its rows tid, tid + kThreads, ... in order, then a shared-memory tree.
__global__ void __launch_bounds__(kThreads) heads_kernel(const Params p) {
  __shared__ float sz[kThreads], sa[kThreads];
  const int hv = blockIdx.x, HV = p.value_heads;
  float z = 0.f, a = 0.f;
  for (int64_t row = threadIdx.x; row < p.rows; row += kThreads) {
    z += p.dz_rows[row * HV + hv];
    a += p.dalog_rows[row * HV + hv];
  }
  sz[threadIdx.x] = z;
  sa[threadIdx.x] = a;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (static_cast<int>(threadIdx.x) < half) {
      sz[threadIdx.x] += sz[threadIdx.x + half];
      sa[threadIdx.x] += sa[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    if (p.d_dt_bias) p.d_dt_bias[hv] = sz[0];
    if (p.d_a_log) p.d_a_log[hv] = sa[0];
  }
}

struct Sizes {
  std::size_t channels, rows;  // f32 [T, HV, K] and [T, HV]
};

Sizes sizes(const Shape& s) {
  const auto rows = static_cast<std::size_t>(s.rows) * static_cast<std::size_t>(s.value_heads);
  return {round_up(rows * static_cast<std::size_t>(s.dim) * sizeof(float)),
          round_up(rows * sizeof(float))};
}

unsigned blocks_for(int64_t threads) {
  const int64_t b = (threads + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65536 * 16 ? b : 65536 * 16);  // the rest by grid stride
}

}  // namespace

std::size_t gdn_backward_workspace_bytes(const Shape& s, int64_t cap) {
  if (!served(s)) return 0;
  const Sizes z = sizes(s);
  return backward_workspace_bytes(s, cap) + 2 * z.channels + 3 * z.rows;
}

bool gdn_backward(const GdnBwdArgs& a, void* workspace, void* stream) noexcept {
  const Shape& s = a.base.shape;
  if (!served(s) || s.gates != Gates::kda || !s.cu || !a.g || !a.base.beta) return false;
  if (a.safe_gate && (!a.a_log || !a.dt_bias)) return false;
  // The reduce grid: one warp per (row, value head).
  if (s.rows < 0 || s.rows * s.value_heads / (kThreads / 32) >= 0x7fffffff) return false;
  const Sizes z = sizes(s);
  char* at = static_cast<char*>(workspace) + backward_workspace_bytes(s, a.base.capacity_chunks);
  auto take = [&](std::size_t bytes) {
    auto* p = reinterpret_cast<float*>(at);
    at += bytes;
    return p;
  };
  Params p;
  p.cu = s.cu;
  p.slots = s.slots;
  p.rows = s.rows;
  p.value_heads = s.value_heads;
  p.dim = s.dim;
  p.g = a.g;
  p.beta = a.base.beta;
  p.a_log = a.a_log;
  p.dt_bias = a.dt_bias;
  p.safe_gate = a.safe_gate;
  p.beta_sigmoid = a.use_beta_sigmoid;
  p.gate = take(z.channels);
  p.dg_channels = take(z.channels);
  p.beta_eff = take(z.rows);
  p.dz_rows = take(z.rows);
  p.dalog_rows = take(z.rows);
  // kda's dg is needed for any of gdn's gate gradients.
  if (!a.dg && !(a.safe_gate && (a.d_a_log || a.d_dt_bias))) p.dg_channels = nullptr;
  p.dg = a.dg;
  p.dbeta = a.base.dbeta;
  p.d_a_log = a.safe_gate ? a.d_a_log : nullptr;
  p.d_dt_bias = a.safe_gate ? a.d_dt_bias : nullptr;

  const auto st = static_cast<cudaStream_t>(stream);
  const int64_t rows_heads = s.rows * s.value_heads;
  if (rows_heads > 0) prepare_kernel<<<blocks_for(rows_heads * s.dim), kThreads, 0, st>>>(p);
  if (cudaPeekAtLastError() != cudaSuccess) return false;
  BwdArgs k = a.base;
  k.g = p.gate;
  k.beta = a.use_beta_sigmoid ? p.beta_eff : a.base.beta;
  k.dg = p.dg_channels;
  if (!backward(k, workspace, stream)) return false;
  if (rows_heads > 0) {
    // One warp per (row, value head), the whole grid at once (checked above).
    const int64_t warps_per_block = kThreads / 32;
    reduce_kernel<<<static_cast<unsigned>((rows_heads + warps_per_block - 1) / warps_per_block),
                    kThreads, 0, st>>>(p);
  }
  if (a.safe_gate && (p.d_a_log || p.d_dt_bias))
    heads_kernel<<<static_cast<unsigned>(s.value_heads), kThreads, 0, st>>>(p);
  return cudaPeekAtLastError() == cudaSuccess;
}

}  // namespace eagle::native::kda
