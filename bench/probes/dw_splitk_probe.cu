// A probe, not part of the build: how fast can a weight gradient of the MLP benchmark go?
// dW [512, 512] = X^T [512, 4096] @ G [4096, 512], bf16 in and out, f32 accumulation. cuBLASLt's
// heuristic picks a 64 x 32-tile kernel over the whole K (about 12 us, issue 12); this times
// (a) each heuristic entry, (b) the K split into S slices as one strided-batched GEMM into f32
// followed by a sum over the slices, and (c) cuBLASLt's own split-K (algorithm ids whose
// capabilities allow it). Build: nvcc -O2 -arch=sm_90a -o dw_splitk_probe dw_splitk_probe.cu
// -lcublasLt. Prints the time per call of each, a CUDA graph of 50 calls, median of 5.
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "graph_timing.cuh"

#define CHECK_CUDA(x)                                                        \
  do {                                                                       \
    cudaError_t e_ = (x);                                                    \
    if (e_ != cudaSuccess) {                                                 \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)
#define CHECK_LT(x)                                                         \
  do {                                                                      \
    cublasStatus_t s_ = (x);                                                \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                      \
      std::printf("%s:%d cublas status %d\n", __FILE__, __LINE__, int(s_)); \
      std::exit(1);                                                         \
    }                                                                       \
  } while (0)

constexpr int kT = 4096, kD = 512;

__global__ void fill(__nv_bfloat16* p, int n, unsigned seed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned h = (i + 1) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = __float2bfloat16((h & 0xffff) / 32768.0f - 1.0f);
  }
}

// out[i] = sum over s of ws[s * n + i], 4 elements a thread.
__global__ void sum_slices(const float* ws, __nv_bfloat16* out, int n, int slices) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (i >= n) return;
  float4 acc = reinterpret_cast<const float4*>(ws + i)[0];
  for (int s = 1; s < slices; ++s) {
    float4 v = reinterpret_cast<const float4*>(ws + static_cast<size_t>(s) * n + i)[0];
    acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
  }
  out[i] = __float2bfloat16(acc.x), out[i + 1] = __float2bfloat16(acc.y);
  out[i + 2] = __float2bfloat16(acc.z), out[i + 3] = __float2bfloat16(acc.w);
}

