// A probe, not part of the build: how should the weight-gradient GEMMs of an MLP backward share
// the GPU with the chain of dx GEMMs and gelu_backward kernels? Session 24's trace of the dim-512
// MLP step (issue 12) showed each gelu_backward (3.5 us alone) taking 11 us: it waited for SM
// room while the concurrent dW GEMM (cuBLASLt's 64 x 32-tile kernel, one CTA an SM) held the SMs.
// This replays that backward (3 layers of [dx = g W^T, g' = gelu_backward(dx, z)] with
// dW = h^T g beside each, then the last dW) as a CUDA graph of two streams, bf16, T 4096,
// dim 512, and times it with the dW GEMMs planned for fewer SMs (cuBLASLt's
// CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET), after the chain instead of beside it, or serial.
// Build: nvcc -O3 -std=c++20 -arch=sm_90a -o backward_overlap_probe
//   bench/probes/backward_overlap_probe.cu -lcublasLt
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "graph_timing.cuh"

constexpr int kT = 4096, kD = 512, kLayers = 3;

__global__ void fill(__nv_bfloat16* p, int n, unsigned seed) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned h = (i + 1) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = __float2bfloat16(((h & 0xffff) / 32768.0f - 1.0f) * 0.5f);
  }
}

// out = d * gelu'(z), 8 elements a thread (16-byte loads), as eagle's pointwise kernel.
__global__ void gelu_backward(const uint4* d, const uint4* z, uint4* out, int n8) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n8) return;
  uint4 dv = d[i], zv = z[i], o;
  const __nv_bfloat16* dp = reinterpret_cast<const __nv_bfloat16*>(&dv);
  const __nv_bfloat16* zp = reinterpret_cast<const __nv_bfloat16*>(&zv);
  __nv_bfloat16* op = reinterpret_cast<__nv_bfloat16*>(&o);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float a = __bfloat162float(dp[j]), b = __bfloat162float(zp[j]);
    op[j] = __float2bfloat16(
        a * (0.5f * (1.0f + erff(b * 0.70710678f)) + b * 0.39894228f * expf(-0.5f * b * b)));
  }
  out[i] = o;
}

struct Gemm {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatmulAlgo_t algo;
  size_t ws;
};

cublasLtHandle_t lt;
void* workspace;
const size_t kWorkspace = 32u << 20;

// Column-major cuBLASLt terms: D [m, n] = op(A) [m, k] op(B) [k, n].
Gemm make(int m, int n, int k, cublasOperation_t ta, int lda, cublasOperation_t tb, int ldb,
          int sm_target) {
  Gemm g;
  cublasLtMatmulDescCreate(&g.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  if (sm_target)
    cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_target,
                                   sizeof(sm_target));
  cublasLtMatrixLayoutCreate(&g.la, CUDA_R_16BF, ta == CUBLAS_OP_N ? m : k,
                             ta == CUBLAS_OP_N ? k : m, lda);
  cublasLtMatrixLayoutCreate(&g.lb, CUDA_R_16BF, tb == CUBLAS_OP_N ? k : n,
                             tb == CUBLAS_OP_N ? n : k, ldb);
  cublasLtMatrixLayoutCreate(&g.ld, CUDA_R_16BF, m, n, m);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                       sizeof(kWorkspace));
  cublasLtMatmulHeuristicResult_t r{};
  int got = 0;
  cublasLtMatmulAlgoGetHeuristic(lt, g.op, g.la, g.lb, g.ld, g.ld, pref, 1, &r, &got);
  g.algo = r.algo;
  g.ws = r.workspaceSize;
  return g;
}

void run(const Gemm& g, const void* a, const void* b, void* d, cudaStream_t s, void* ws) {
  const float one = 1, zero = 0;
  cublasLtMatmul(lt, g.op, &one, a, g.la, b, g.lb, &zero, d, g.ld, d, g.ld, &g.algo, ws, g.ws, s);
}

