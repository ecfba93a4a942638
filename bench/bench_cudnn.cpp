// eagle_bench_cudnn: the cuDNN backend on a GPU, each figure beside its peer measured in the same
// run.
//   1. SDPA forward through eagle's cuDNN plan, dense B=8 S=2048 H=32 D=128 bf16 and THD
//      (T=16384 tokens in 64 sequences of zipf lengths), causal and not: device time (median of
//      samples of 10 launches, CUDA events) and TFLOP/s. The torch peer
//      (scaled_dot_product_attention on its cuDNN backend) is bench/torch_sdpa.py, run in the same
//      device call.
//   2. Host cost of one execute() of a cuDNN plan against cudnn-frontend's execute called
//      directly with the same pointers (min over 25 bursts of 64 calls from a drained queue).
//   3. bind() of a recorded graph whose node holds a cuDNN child graph: time per bind, and the
//      rebuild count (0: patched in place).
//
//   eagle_bench_cudnn [--quick]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "eagle/eagle.hpp"
#include "eagle/engines/cudnn.hpp"

#ifdef EAGLE_HAVE_CUDA
#include <cuda_runtime.h>

#include "engines/cudnn/frontend.hpp"
#include "engines/cudnn/loader.hpp"
#endif

namespace eagle::bench {
namespace {

#ifdef EAGLE_HAVE_CUDA

using Clock = std::chrono::steady_clock;
const Device kGpu = Device::cuda(0);

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One planned graph with device operands, a handle of its library and its workspace.
struct Planned {
  plan::ExecutionPlans plans;
  std::vector<Array> keep;
  plan::VariantPack pack;
  Stream stream{kGpu};
  void* handle = nullptr;
  Array ws;
  plan::ExecutionContext ctx;

  explicit Planned(const op::Graph& g, const std::vector<std::pair<int64_t, Array>>& ints = {})
      : plans(engines::create_execution_plans(g, kGpu,
                                              {plan::HeurMode::A, plan::HeurMode::FALLBACK})),
        pack(plans.layout()) {
    plans.build_plans();
    for (const op::Tensor& t : g.tensors()) {
      if (t.is_virtual()) continue;
      Array a;
      for (const auto& [uid, v] : ints)
        if (uid == t.uid()) a = v.to(kGpu);
      if (!a.data()) a = Array::empty(t.dims(), t.dtype(), kGpu);
      if (t.producer() < 0 && is_floating(t.dtype())) fill_random(a);
      keep.push_back(a);
      pack.set(t.uid(), plan::Operand(a));
    }
    const std::size_t bytes = plans.workspace_size();
    if (bytes) ws = Array::empty({static_cast<int64_t>(bytes)}, DType::u8, kGpu);
    const Library* lib = plans.compiled()->library();
    if (lib) handle = lib->create(kGpu, stream.native());
    ctx = {stream.native(), handle, bytes ? ws.data() : nullptr, bytes};
    ctx.device = kGpu;
  }
  ~Planned() {
    if (const Library* lib = plans.compiled()->library()) lib->destroy(handle);
  }
  // Uniform in [-1, 1) (never timed on zeros); the benchmark's floating operands are bf16.
  static void fill_random(const Array& a) {
    std::vector<bfloat16> v;
    v.reserve(static_cast<std::size_t>(a.numel()));
    uint32_t s = 12345;
    for (int64_t i = 0; i < a.numel(); ++i) {
      s = s * 1664525u + 1013904223u;
      v.emplace_back(static_cast<float>(s >> 8) / 16777216.0f * 2.0f - 1.0f);
    }
    a.copy_from(Array::from(v, a.shape(), Device::cpu()));
  }
  cudaStream_t raw() const { return static_cast<cudaStream_t>(stream.native()); }
};

// Device milliseconds per execute: median over samples of 10 back-to-back launches.
double device_ms(Planned& p, int samples) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 3; ++i) p.plans.execute(p.pack, p.ctx);
  std::vector<double> ms;
  for (int s = 0; s < samples; ++s) {
    cudaEventRecord(a, p.raw());
    for (int i = 0; i < 10; ++i) p.plans.execute(p.pack, p.ctx);
    cudaEventRecord(b, p.raw());
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t / 10.0);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(ms);
}