int main() {
  cudaStream_t st;
  CHECK_CUDA(cudaStreamCreate(&st));
  cublasLtHandle_t lt;
  CHECK_LT(cublasLtCreate(&lt));
  __nv_bfloat16 *x, *g, *dw, *ref;
  float* ws32;
  void* work;
  const size_t work_bytes = 32u << 20;
  CHECK_CUDA(cudaMalloc(&x, sizeof(__nv_bfloat16) * kT * kD));
  CHECK_CUDA(cudaMalloc(&g, sizeof(__nv_bfloat16) * kT * kD));
  CHECK_CUDA(cudaMalloc(&dw, sizeof(__nv_bfloat16) * kD * kD));
  CHECK_CUDA(cudaMalloc(&ref, sizeof(__nv_bfloat16) * kD * kD));
  CHECK_CUDA(cudaMalloc(&ws32, sizeof(float) * 16 * kD * kD));
  CHECK_CUDA(cudaMalloc(&work, work_bytes));
  fill<<<kT * kD / 256, 256, 0, st>>>(x, kT * kD, 1);
  fill<<<kT * kD / 256, 256, 0, st>>>(g, kT * kD, 2);

  // Column-major view: dW^T [512 x 512] = G^T (stored [512 x 4096], ld 512, op N) x X (stored as
  // X^T [512 x 4096], ld 512, op T). dW^T column-major is dW row-major.
  auto make = [&](int k, int batch, cudaDataType dtype_d, cublasLtMatmulDesc_t& op,
                  cublasLtMatrixLayout_t& la, cublasLtMatrixLayout_t& lb,
                  cublasLtMatrixLayout_t& ld) {
    CHECK_LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t n = CUBLAS_OP_N, t = CUBLAS_OP_T;
    CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &n, sizeof(n)));
    CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &t, sizeof(t)));
    CHECK_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, kD, k, kD));
    CHECK_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, kD, k, kD));
    CHECK_LT(cublasLtMatrixLayoutCreate(&ld, dtype_d, kD, kD, kD));
    if (batch > 1) {
      int64_t sa = int64_t{kD} * k, sd = int64_t{kD} * kD;
      for (auto l : {la, lb}) {
        CHECK_LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                  sizeof(batch)));
        CHECK_LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                  &sa, sizeof(sa)));
      }
      CHECK_LT(cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                sizeof(batch)));
      CHECK_LT(cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &sd, sizeof(sd)));
    }
  };
  auto heuristic = [&](cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                       cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, int want) {
    cublasLtMatmulPreference_t pref;
    CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
    CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &work_bytes, sizeof(work_bytes)));
    std::vector<cublasLtMatmulHeuristicResult_t> res(want);
    int got = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, want, res.data(), &got);
    res.resize(got);
    cublasLtMatmulPreferenceDestroy(pref);
    return res;
  };
  const float one = 1.0f, zero = 0.0f;

  // (a) every heuristic entry, whole K.
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, ld;
  make(kT, 1, CUDA_R_16BF, op, la, lb, ld);
  auto res = heuristic(op, la, lb, ld, 32);
  std::printf("(a) whole K, %zu heuristic entries\n", res.size());
  for (size_t i = 0; i < res.size(); ++i) {
    float us = graph_us_per_call(st, 50, [&] {
      CHECK_LT(cublasLtMatmul(lt, op, &one, g, la, x, lb, &zero, dw, ld, dw, ld, &res[i].algo, work,
                              work_bytes, st));
    });
    std::printf("  entry %2zu: %7.2f us (workspace %zu)\n", i, us, res[i].workspaceSize);
  }
  // The reference: entry 0.
  CHECK_LT(cublasLtMatmul(lt, op, &one, g, la, x, lb, &zero, ref, ld, ref, ld, &res[0].algo, work,
                          work_bytes, st));

  auto max_diff = [&](const __nv_bfloat16* a) {
    std::vector<__nv_bfloat16> h1(kD * kD), h2(kD * kD);
    CHECK_CUDA(cudaMemcpy(h1.data(), a, sizeof(h1[0]) * h1.size(), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(h2.data(), ref, sizeof(h2[0]) * h2.size(), cudaMemcpyDeviceToHost));
    float worst = 0, scale = 0;
    for (size_t i = 0; i < h1.size(); ++i) {
      worst = std::max(worst, std::abs(__bfloat162float(h1[i]) - __bfloat162float(h2[i])));
      scale = std::max(scale, std::abs(__bfloat162float(h2[i])));
    }
    return worst / scale;
  };

  // (b) K in S slices: a strided-batched GEMM into f32, then the sum over slices.
  for (int s : {2, 4, 8, 16}) {
    cublasLtMatmulDesc_t opb;
    cublasLtMatrixLayout_t lab, lbb, ldb;
    make(kT / s, s, CUDA_R_32F, opb, lab, lbb, ldb);
    auto rb = heuristic(opb, lab, lbb, ldb, 8);
    for (size_t i = 0; i < rb.size() && i < 4; ++i) {
      auto call = [&] {
        CHECK_LT(cublasLtMatmul(lt, opb, &one, g, lab, x, lbb, &zero, ws32, ldb, ws32, ldb,
                                &rb[i].algo, work, work_bytes, st));
        sum_slices<<<kD * kD / 4 / 256, 256, 0, st>>>(ws32, dw, kD * kD, s);
      };
      float us = graph_us_per_call(st, 50, call);
      float gemm_only = graph_us_per_call(st, 50, [&] {
        CHECK_LT(cublasLtMatmul(lt, opb, &one, g, lab, x, lbb, &zero, ws32, ldb, ws32, ldb,
                                &rb[i].algo, work, work_bytes, st));
      });
      call();
      CHECK_CUDA(cudaStreamSynchronize(st));
      std::printf("(b) S %2d entry %zu: %7.2f us (gemm %6.2f), max rel diff %.2e\n", s, i, us,
                  gemm_only, max_diff(dw));
    }
  }

  // (c) cuBLASLt's split-K: algorithm ids that allow it, each tile it offers, S in {2, 4, 8}.
  int ids[256], nids = 0;
  CHECK_LT(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF,
                                    CUDA_R_16BF, CUDA_R_16BF, 256, ids, &nids));
  std::printf("(c) %d algorithm ids\n", nids);
  struct Found {
    float us;
    int id, tile, splits, scheme;
  };
  std::vector<Found> found;
  for (int a = 0; a < nids; ++a) {
    cublasLtMatmulAlgo_t algo;
    if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF,
                               CUDA_R_16BF, CUDA_R_16BF, ids[a], &algo) != CUBLAS_STATUS_SUCCESS)
      continue;
    int splitk = 0;
    size_t sz;
    cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splitk,
                                      sizeof(splitk), &sz);
    if (!splitk) continue;
    cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, nullptr, 0, &sz);
    std::vector<int> tiles(std::max<size_t>(1, sz / sizeof(int)), CUBLASLT_MATMUL_TILE_UNDEFINED);
    if (sz)
      cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles.data(), sz, &sz);
    uint32_t schemes = 0;
    cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes,
                                      sizeof(schemes), &sz);
    for (int tile : tiles) {
      for (int s : {2, 4, 8}) {
        for (uint32_t scheme : {1u, 2u, 4u}) {  // inplace, compute type, output type
          if (!(schemes & scheme)) continue;
          cublasLtMatmulAlgo_t c = algo;
          cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                               sizeof(tile));
          cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &s, sizeof(s));
          cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                               sizeof(scheme));
          cublasLtMatmulHeuristicResult_t check{};
          if (cublasLtMatmulAlgoCheck(lt, op, la, lb, ld, ld, &c, &check) !=
                  CUBLAS_STATUS_SUCCESS ||
              check.workspaceSize > work_bytes)
            continue;
          float us = graph_us_per_call(st, 50, [&] {
            cublasLtMatmul(lt, op, &one, g, la, x, lb, &zero, dw, ld, dw, ld, &c, work, work_bytes,
                           st);
          });
          found.push_back({us, ids[a], tile, s, static_cast<int>(scheme)});
        }
      }
    }
  }
  std::sort(found.begin(), found.end(), [](const Found& p, const Found& q) { return p.us < q.us; });
  std::printf("(c) %zu split-K configurations ran; the fastest 10:\n", found.size());
  for (size_t i = 0; i < found.size() && i < 10; ++i)
    std::printf("  %7.2f us: id %d tile %d splits %d scheme %d\n", found[i].us, found[i].id,
                found[i].tile, found[i].splits, found[i].scheme);
  CHECK_CUDA(cudaGetLastError());
  return 0;
}