int main() {
  cublasLtCreate(&lt);
  cudaStream_t a, b;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  void *ws_a, *ws_b;
  cudaMalloc(&ws_a, kWorkspace), cudaMalloc(&ws_b, kWorkspace);
  const size_t act = size_t{kT} * kD * 2, wgt = size_t{kD} * kD * 2;
  std::vector<void*> h(kLayers + 1), z(kLayers), g(kLayers + 1), w(kLayers + 1), dw(kLayers + 1);
  void* dx;
  cudaMalloc(&dx, act);
  for (int i = 0; i <= kLayers; ++i) {
    cudaMalloc(&h[i], act), cudaMalloc(&g[i], act), cudaMalloc(&w[i], wgt), cudaMalloc(&dw[i], wgt);
    fill<<<512, 256>>>(static_cast<__nv_bfloat16*>(h[i]), kT * kD, 10 + i);
    fill<<<512, 256>>>(static_cast<__nv_bfloat16*>(g[i]), kT * kD, 20 + i);
    fill<<<512, 256>>>(static_cast<__nv_bfloat16*>(w[i]), kD * kD, 30 + i);
    if (i < kLayers) {
      cudaMalloc(&z[i], act);
      fill<<<512, 256>>>(static_cast<__nv_bfloat16*>(z[i]), kT * kD, 40 + i);
    }
  }
  cudaDeviceSynchronize();
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  // Row-major dx [T, D] = g [T, D] W^T: column-major dx^T [D, T] = W (stored W^T col-major:
  // op T of the [D, D] store) x g^T ([D, T], ld D).
  const Gemm dx_gemm = make(kD, kT, kD, CUBLAS_OP_T, kD, CUBLAS_OP_N, kD, 0);
  // Row-major dW [D, D] = h^T g: column-major dW^T = g^T h = (g^T [D, T]) x (h as [T, D]: op T
  // of h^T's [D, T] store).
  auto dw_gemm = [&](int target) {
    return make(kD, kD, kT, CUBLAS_OP_N, kD, CUBLAS_OP_T, kD, target);
  };

  // mode 0: dW beside the chain (on b, joined back); 1: every dW after the chain (on a); 2: one
  // stream. One backward a replay (the median of 20; the numbers logged in session 24 came from
  // the same capture with the min beside the median).
  cudaEvent_t ready[kLayers + 1], done;
  for (auto& e : ready) cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  auto time_mode = [&](int mode, const Gemm& dwg, const char* name) {
    auto backward = [&] {
      cudaEventRecord(ready[0], a);
      for (int i = 0; i < kLayers; ++i) {
        if (mode == 0) {
          cudaStreamWaitEvent(b, ready[i]);
          run(dwg, g[i], h[i], dw[i], b, ws_b);
        } else if (mode == 2) {
          run(dwg, g[i], h[i], dw[i], a, ws_a);
        }
        run(dx_gemm, w[i], g[i], dx, a, ws_a);
        gelu_backward<<<kT * kD / 8 / 256, 256, 0, a>>>(static_cast<const uint4*>(dx),
                                                        static_cast<const uint4*>(z[i]),
                                                        static_cast<uint4*>(g[i + 1]), kT * kD / 8);
        cudaEventRecord(ready[i + 1], a);
      }
      if (mode == 1)
        for (int i = 0; i < kLayers; ++i) run(dwg, g[i], h[i], dw[i], a, ws_a);
      run(dwg, g[kLayers], h[kLayers], dw[kLayers], a, ws_a);
      if (mode == 0) {
        cudaEventRecord(done, b);
        cudaStreamWaitEvent(a, done);
      }
    };
    std::printf("  %-44s %7.2f us\n", name, graph_us_per_call(a, 1, backward, 20));
  };

  std::printf("MLP backward, 3 layers + the last dW, bf16 T %d dim %d, %d SMs\n", kT, kD, sms);
  const Gemm full = dw_gemm(0);
  time_mode(2, full, "one stream (torch's order)");
  time_mode(1, full, "dW after the chain");
  time_mode(0, full, "dW beside the chain, all SMs (eagle today)");
  for (int target : {112, 96, 80, 66, 44}) {
    char name[64];
    std::snprintf(name, sizeof name, "dW beside the chain, SM target %d", target);
    time_mode(0, dw_gemm(target), name);
  }
  // The parts alone (one stream, 50 calls captured, per call).
  auto per_call = [&](const char* name, auto&& fn) {
    std::printf("  alone: %-36s %7.2f us\n", name, graph_us_per_call(a, 50, fn));
  };
  per_call("dx GEMM", [&] { run(dx_gemm, w[0], g[0], dx, a, ws_a); });
  per_call("gelu_backward", [&] {
    gelu_backward<<<kT * kD / 8 / 256, 256, 0, a>>>(static_cast<const uint4*>(dx),
                                                    static_cast<const uint4*>(z[0]),
                                                    static_cast<uint4*>(g[1]), kT * kD / 8);
  });
  for (int target : {0, 96, 66}) {
    const Gemm dwg = dw_gemm(target);
    char name[64];
    std::snprintf(name, sizeof name, "dW GEMM, SM target %d", target);
    per_call(name, [&] { run(dwg, g[0], h[0], dw[0], a, ws_a); });
  }
  std::printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
