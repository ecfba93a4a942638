// A probe, not part of the build: which CUTLASS configuration should native_gemm's GELU-epilogue
// GEMM use? Session 24 measured ours (128 x 128 x 64 tiles, cluster 1, cooperative) at 8.9 us for
// [4096, 512] x [512, 512] with gelu and the product stored, against cuBLASLt's plain GEMM at
// 4.7 us + eagle's gelu at 2.6 us apart, and 260 us against 175 + 23 at 4096^3. This times, on
// bf16 with b row-major, each configuration below with the fused epilogue and with a plain one
// (the mainloop's share), and cuBLASLt's plain GEMM: a CUDA graph of 50 calls, median of 5.
// Build (from the repository root):
//   nvcc -O3 -DNDEBUG -std=c++20 -arch=sm_90a --expt-relaxed-constexpr -Isrc -Iinclude \
//     -isystem .deps/cutlass-4.2.0.0/include -o gemm_config_probe \
//     bench/probes/gemm_config_probe.cu -lcublasLt
#include <cublasLt.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "engines/native/gemm/gemm_kernels.cuh"
#include "graph_timing.cuh"

using namespace eagle::native::gemm;
using Bf16 = cutlass::bfloat16_t;
using Row = cutlass::layout::RowMajor;

struct Cluster2 : Cooperative128 {
  using ClusterShape = cute::Shape<cute::_2, cute::_1, cute::_1>;
};
struct Pingpong128 {
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;
};
struct Pingpong64 : Pingpong128 {
  using TileShape = cute::Shape<cute::_64, cute::_128, cute::_64>;
};
struct Cooperative64 : Cooperative128 {
  using TileShape = cute::Shape<cute::_128, cute::_64, cute::_64>;
};
struct Pingpong128x64 : Pingpong128 {
  using TileShape = cute::Shape<cute::_128, cute::_64, cute::_64>;
};
struct Cooperative256Cluster2 : Cluster2 {
  using TileShape = cute::Shape<cute::_128, cute::_256, cute::_64>;
};

template <class Gemm>
float time_graph(typename Gemm::Arguments args, void* workspace, cudaStream_t st) {
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return -1;
  if (gemm.initialize(args, workspace, st) != cutlass::Status::kSuccess) return -2;
  return graph_us_per_call(st, 50, [&] { gemm.run(st); });
}

// Plain epilogue: D = acc.
template <class Config>
struct Plain {
  using Fusion = cutlass::epilogue::fusion::LinearCombination<Bf16, float, void, float>;
  using Gemm = typename Sm90Gemm<Bf16, Row, Row, Fusion, Config>::Gemm;
  static typename Gemm::Arguments arguments(const EpilogueGemmArgs& a, int sms) {
    return gemm_arguments<Gemm, false>(a, sms);
  }
};

template <class Config>
void row(const char* name, const EpilogueGemmArgs& a, void* ws, cudaStream_t st, int sms) {
  using Fused = EpilogueGemmKernel<Bf16, false, Epilogue::gelu, Config>;
  const float fused = time_graph<typename Fused::Gemm>(Fused::arguments(a, sms), ws, st);
  const float plain =
      time_graph<typename Plain<Config>::Gemm>(Plain<Config>::arguments(a, sms), ws, st);
  std::printf("  %-26s fused gelu+aux %8.2f us   plain %8.2f us\n", name, fused, plain);
}

float cublaslt_us(const EpilogueGemmArgs& a, void* ws, size_t ws_bytes, cudaStream_t st) {
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  cublasLtMatmulDesc_t op;
  cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  // Row-major y = a b is column-major y^T = b^T a^T: cuBLASLt's A is b ([N, K] col-major).
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, a.n, a.k, a.ldb);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, a.k, a.m, a.lda);
  cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, a.n, a.m, a.ldy);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                       sizeof(ws_bytes));
  cublasLtMatmulHeuristicResult_t res{};
  int got = 0;
  cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &res, &got);
  const float one = 1, zero = 0;
  auto call = [&] {
    cublasLtMatmul(lt, op, &one, a.b, la, a.a, lb, &zero, a.y, ld, a.y, ld, &res.algo, ws, ws_bytes,
                   st);
  };
  return got ? graph_us_per_call(st, 50, call) : -1;
}

int main() {
  cudaStream_t st;
  cudaStreamCreate(&st);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t ws_bytes = 64u << 20;
  void* ws;
  cudaMalloc(&ws, ws_bytes);
  for (int64_t d : {512, 4096}) {
    const int64_t m = 4096;
    void *x, *w, *y, *z;
    cudaMalloc(&x, m * d * 2), cudaMalloc(&w, d * d * 2), cudaMalloc(&y, m * d * 2);
    cudaMalloc(&z, m * d * 2);
    cudaMemset(x, 0x3c, m * d * 2), cudaMemset(w, 0x3c, d * d * 2);
    EpilogueGemmArgs a;
    a.m = m, a.n = d, a.k = d;
    a.a = x, a.lda = d, a.b = w, a.ldb = d, a.y = y, a.ldy = d, a.aux = z, a.ld_aux = d;
    std::printf("[%lld, %lld] x [%lld, %lld] bf16, %d SMs: cuBLASLt plain %.2f us\n", (long long)m,
                (long long)d, (long long)d, (long long)d, sms, cublaslt_us(a, ws, ws_bytes, st));
    row<Cooperative128>("cooperative 128x128 c1", a, ws, st, sms);
    row<Cluster2>("cooperative 128x128 c2x1", a, ws, st, sms);
    row<Pingpong128>("pingpong 128x128 c1", a, ws, st, sms);
    row<Pingpong64>("pingpong 64x128 c1", a, ws, st, sms);
    row<Cooperative64>("cooperative 128x64 c1", a, ws, st, sms);
    row<Pingpong128x64>("pingpong 128x64 c1", a, ws, st, sms);
    row<Cooperative256Cluster2>("cooperative 128x256 c2x1", a, ws, st, sms);
    cudaFree(x), cudaFree(w), cudaFree(y), cudaFree(z);
  }
  std::printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