op::Graph sdpa_graph(bool ragged, int64_t b, int64_t t, int64_t h, int64_t d, bool causal) {
  op::Graph g("sdpa");
  const op::Dims dims = ragged ? op::Dims{t, h, d} : op::Dims{b, t, h, d};
  op::Ports p = {{"q", g.tensor({"q", dims, DType::bf16})},
                 {"k", g.tensor({"k", dims, DType::bf16})},
                 {"v", g.tensor({"v", dims, DType::bf16})}};
  if (ragged) {
    p.emplace_back("cu_seqlens_q", g.tensor({"cu_q", {b + 1}, DType::i32}));
    p.emplace_back("cu_seqlens_kv", g.tensor({"cu_kv", {b + 1}, DType::i32}));
  }
  g.op("sdpa", p, {{"causal", causal}}).at("o").set_output(true);
  return g;
}

// 64 zipf(1.1) lengths summing to 16384, each >= 1.
std::vector<int64_t> zipf_lengths(int n, int64_t total) {
  std::vector<double> w(static_cast<std::size_t>(n));
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += w[i] = 1.0 / std::pow(i + 1.0, 1.1);
  std::vector<int64_t> len(static_cast<std::size_t>(n));
  int64_t used = 0;
  for (int i = 0; i < n; ++i)
    used += len[i] = std::max<int64_t>(1, std::llround(w[i] / sum * total));
  len[0] += total - used;
  return len;
}

void sdpa_section(bool quick) {
  std::printf("\n== 1. SDPA forward through the cuDNN backend (bf16, H=32, D=128)\n");
  std::printf("%-44s %10s %10s  %s\n", "case", "ms", "TFLOP/s", "plan");
  const int samples = quick ? 5 : 21;
  for (bool causal : {false, true}) {
    const op::Graph g = sdpa_graph(false, 8, 2048, 32, 128, causal);
    Planned p(g);
    const double ms = device_ms(p, samples);
    const double flops = 4.0 * 8 * 32 * 2048.0 * 2048.0 * 128 * (causal ? 0.5 : 1.0);
    std::printf("%-44s %10.3f %10.1f  %s\n",
                (std::string("dense B=8 S=2048") + (causal ? " causal" : "")).c_str(), ms,
                flops / ms * 1e-9, p.plans.name_at(p.plans.selected()).c_str());
  }
  const std::vector<int64_t> len = zipf_lengths(64, 16384);
  std::vector<int64_t> cu = {0};
  double pairs = 0, causal_pairs = 0;
  for (int64_t l : len) {
    cu.push_back(cu.back() + l);
    pairs += static_cast<double>(l) * l;
    causal_pairs += l * (l + 1) / 2.0;
  }
  std::printf("THD lengths: longest %lld, shortest %lld (zipf 1.1)\n",
              static_cast<long long>(len.front()), static_cast<long long>(len.back()));
  for (bool causal : {false, true}) {
    const op::Graph g = sdpa_graph(true, 64, 16384, 32, 128, causal);
    const op::Node n = g.nodes()[0];
    const Array cu_a = Array::from(std::vector<int32_t>(cu.begin(), cu.end()), {65}, Device::cpu());
    Planned p(g, {{n.input("cu_seqlens_q").uid(), cu_a}, {n.input("cu_seqlens_kv").uid(), cu_a}});
    const double ms = device_ms(p, samples);
    const double flops = 4.0 * 32 * 128 * (causal ? causal_pairs : pairs);
    std::printf("%-44s %10.3f %10.1f  %s\n",
                (std::string("THD T=16384 N=64") + (causal ? " causal" : "")).c_str(), ms,
                flops / ms * 1e-9, p.plans.name_at(p.plans.selected()).c_str());
  }
}

// Host nanoseconds per call: min over 25 bursts of 64 calls, each from a drained queue.
template <class Fn>
double host_ns(Planned& p, Fn&& fn) {
  std::vector<double> per_call;
  for (int r = 0; r < 25; ++r) {
    cudaStreamSynchronize(p.raw());
    const auto t0 = Clock::now();
    for (int i = 0; i < 64; ++i) fn();
    per_call.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / 64);
  }
  cudaStreamSynchronize(p.raw());
  return *std::min_element(per_call.begin(), per_call.end());
}

