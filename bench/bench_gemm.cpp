// Section 10: bf16 GEMMs through eagle's cuBLASLt plan (the gemm family's entry that
// plan::autotune found fastest among cuBLASLt's heuristic entries 0-15), in TFLOP/s, against a raw
// cublasLtMatmul with the same algorithm, descriptors and workspace issued by hand (the plan's
// overhead). Device time from CUDA events around back-to-back calls after warm-up. A torch.matmul
// peer can be timed beside it in the same device call. CUDA builds only; skipped without a device
// or without cuBLASLt.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "bench_common.hpp"
#include "bench_cuda.hpp"
#include "eagle/engines/builtin.hpp"
#include "eagle/engines/cublaslt.hpp"
#include "eagle/plan/autotune.hpp"
#include "engines/cublaslt/api.hpp"
#include "engines/cublaslt/gemm_plan.hpp"

namespace eagle::bench {
namespace {

constexpr int kReplays = 20;  // GEMMs between two events

struct Shape {
  int64_t m, n, k;
  std::string name;
};

class TimingEvent {
 public:
  TimingEvent() { EAGLE_CUDA_CHECK(cudaEventCreate(&event_)); }
  ~TimingEvent() { cudaEventDestroy(event_); }
  TimingEvent(const TimingEvent&) = delete;
  TimingEvent& operator=(const TimingEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Nanoseconds per call of `one` over kReplays calls on `stream`, from events.
template <class F>
double device_ns(cudaStream_t stream, const F& one) {
  TimingEvent start, stop;
  EAGLE_CUDA_CHECK(cudaEventRecord(start.get(), stream));
  for (int i = 0; i < kReplays; ++i) one();
  EAGLE_CUDA_CHECK(cudaEventRecord(stop.get(), stream));
  EAGLE_CUDA_CHECK(cudaEventSynchronize(stop.get()));
  float ms = 0;
  EAGLE_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return static_cast<double>(ms) * 1e6 / kReplays;
}

Array random_bf16(int64_t rows, int64_t cols, uint32_t seed, std::vector<float>& host) {
  host = random_floats(rows * cols, seed);
  std::vector<bfloat16> v(host.begin(), host.end());
  for (std::size_t i = 0; i < v.size(); ++i) host[i] = static_cast<float>(v[i]);
  Array a = Array::from(v, {rows, cols}, Device::cuda(0));
  EAGLE_CUDA_CHECK(cudaDeviceSynchronize());
  return a;
}

// 64 elements of c against float64 dot products of the bf16 inputs: ||err|| / ||ref||.
double sampled_error(const Array& c, const std::vector<float>& a, const std::vector<float>& b,
                     const Shape& s) {
  const std::vector<float> got = c.to_vector<float>();
  std::mt19937 gen(7);
  double num = 0, den = 0;
  for (int t = 0; t < 64; ++t) {
    const int64_t i = static_cast<int64_t>(gen() % static_cast<uint32_t>(s.m));
    const int64_t j = static_cast<int64_t>(gen() % static_cast<uint32_t>(s.n));
    double want = 0;
    for (int64_t p = 0; p < s.k; ++p)
      want += static_cast<double>(a[static_cast<std::size_t>(i * s.k + p)]) *
              b[static_cast<std::size_t>(p * s.n + j)];
    const double g = got[static_cast<std::size_t>(i * s.n + j)];
    if (std::isnan(g)) return NAN;
    num += (g - want) * (g - want);
    den += want * want;
  }
  return std::sqrt(num / den);
}

void gemm_shape(const Options& o, const Peers& peers, Report& report, const Shape& s) {
  const Device dev = Device::cuda(0);
  const cublaslt::Api& api = cublaslt::process().api;
  op::Graph g("gemm_" + s.name);
  const op::Tensor ta = g.tensor({"a", {s.m, s.k}, DType::bf16});
  const op::Tensor tb = g.tensor({"b", {s.k, s.n}, DType::bf16});
  const op::Tensor tc = g.matmul(ta, tb).set_output(true).set_name("c");
  plan::ExecutionPlans plans = engines::create_execution_plans(g, dev);
  plans.build_plans();

  std::vector<float> ha, hb;
  const Array a = random_bf16(s.m, s.k, 101, ha), b = random_bf16(s.k, s.n, 102, hb);
  const Array c = Array::empty({s.m, s.n}, DType::bf16, dev);
  plan::VariantPack pack(plans.layout());
  pack.set(ta, plan::Operand(a)).set(tb, plan::Operand(b)).set(tc, plan::Operand(c));
  RawStream stream;
  // Rank the list by measurement (cuBLASLt's heuristic order is a guess per shape); the plan
  // timed below is the one autotune pinned.
  plan::ExecutionContext tune;
  tune.stream = stream.get();
  tune.device = dev;
  const std::vector<plan::AutotuneTiming> tuned = plan::autotune(plans, pack, tune, {16, 2, 10});
  const int chosen = plans.selected();
  std::string ranking;
  for (const plan::AutotuneTiming& t : tuned) {
    char cell[48];
    std::snprintf(cell, sizeof cell, "%s%d: %.1f us", ranking.empty() ? "" : ", ", t.index,
                  t.median_ms * 1e3);
    ranking += cell;
  }
  report.note("autotune of " + s.name + " (entry: median per call): " + ranking + "; pinned " +
              std::to_string(chosen));
  const cublasLtMatmulAlgo_t* algo = cublaslt::algo_of(*plans.compiled());
  if (!algo) throw Error("section 10: entry " + plans.name_at(chosen) + " is no cuBLASLt plan");
  poison(c);
  const Library* lib = plans.compiled()->library();
  void* handle = lib->create(dev, stream.get());
  const std::size_t ws_bytes = plans.workspace_size();
  const Array ws =
      Array::empty({static_cast<int64_t>(std::max<std::size_t>(ws_bytes, 1))}, DType::u8, dev);
  plan::ExecutionContext ctx;
  ctx.stream = stream.get();
  ctx.handle = handle;
  ctx.workspace = ws.data();
  ctx.workspace_bytes = ws_bytes;
  ctx.device = dev;
  plans.execute(pack, ctx);
  EAGLE_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  const double err = sampled_error(c, ha, hb, s);
  if (!(err <= 1e-2))
    throw Error("section 10: " + s.name + " relative error " + std::to_string(err));

  // The raw peer: the same algorithm through hand-made descriptors (row-major c = a b as
  // column-major c^T = b^T a^T), with the same handle and workspace.
  auto layout = [&](cublasLtMatrixLayoutOpaque_t& l, int64_t rows, int64_t cols) {
    auto* p = reinterpret_cast<cublasLtMatrixLayout_t>(&l);
    if (api.layout_init(p, sizeof(l), CUDA_R_16BF, static_cast<uint64_t>(rows),
                        static_cast<uint64_t>(cols), rows) != CUBLAS_STATUS_SUCCESS)
      throw Error("section 10: cublasLtMatrixLayoutInit failed");
    return p;
  };
  cublasLtMatrixLayoutOpaque_t la, lb, ld;
  cublasLtMatrixLayout_t A = layout(la, s.n, s.k), B = layout(lb, s.k, s.m),
                         D = layout(ld, s.n, s.m);
  cublasLtMatmulDescOpaque_t desc_mem;
  auto* desc = reinterpret_cast<cublasLtMatmulDesc_t>(&desc_mem);
  if (api.matmul_desc_init(desc, sizeof(desc_mem), CUBLAS_COMPUTE_32F, CUDA_R_32F) !=
      CUBLAS_STATUS_SUCCESS)
    throw Error("section 10: cublasLtMatmulDescInit failed");
  const float alpha = 1, beta = 0;
  auto raw_call = [&] {
    return api.matmul(static_cast<cublasLtHandle_t>(handle), desc, &alpha, b.data(), A, a.data(), B,
                      &beta, c.data(), D, c.data(), D, algo, ws.data(), ws_bytes, stream.get());
  };
  const cublasStatus_t status = raw_call();
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error("section 10: raw cublasLtMatmul failed: " + api.name(status));
  auto raw_one = [&] { raw_call(); };
  auto eagle_one = [&] { plans.execute(pack, ctx); };
  for (int i = 0; i < 3; ++i) raw_one(), eagle_one();
  std::vector<Stats> st = measure(o.warmup(), o.quick ? 5 : 11,
                                  {[&] { return device_ns(stream.get(), eagle_one); },
                                   [&] { return device_ns(stream.get(), raw_one); }});
  EAGLE_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  lib->destroy(handle);

  const double flop =
      2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  char extra[160];
  std::snprintf(extra, sizeof extra, "eagle %.1f TFLOP/s, raw %.1f TFLOP/s; %s, workspace %zu B",
                flop / st[0].median_ns * 1e-3, flop / st[1].median_ns * 1e-3,
                plans.name_at(chosen).c_str(), ws_bytes);
  report.compare("bf16 GEMM " + s.name + " per call", st[0], "cublasLtMatmul", st[1], 1.02, extra);
  // The goal: at least 0.97 of torch.matmul's throughput, i.e. time ratio <= 1 / 0.97.
  const std::string peer =
      "gemm_bf16_" + std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n);
  compare_with_peer(report, peers, "bf16 GEMM " + s.name + " vs torch", st[0], "torch.matmul", peer,
                    1.0 / 0.97);
}

}  // namespace

void run_gemm_sections(const Options& o, Report& report) {
  if (cuda_device_count() == 0) {
    report.section("10. GEMM: skipped, no CUDA device");
    return;
  }
  if (!cublaslt::process().ok) {
    report.section("10. GEMM: skipped, " + engines::cublaslt_status());
    return;
  }
  report.section("10. GPU: bf16 GEMM through eagle's cuBLASLt plan (device time, " +
                 std::to_string(kReplays) +
                 " back-to-back calls between CUDA events) against a raw cublasLtMatmul with the "
                 "same algorithm; " +
                 engines::cublaslt_status());
  const Peers peers(o.peers);  // read once for every shape
  for (const Shape& s :
       {Shape{4096, 4096, 4096, "4096x4096x4096"}, Shape{8192, 8192, 8192, "8192x8192x8192"},
        Shape{8192, 12288, 4096, "[8192,4096]x[4096,12288]"}})
    gemm_shape(o, peers, report, s);
}

}  // namespace eagle::bench
