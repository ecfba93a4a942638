// Section 13: varlen (THD) attention on the GPU, bf16, H = Hk = 32, D = 128 (issue 10).
//   a. Exact shapes, zipf lengths (bench/zipf_lengths.hpp, the seed's generator made
//      deterministic): forward and forward+backward TFLOP/s of eagle's native engine (flat
//      schedule), eagle's cuDNN backend, and torch's varlen_attn (bench/peers/torch_varlen.py,
//      the same batch, timed in the same device call). Goals: native >= 1.5x varlen_attn, and
//      native >= 0.9x cuDNN.
//   b. Over-capture: forward+backward captured once for the capacity (T rows, N slots) against
//      a graph captured for the exact batch (L rows, M slots), replay time; goal <= 1.10 for
//      native. cuDNN's ratio (its THD graph is sized by the buffer rows) and torch's (captured
//      with max_seqlen = T) beside it. Lines starting "csv," feed bench/plots/plot_overcapture.py.
// Forward FLOPs = 4 H D (visible query-key pairs); forward+backward = 3.5x that (FlashAttention's
// convention: the backward's five products against the forward's two).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "bench_cuda.hpp"
#include "eagle/eagle.hpp"
#include "util/cuda_check.hpp"
#include "zipf_lengths.hpp"

namespace eagle::bench {
namespace {

const Device kGpu = Device::cuda(0);
constexpr int64_t kHeads = 32, kDim = 128;

enum class Engine { native_flat, native_persistent, cudnn };
const char* engine_name(Engine e) {
  return e == Engine::native_flat         ? "native"
         : e == Engine::native_persistent ? "native persistent"
                                          : "cudnn";
}

op::Ports attention_inputs(op::Graph& g, int64_t rows, int64_t slots) {
  const op::Dims d = {rows, kHeads, kDim};
  return {{"q", g.tensor({"q", d, DType::bf16})},
          {"k", g.tensor({"k", d, DType::bf16})},
          {"v", g.tensor({"v", d, DType::bf16})},
          {"cu_seqlens_q", g.tensor({"cu_q", {slots + 1}, DType::i32})},
          {"cu_seqlens_kv", g.tensor({"cu_kv", {slots + 1}, DType::i32})}};
}

op::Graph forward_graph(int64_t rows, int64_t slots, bool causal) {
  op::Graph g("sdpa");
  for (auto& [port, t] : g.op("sdpa", attention_inputs(g, rows, slots),
                              {{"causal", causal}, {"generate_stats", true}}))
    t.set_output(true);
  return g;
}

op::Graph backward_graph(int64_t rows, int64_t slots, bool causal) {
  op::Graph g("sdpa_bwd");
  op::Ports p = attention_inputs(g, rows, slots);
  p.emplace_back("o", g.tensor({"o", {rows, kHeads, kDim}, DType::bf16}));
  p.emplace_back("d_o", g.tensor({"d_o", {rows, kHeads, kDim}, DType::bf16}));
  p.emplace_back("stats", g.tensor({"stats", {rows, kHeads}, DType::f32}));
  for (auto& [port, t] : g.op("sdpa_bwd", p, {{"causal", causal}})) t.set_output(true);
  return g;
}

int64_t engine_id(const std::string& family, const std::string& name) {
  const plan::Manifest& m = engines::builtin_manifest();
  const plan::EngineFamily& f = m.family(family);
  for (std::size_t s = 0; s < f.slots.size(); ++s)
    if (f.slots[s].name == name) return m.engine_id(family, static_cast<int>(s));
  throw std::runtime_error("bench: no engine " + name + " in family " + family);
}

// The plans of `g` for `engine`: native by (id, knobs); cuDNN's first entry that builds.
plan::ExecutionPlans plans_for(const op::Graph& g, Engine engine, bool backward) {
  if (engine != Engine::cudnn) {
    plan::Knobs k = {{"schedule", engine == Engine::native_persistent ? 1 : 0}};
    if (backward) k["deterministic"] = 0;
    plan::ExecutionPlans p = engines::create_execution_plan(
        g.clone(), kGpu,
        engine_id(backward ? "sdpa_bwd" : "sdpa",
                  backward ? "native_attention_bwd" : "native_attention"),
        k);
    p.build_plans();
    return p;
  }
  plan::ExecutionPlans p = engines::create_execution_plans(
      g.clone(), kGpu, {plan::HeurMode::A, plan::HeurMode::FALLBACK});
  for (int i = 0; i < p.count(); ++i) {
    if (p.at(i).engine_id >= plan::kBackendIdEnd) continue;
    p.select_plan(i);
    try {
      p.build_plans();
      return p;
    } catch (const NotSupported&) {
    }
  }
  throw NotSupported("bench: no cuDNN entry builds for " + g.nodes()[0].op());
}

// bench_common's uniform [-1, 1] floats (never zeros) as bf16.
void fill_random(const Array& a, uint32_t seed) {
  const std::vector<float> f = random_floats(a.numel(), seed);
  a.copy_from(Array::from(std::vector<bfloat16>(f.begin(), f.end()), a.shape(), Device::cpu()));
}

// One planned forward and backward over shared device operands, on one stream.
class Step {
 public:
  Step(Engine engine, int64_t rows, const std::vector<int32_t>& cu, bool causal)
      : fwd_(plans_for(forward_graph(rows, static_cast<int64_t>(cu.size()) - 1, causal), engine,
                       false)),
        bwd_(plans_for(backward_graph(rows, static_cast<int64_t>(cu.size()) - 1, causal), engine,
                       true)),
        fpack_(fwd_.layout()),
        bpack_(bwd_.layout()) {
    const int64_t slots = static_cast<int64_t>(cu.size()) - 1;
    const op::Dims d = {rows, kHeads, kDim};
    const Array cu_a = Array::from(cu, {slots + 1}, Device::cpu()).to(kGpu);
    Array q = Array::empty(d, DType::bf16, kGpu), k = Array::empty(d, DType::bf16, kGpu),
          v = Array::empty(d, DType::bf16, kGpu), d_o = Array::empty(d, DType::bf16, kGpu);
    fill_random(q, 1), fill_random(k, 2), fill_random(v, 3), fill_random(d_o, 4);
    const Array o = Array::empty(d, DType::bf16, kGpu);
    const Array stats = Array::empty({rows, kHeads}, DType::f32, kGpu);
    keep_ = {cu_a, q, k, v, d_o, o, stats};
    // Inputs by tensor name; the forward's outputs (named by the op) by port.
    auto bind = [&](plan::VariantPack& pack, const op::Graph& g, const std::string& name,
                    const Array& a) {
      for (const op::Tensor& t : g.tensors())
        if (t.name() == name) pack.set(t.uid(), plan::Operand(a));
    };
    for (auto [pack, plans] : {std::pair{&fpack_, &fwd_}, std::pair{&bpack_, &bwd_}}) {
      const op::Graph& g = plans->graph();
      for (const auto& [name, a] : {std::pair{"q", q},
                                    {"k", k},
                                    {"v", v},
                                    {"cu_q", cu_a},
                                    {"cu_kv", cu_a},
                                    {"o", o},
                                    {"d_o", d_o},
                                    {"stats", stats}})
        bind(*pack, g, name, a);
    }
    const op::Node f = fwd_.graph().nodes()[0];
    fpack_.set(f.output("o").uid(), plan::Operand(o));
    fpack_.set(f.output("stats").uid(), plan::Operand(stats));
    for (const op::Tensor& t : bwd_.graph().tensors())
      if (t.producer() >= 0 && !t.is_virtual()) {
        keep_.push_back(Array::empty(t.dims(), t.dtype(), kGpu));
        bpack_.set(t.uid(), plan::Operand(keep_.back()));
      }
    fctx_ = context(fwd_, fws_, fhandle_);
    bctx_ = context(bwd_, bws_, bhandle_);
    EAGLE_CUDA_CHECK(cudaDeviceSynchronize());
  }
  ~Step() {
    if (const Library* lib = fwd_.compiled()->library()) lib->destroy(fhandle_);
    if (const Library* lib = bwd_.compiled()->library()) lib->destroy(bhandle_);
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  Step(const Step&) = delete;
  Step& operator=(const Step&) = delete;

  void forward() { fwd_.execute(fpack_, fctx_); }
  void both() {
    fwd_.execute(fpack_, fctx_);
    bwd_.execute(bpack_, bctx_);
  }
  // Captures both() once into a CUDA graph.
  void capture() {
    EAGLE_CUDA_CHECK(cudaStreamBeginCapture(raw(), cudaStreamCaptureModeThreadLocal));
    both();
    EAGLE_CUDA_CHECK(cudaStreamEndCapture(raw(), &graph_));
    EAGLE_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  void replay() { EAGLE_CUDA_CHECK(cudaGraphLaunch(exec_, raw())); }
  cudaStream_t raw() const { return static_cast<cudaStream_t>(stream_.native()); }
  std::string plan_names() const {
    return fwd_.name_at(fwd_.selected()) + " / " + bwd_.name_at(bwd_.selected());
  }

 private:
  plan::ExecutionContext context(const plan::ExecutionPlans& p, Array& ws, void*& handle) {
    const std::size_t bytes = p.workspace_size();
    if (bytes) ws = Array::empty({static_cast<int64_t>(bytes)}, DType::u8, kGpu);
    if (const Library* lib = p.compiled()->library()) handle = lib->create(kGpu, stream_.native());
    plan::ExecutionContext ctx{stream_.native(), handle, bytes ? ws.data() : nullptr, bytes};
    ctx.device = kGpu;
    return ctx;
  }

  Stream stream_{kGpu};
  plan::ExecutionPlans fwd_, bwd_;
  plan::VariantPack fpack_, bpack_;
  std::vector<Array> keep_;
  Array fws_, bws_;
  void* fhandle_ = nullptr;
  void* bhandle_ = nullptr;
  plan::ExecutionContext fctx_, bctx_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// Visible (query, key) pairs of a batch of equal q and kv lengths.
double pairs(const std::vector<int64_t>& lengths, bool causal) {
  double p = 0;
  for (int64_t l : lengths) p += causal ? l * (l + 1) / 2.0 : static_cast<double>(l) * l;
  return p;
}

std::string tflops(double flops, const Stats& s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f TFLOP/s", flops / s.median_ns * 1e-3);
  return buf;
}

void exact_shapes(const Options& o, Report& report, const Peers& peers) {
  report.section("13a. varlen attention, exact shapes (bf16, H=32, D=128, zipf lengths)");
  struct Shape {
    int64_t t, n;
  };
  for (const Shape& sh : {Shape{4096, 32}, Shape{16384, 64}, Shape{16384, 8}})
    for (bool causal : {false, true}) {
      const std::vector<int64_t> len = zipf_lengths(sh.t, sh.n, exact_seed(sh.t, sh.n));
      const std::vector<int32_t> cu = cu_seqlens(len, sh.n);
      // The peer's names (bench/peers/torch_varlen.py): spaces would end the table's key.
      const std::string name = "varlen_T" + std::to_string(sh.t) + "_N" + std::to_string(sh.n) +
                               (causal ? "_causal" : "_full");
      const double fwd_flops = 4.0 * kHeads * kDim * pairs(len, causal);
      const int reps = sh.t > 8192 ? 5 : 20;
      // [native flat, native persistent, cudnn][fwd, fwd+bwd]
      const Engine engines[3] = {Engine::native_flat, Engine::native_persistent, Engine::cudnn};
      Stats st[3][2];
      std::string plans[3];
      bool ran[3] = {false, false, false};
      for (int e = 0; e < 3; ++e) {
        try {
          Step step(engines[e], sh.t, cu, causal);
          plans[e] = step.plan_names();
          st[e][0] = device_time(o, step.raw(), reps, [&] { step.forward(); });
          st[e][1] = device_time(o, step.raw(), reps, [&] { step.both(); });
          ran[e] = true;
        } catch (const std::exception& ex) {
          report.note(name + ": " + engine_name(engines[e]) + " did not run: " + ex.what());
        }
      }
      for (int pass = 0; pass < 2; ++pass) {
        const double flops = fwd_flops * (pass ? 3.5 : 1.0);
        const std::string what = name + (pass ? " fwd+bwd" : " fwd");
        const std::string peer = name + (pass ? "_fwdbwd" : "_fwd");
        std::string line = what + ":";
        for (int e = 0; e < 3; ++e) {
          if (!ran[e]) continue;
          line +=
              std::string(" ") + engine_name(engines[e]) + " " + tflops(flops, st[e][pass]) + ",";
          std::printf("csv,exact,%s,%s,%.3f,%.3f\n", what.c_str(), engine_name(engines[e]),
                      st[e][pass].median_ns * 1e-6, flops / st[e][pass].median_ns * 1e-3);
        }
        report.note(line + "  [" + plans[0] + "]");
        if (!ran[0]) continue;
        // Goals as ratios of times: native / peer <= 1 / 1.5 (1.5x faster than varlen_attn),
        // native / cudnn <= 1 / 0.9.
        compare_with_peer(report, peers, what + " native vs torch varlen_attn", st[0][pass],
                          "varlen_attn", peer, 1.0 / 1.5, tflops(flops, st[0][pass]));
        compare_with_peer(report, peers, what + " native vs varlen_attn in a CUDA graph",
                          st[0][pass], "varlen_attn graph", peer + "_graph", std::nullopt);
        if (ran[2])
          report.compare(what + " native vs cudnn", st[0][pass], "cudnn", st[2][pass], 1.0 / 0.9,
                         tflops(flops, st[2][pass]) + " cudnn");
      }
    }
}

// One over-capture point: the worst-case graph (capacity rows, N slots) against the exact one
// (L rows, M slots), forward+backward replays, per engine.
struct Point {
  std::string sweep, x;  // sweep a, b or c; the x value (M or L)
  int64_t capacity, slots;
  std::vector<int64_t> lengths;  // the batch (M sequences, L tokens)
};

void overcapture_point(const Options& o, Report& report, const Peers& peers, const Point& p) {
  int64_t active = 0;
  for (int64_t l : p.lengths) active += l;
  const int64_t m = static_cast<int64_t>(p.lengths.size());
  const std::string name = "overcapture_" + p.sweep + "_" + p.x;
  const int reps = 5;
  for (Engine e : {Engine::native_flat, Engine::native_persistent, Engine::cudnn}) {
    try {
      Step worst(e, p.capacity, cu_seqlens(p.lengths, p.slots), true);
      Step exact(e, active, cu_seqlens(p.lengths, m), true);
      worst.capture();
      exact.capture();
      const Stats w = device_time(o, worst.raw(), reps, [&] { worst.replay(); });
      const Stats x = device_time(o, exact.raw(), reps, [&] { exact.replay(); });
      report.compare(name + " " + engine_name(e) + ": worst-case graph", w, "exact graph", x,
                     e == Engine::native_flat ? std::optional<double>(1.10) : std::nullopt);
      std::printf("csv,overcapture,%s,%s,%s,%.4f\n", p.sweep.c_str(), p.x.c_str(), engine_name(e),
                  w.median_ns / x.median_ns);
    } catch (const std::exception& ex) {
      report.note(name + " " + engine_name(e) + ": did not run: " + ex.what());
    }
  }
  std::string why_w, why_x;
  const std::optional<Stats> tw = peers.find(name + "_worst", why_w);
  const std::optional<Stats> tx = peers.find(name + "_exact", why_x);
  if (tw && tx) {
    report.note(name + " torch varlen_attn (max_seqlen = T): worst / exact = " +
                std::to_string(tw->median_ns / tx->median_ns));
    std::printf("csv,overcapture,%s,%s,torch,%.4f\n", p.sweep.c_str(), p.x.c_str(),
                tw->median_ns / tx->median_ns);
  } else {
    report.note(name + " torch: " + (tw ? why_x : why_w));
  }
}

void overcapture(const Options& o, Report& report, const Peers& peers) {
  report.section(
      "13b. over-capture: forward+backward captured for the capacity vs for the exact batch "
      "(causal, bf16, H=32, D=128); goal <= 1.10 for native");
  std::vector<Point> points;
  for (int64_t m : {1, 4, 16, 64, 256})
    points.push_back({"a", "M" + std::to_string(m), 8192, 256,
                      zipf_lengths(8192, m, overcapture_seed(8192, m, 8192))});
  for (int64_t l : {16384, 8192, 4096, 2048, 1024})
    points.push_back({"b", "L" + std::to_string(l), 16384, 256,
                      zipf_lengths(l, 64, overcapture_seed(16384, 64, l))});
  for (int64_t m : {128, 64, 32, 16, 8})
    points.push_back({"c", "M" + std::to_string(m), 16384, 128, std::vector<int64_t>(m, 128)});
  if (o.quick) points.resize(3);
  for (const Point& p : points) overcapture_point(o, report, peers, p);
}

}  // namespace

void run_attention_sections(const Options& o, Report& report) {
  const Peers peers(o.peers);
  exact_shapes(o, report, peers);
  overcapture(o, report, peers);
}

}  // namespace eagle::bench