void host_section() {
  std::printf("\n== 2. host cost of one execute of a cuDNN plan (dense B=1 S=128 H=8 D=64 bf16)\n");
  const op::Graph g = sdpa_graph(false, 1, 128, 8, 64, false);
  Planned p(g);
  const auto compiled = p.plans.compiled();
  std::vector<void*> ptrs;
  if (!cudnn::frontend_pointers(*compiled, p.pack.data(), p.ctx.workspace, ptrs)) {
    std::printf("the selected plan is no cuDNN plan: %s\n", p.plans.describe().c_str());
    return;
  }
  const double direct = host_ns(
      p, [&] { cudnn::frontend_execute(*compiled, p.handle, ptrs.data(), p.ctx.workspace); });
  const double run = host_ns(p, [&] { compiled->run(p.pack.data(), p.ctx); });
  const double exec = host_ns(p, [&] { p.plans.execute(p.pack, p.ctx); });
  std::printf("%-52s %9.0f ns\n", "cudnn-frontend execute, called directly", direct);
  std::printf("%-52s %9.0f ns  (+%.0f ns, goal <= +1000)\n", "eagle CompiledPlan::run", run,
              run - direct);
  std::printf("%-52s %9.0f ns  (+%.0f ns, goal <= +1000)\n", "eagle ExecutionPlans::execute", exec,
              exec - direct);
}

void bind_section() {
  std::printf("\n== 3. bind of a recorded node holding a cuDNN child graph\n");
  for (bool ragged : {false, true}) {
    const op::Graph og = sdpa_graph(ragged, 4, ragged ? 512 : 128, 8, 64, true);
    const Kernel k = engines::planned_kernel(og, {plan::HeurMode::A, plan::HeurMode::FALLBACK});
    std::vector<std::pair<std::string, Array>> args;
    for (const op::Tensor& t : og.operand_tensors()) {
      if (t.producer() >= 0) continue;
      Array a = Array::empty(t.dims(), t.dtype(), kGpu);
      if (is_floating(t.dtype())) {
        Planned::fill_random(a);
      } else {  // four sequences of 128 rows
        a = Array::from(std::vector<int32_t>{0, 128, 256, 384, 512}, {5}, Device::cpu()).to(kGpu);
      }
      args.emplace_back(t.name(), a);
    }
    const Array q2 = Array::empty(args[0].second.shape(), DType::bf16, kGpu);
    Planned::fill_random(q2);
    Graph g = Graph::record([&](Recorder& r) {
      std::vector<Arg> in;
      for (const auto& [name, a] : args) in.push_back(r.param(name, a));
      r.result(r.call(k, in));
    });
    std::vector<std::string> warnings;
    g.set_warning_handler([&](const std::string& w) { warnings.push_back(w); });
    g.build(kGpu);
    g();
    const int n = 200;
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) g.bind("q", i % 2 ? args[0].second : q2);
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n;
    g();
    std::printf("%-30s %8.2f us per bind, %d rebuilds%s%s  [%s]\n",
                ragged ? "THD (kernel + cuDNN graph)" : "dense (cuDNN graph)", us,
                g.rebuild_count(),
                warnings.empty() ? "" : ", warning: ", warnings.empty() ? "" : warnings[0].c_str(),
                g.schedule().c_str());
  }
}

#endif

}  // namespace
}  // namespace eagle::bench

int main(int argc, char** argv) {
  using namespace eagle;
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::printf("%s\n", engines::cudnn_backend_status().c_str());
#ifdef EAGLE_HAVE_CUDA
  if (!cuda_available()) {
    std::printf("no CUDA device: nothing to time\n");
    return 0;
  }
  if (!cudnn::cudnn_library().loaded) return 0;
  try {
    bench::sdpa_section(quick);
    bench::host_section();
    bench::bind_section();
  } catch (const std::exception& e) {
    std::printf("failed: %s\n", e.what());
    return 1;
  }
#else
  (void)quick;
  std::printf("this build has no CUDA: nothing to time\n");
#endif
  return 0;
}
