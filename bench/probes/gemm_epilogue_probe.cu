// A probe, not part of the build: where does native_gemm's epilogue time go? Session 25's
// gemm_config_probe (built with -DNDEBUG, H100) timed our cooperative 128 x 128 GEMM on
// [4096, 512] x [512, 512] bf16 at 6.17 us plain and 9.36 us with gelu and the product stored
// (cuBLASLt plain 5.64): the epilogue costs half the mainloop. This times the same mainloop with
// each piece of that epilogue alone (the activation, the bias broadcast, the aux store), the
// backward's gelu_backward epilogue (reading z), and the full epilogue over other subtiles: a CUDA
// graph of 50 calls, median of 5.
// Build (from the repository root):
//   nvcc -O3 -DNDEBUG -std=c++20 -arch=sm_90a --expt-relaxed-constexpr -Isrc -Iinclude \
//     -isystem .deps/cutlass-4.2.0.0/include -o gemm_epilogue_probe \
//     bench/probes/gemm_epilogue_probe.cu
#include <cstdio>

#include "engines/native/gemm/gemm_kernels.cuh"
#include "graph_timing.cuh"

using namespace eagle::native::gemm;
using Bf16 = cutlass::bfloat16_t;
using Row = cutlass::layout::RowMajor;
namespace fusion = cutlass::epilogue::fusion;

template <class T>
using Identity = cutlass::epilogue::thread::Identity<T>;

template <int M, int N>
struct Subtile : Cooperative128 {
  using EpilogueTile = cute::Shape<cute::Int<M>, cute::Int<N>>;
};

// y = epilogue(a b) with `Fusion` over `Config`; z (aux) written or read where the fusion has one.
template <class Fusion, class Config = Cooperative128>
float time_fusion(const EpilogueGemmArgs& a, void* ws, cudaStream_t st, int sms) {
  using Gemm = typename Sm90Gemm<Bf16, Row, Row, Fusion, Config>::Gemm;
  const typename Gemm::Arguments args = gemm_arguments<Gemm, false>(a, sms);
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return -1;
  if (gemm.initialize(args, ws, st) != cutlass::Status::kSuccess) return -2;
  return graph_us_per_call(st, 50, [&] { gemm.run(st); });
}

int main() {
  cudaStream_t st;
  cudaStreamCreate(&st);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  void* ws;
  cudaMalloc(&ws, 64u << 20);
  const int64_t m = 4096, d = 512;
  void *x, *w, *y, *z;
  cudaMalloc(&x, m * d * 2), cudaMalloc(&w, d * d * 2), cudaMalloc(&y, m * d * 2);
  cudaMalloc(&z, m * d * 2);
  cudaMemset(x, 0x3c, m * d * 2), cudaMemset(w, 0x3c, d * d * 2), cudaMemset(z, 0x3c, m * d * 2);
  EpilogueGemmArgs a;
  a.m = m, a.n = d, a.k = d;
  a.a = x, a.lda = d, a.b = w, a.ldb = d, a.y = y, a.ldy = d, a.aux = z, a.ld_aux = d;
  using Plain = fusion::LinearCombination<Bf16, float, void, float>;
  using Act = fusion::LinCombEltAct<GeluErf, Bf16, float, void, float>;
  using Bias = fusion::LinCombPerColBias<Bf16, float, Bf16, void, float>;
  using BiasAct = fusion::LinCombPerColBiasEltAct<GeluErf, Bf16, float, Bf16, void, float>;
  using AuxOnly =
      fusion::LinCombPerColBiasEltActAux<Row, Identity, Bf16, float, Bf16, Bf16, Bf16, float>;
  using Full =
      fusion::LinCombPerColBiasEltActAux<Row, GeluErf, Bf16, float, Bf16, Bf16, Bf16, float>;
  using Backward = fusion::LinCombDeEltAct<Row, GeluErfBackward, Bf16, float, Bf16, Bf16, float>;
  std::printf("[4096, 512] x [512, 512] bf16, %d SMs, cooperative 128x128 c1, per call:\n", sms);
  std::printf("  plain                         %8.2f us\n", time_fusion<Plain>(a, ws, st, sms));
  std::printf("  gelu                          %8.2f us\n", time_fusion<Act>(a, ws, st, sms));
  std::printf("  bias (null)                   %8.2f us\n", time_fusion<Bias>(a, ws, st, sms));
  std::printf("  bias + gelu                   %8.2f us\n", time_fusion<BiasAct>(a, ws, st, sms));
  std::printf("  bias + aux store, identity    %8.2f us\n", time_fusion<AuxOnly>(a, ws, st, sms));
  std::printf("  bias + aux store + gelu       %8.2f us\n", time_fusion<Full>(a, ws, st, sms));
  std::printf("  full, subtile 128x64          %8.2f us\n",
              time_fusion<Full, Subtile<128, 64>>(a, ws, st, sms));
  std::printf("  full, subtile 128x128         %8.2f us\n",
              time_fusion<Full, Subtile<128, 128>>(a, ws, st, sms));
  std::printf("  gelu_backward reading z       %8.2f us\n", time_fusion<Backward>(a, ws, st, sms));
  std::printf("  gelu_backward, subtile 128x64 %8.2f us\n",
              time_fusion<Backward, Subtile<128, 64>>(a, ws, st, sms));
  std::printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
