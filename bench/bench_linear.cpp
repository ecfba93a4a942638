// Section 14: chunked linear attention on the GPU, bf16, H = HV = 32, K = V = 128 (issue 11).
//   a. Exact shapes, zipf lengths (bench/zipf_lengths.hpp): the forward of gdn and kda through
//      the planner's first native plan, against fla 0.6's chunk_gated_delta_rule / chunk_kda
//      (bench/peers/fla_linear.py, the same batch, timed in the same device call). Goal: eagle
//      >= 1.5x fla (time ratio <= 0.67).
//   b. Over-capture of the forward: a graph captured for the capacity (T rows, N slots) against
//      one captured for the exact batch (L rows, M slots), replay time; goal <= 1.10.
//   c. The backward at a's shapes: kda_bwd and gdn_bwd through the planner's first native plan
//      (every gradient of q, k, v, g, beta from a random d_o), alone and with the forward,
//      against fla's forward + backward (torch.autograd over chunk_kda; fla_..._fwdbwd) and its
//      backward alone taken as fwdbwd - fwd (both timed in the same fla run). Goal: eagle
//      >= 1.5x fla on each.
// Inputs as a real layer's: q, k, v uniform bf16, use_qk_l2norm on, g = log(sigmoid(3x)) (log
// space, in (-3.05, -0.05)), beta = sigmoid(x), both f32; no initial or final state.
#include <cuda_runtime.h>
#include <algorithm>

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
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

// The op `rule` (backward: `rule`_bwd, which also reads d_o) over every input of the
// section's layer.
op::Graph linear_graph(const std::string& rule, int64_t rows, int64_t slots, bool backward) {
  const std::string op = backward ? rule + "_bwd" : rule;
  op::Graph g(op);
  const op::Dims d = {rows, kHeads, kDim};
  const op::Dims gate = rule == "gdn" ? op::Dims{rows, kHeads} : op::Dims{rows, kHeads, kDim};
  op::Ports in = {{"q", g.tensor({"q", d, DType::bf16})},
                  {"k", g.tensor({"k", d, DType::bf16})},
                  {"v", g.tensor({"v", d, DType::bf16})},
                  {"g", g.tensor({"g", gate, DType::f32})},
                  {"beta", g.tensor({"beta", {rows, kHeads}, DType::f32})},
                  {"cu_seqlens", g.tensor({"cu", {slots + 1}, DType::i32})}};
  if (backward) in.emplace_back("d_o", g.tensor({"d_o", d, DType::bf16}));
  for (auto& [port, t] : g.op(op, in, {{"use_qk_l2norm", true}})) t.set_output(true);
  return g;
}

// The planner's first native entry that builds for `g` on the GPU, with `knobs` set over its
// knob point (none: as ranked). The ranking lists one point per engine, so a pinned knob builds
// a one-entry plan list for that engine (create_execution_plan).
plan::ExecutionPlans native_plan(const op::Graph& g, const plan::Knobs& knobs = {}) {
  plan::ExecutionPlans p = engines::create_execution_plans(
      g.clone(), kGpu, {plan::HeurMode::A, plan::HeurMode::FALLBACK});
  std::string refusal;
  for (int i = 0; i < p.count(); ++i) {
    if (p.name_at(i).rfind("native", 0) != 0) continue;
    try {
      if (knobs.empty()) {
        p.select_plan(i);
        p.build_plans();
        return p;
      }
      plan::Knobs pinned = p.at(i).knobs;
      // An entry whose engine lacks one of the knobs is not the one asked for (native_gdn is
      // listed for kda graphs too, and declines them only when built).
      if (!std::all_of(knobs.begin(), knobs.end(),
                       [&](const auto& k) { return pinned.count(k.first) != 0; }))
        continue;
      for (const auto& [knob, value] : knobs) pinned[knob] = value;
      plan::ExecutionPlans one =
          engines::create_execution_plan(g.clone(), kGpu, p.at(i).engine_id, pinned);
      one.build_plans();
      return one;
    } catch (const NotSupported&) {
    } catch (const InvalidArgument& ex) {
      // A knob value outside this engine's domain (native_gdn's `prepare` stops at 1, kda's
      // goes to 2): the next engine may take it.
      refusal = ex.what();
    }
  }
  if (!refusal.empty()) throw InvalidArgument(refusal);
  throw NotSupported("bench: no native plan builds for " + g.nodes()[0].op());
}

// The first `n` floats f(u), u uniform in [-1, 1] (bench_common's generator), as an array of
// `dtype`. Draws are cached per seed and grown on demand (each seed has one f): the host
// generator would otherwise dominate the section (hundreds of millions of floats per step).
template <class F>
Array random_array(const op::Dims& dims, DType dtype, uint32_t seed, F&& f) {
  static std::map<uint32_t, std::vector<float>> cache;
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float>& x = cache[seed];
  if (static_cast<int64_t>(x.size()) < n) {
    x = random_floats(n, seed);
    for (float& v : x) v = f(v);
  }
  const auto end = x.begin() + n;
  const Array host = dtype == DType::bf16
                         ? Array::from(std::vector<bfloat16>(x.begin(), end), dims, Device::cpu())
                         : Array::from(std::vector<float>(x.begin(), end), dims, Device::cpu());
  Array a = host.to(kGpu);
  EAGLE_CUDA_CHECK(cudaDeviceSynchronize());
  return a;
}

// One planned forward (backward: the op's backward, from a random d_o) over its own device
// operands, on one stream; capturable.
class LinearStep {
 public:
  LinearStep(const std::string& rule, int64_t rows, const std::vector<int32_t>& cu,
             const plan::Knobs& knobs = {}, bool backward = false)
      : plans_(native_plan(linear_graph(rule, rows, static_cast<int64_t>(cu.size()) - 1, backward),
                           knobs)),
        pack_(plans_.layout()) {
    const op::Dims d = {rows, kHeads, kDim};
    const op::Dims gate = rule == "gdn" ? op::Dims{rows, kHeads} : op::Dims{rows, kHeads, kDim};
    const auto same = [](float x) { return x; };
    const auto log_sigmoid = [](float x) { return -std::log1p(std::exp(-3.0f * x)); };
    const auto sigmoid = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
    const std::vector<std::pair<std::string, Array>> inputs = {
        {"q", random_array(d, DType::bf16, 1, same)},
        {"k", random_array(d, DType::bf16, 2, same)},
        {"v", random_array(d, DType::bf16, 3, same)},
        {"g", random_array(gate, DType::f32, 4, log_sigmoid)},
        {"beta", random_array({rows, kHeads}, DType::f32, 5, sigmoid)},
        {"cu", to_device(cu, kGpu)},
        {"d_o", random_array(d, DType::bf16, 6, same)}};
    const op::Graph& g = plans_.graph();
    for (const auto& [name, a] : inputs)
      for (const op::Tensor& t : g.tensors())
        if (t.name() == name) pack_.set(t.uid(), plan::Operand(a));
    for (const op::Tensor& t : g.tensors())
      if (t.producer() >= 0 && !t.is_virtual()) {
        keep_.push_back(Array::empty(t.dims(), t.dtype(), kGpu));
        pack_.set(t.uid(), plan::Operand(keep_.back()));
      }
    for (const auto& [name, a] : inputs) keep_.push_back(a);
    const std::size_t bytes = plans_.workspace_size();
    if (bytes) ws_ = Array::empty({static_cast<int64_t>(bytes)}, DType::u8, kGpu);
    ctx_ = plan::ExecutionContext{stream_.native(), nullptr, bytes ? ws_.data() : nullptr, bytes};
    ctx_.device = kGpu;
  }

  void forward() { plans_.execute(pack_, ctx_); }  // (or the backward)
  void capture() {
    EAGLE_CUDA_CHECK(cudaStreamBeginCapture(raw(), cudaStreamCaptureModeThreadLocal));
    forward();
    EAGLE_CUDA_CHECK(cudaStreamEndCapture(raw(), &graph_.graph));
    EAGLE_CUDA_CHECK(cudaGraphInstantiate(&graph_.exec, graph_.graph, 0));
  }
  void replay() { EAGLE_CUDA_CHECK(cudaGraphLaunch(graph_.exec, raw())); }
  cudaStream_t raw() const { return static_cast<cudaStream_t>(stream_.native()); }
  std::string plan_name() const { return plans_.name_at(plans_.selected()); }

 private:
  Stream stream_{kGpu};
  plan::ExecutionPlans plans_;
  plan::VariantPack pack_;
  std::vector<Array> keep_;
  Array ws_;
  plan::ExecutionContext ctx_;
  RawGraph graph_;
};

// A plan of `rule` with `knobs` pinned (none: the planner's first), `tag` naming it in rows.
struct Variant {
  std::string rule, tag;
  plan::Knobs knobs;
};

// Sections 14a and 14c: each of the exact shapes (T tokens in N zipf sequences) with each
// variant: fn(T, cu_seqlens, fla's case stem (bench/peers/fla_linear.py, "fla_kda_T32768_N8"),
// the row's name, the variant).
template <class Fn>
void for_each_exact_shape(const std::vector<Variant>& variants, Fn&& fn) {
  struct Shape {
    int64_t t, n;
  };
  for (const Shape& sh : {Shape{32768, 8}, Shape{32768, 64}, Shape{4096, 32}})
    for (const Variant& v : variants) {
      const std::string shape = "T" + std::to_string(sh.t) + "_N" + std::to_string(sh.n);
      fn(sh.t, cu_seqlens(zipf_lengths(sh.t, sh.n, exact_seed(sh.t, sh.n)), sh.n),
         "fla_" + v.rule + "_" + shape,
         v.rule + " T" + std::to_string(sh.t) + " N" + std::to_string(sh.n) + v.tag, v);
    }
}

void exact_shapes(const Options& o, Report& report, const Peers& peers) {
  report.section("14a. linear attention forward, exact shapes (bf16, H=32, K=V=128, zipf lengths)");
  // kda seven times and gdn seven: the planner's first entry (the state transposed in registers,
  // the compact prepare and, for gdn, the blocked inverse), for kda the prepare's products with
  // their fragments built in registers (prepare = 2), the state launch a CTA per 32 columns
  // (state = 0) and per head (state = 1), the W / U stores (and gdn's o stores) straight from
  // the mma fragments (stores = 0), state 0's loop unpipelined (pipeline = 0), and for gdn the
  // column-wise inverse (solve = 0) alone and with state 0 unpipelined; the state rows (kda and
  // gdn) with two CTAs per head, the sequences past a balanced share split over both (state = 3).
  const std::vector<Variant> variants = {
      {"kda", "", {}},
      {"kda", " prepare 2", {{"prepare", 2}}},
      {"kda", " state 3", {{"state", 3}}},
      {"kda", " state 0", {{"state", 0}}},
      {"kda", " state 1", {{"state", 1}}},
      {"kda", " stores 0", {{"prepare", 1}, {"stores", 0}}},
      {"kda", " state 0 pipeline 0", {{"state", 0}, {"pipeline", 0}}},
      {"gdn", "", {}},
      {"gdn", " state 3", {{"state", 3}}},
      {"gdn", " stores 0", {{"stores", 0}}},
      {"gdn", " state 0", {{"state", 0}}},
      {"gdn", " state 1", {{"state", 1}}},
      {"gdn", " solve 0", {{"pipeline", 1}, {"solve", 0}}},
      {"gdn", " state 0 pipeline 0 solve 0", {{"state", 0}, {"pipeline", 0}, {"solve", 0}}}};
  for_each_exact_shape(
      variants, [&](int64_t t, const std::vector<int32_t>& cu, const std::string& stem,
                    const std::string& what, const Variant& variant) {
        try {
          LinearStep step(variant.rule, t, cu, variant.knobs);
          const Stats s = device_time(o, step.raw(), t > 8192 ? 5 : 20, [&] { step.forward(); });
          std::printf("csv,linear_exact,%s,%.4f\n", what.c_str(), s.median_ns * 1e-6);
          compare_with_peer(report, peers, what + " fwd vs fla", s, "fla", stem + "_fwd", 1.0 / 1.5,
                            "[" + step.plan_name() + "]");
        } catch (const std::exception& ex) {
          report.note(what + ": eagle did not run: " + ex.what());
        }
      });
}

// fla's backward alone at `shape` (fla_<rule>_<shape>_fwdbwd - _fwd, one fla run), or none
// with the reason.
std::optional<Stats> fla_backward(const Peers& peers, const std::string& stem, std::string& why) {
  const std::optional<Stats> both = peers.find(stem + "_fwdbwd", why);
  if (!both) return std::nullopt;
  const std::optional<Stats> fwd = peers.find(stem + "_fwd", why);
  if (!fwd) return std::nullopt;
  return Stats{both->median_ns - fwd->median_ns, both->min_ns - fwd->min_ns};
}

void backward_shapes(const Options& o, Report& report, const Peers& peers) {
  report.section(
      "14c. linear attention backward, exact shapes (bf16, H=32, K=V=128, zipf lengths)");
  // The leading plans, and with the split state rows: the recompute's (state = 3), the dstate
  // launch's too (dstate = 3).
  const std::vector<Variant> variants = {
      {"kda", "", {}},
      {"kda", " state 3", {{"state", 3}}},
      {"kda", " state 3 dstate 3", {{"state", 3}, {"dstate", 3}}},
      {"gdn", "", {}},
      {"gdn", " state 3 dstate 3", {{"state", 3}, {"dstate", 3}}}};
  // The leading forward's time per rule and shape (fla's stem), timed once for its variants.
  std::map<std::string, Stats> forwards;
  for_each_exact_shape(variants, [&](int64_t t, const std::vector<int32_t>& cu,
                                     const std::string& stem, const std::string& what,
                                     const Variant& variant) {
    try {
      const int reps = t > 8192 ? 3 : 10;
      auto fwd_at = forwards.find(stem);
      if (fwd_at == forwards.end()) {
        LinearStep fwd(variant.rule, t, cu);
        fwd_at =
            forwards.emplace(stem, device_time(o, fwd.raw(), reps, [&] { fwd.forward(); })).first;
      }
      const Stats f = fwd_at->second;
      LinearStep bwd(variant.rule, t, cu, variant.knobs, true);
      const Stats b = device_time(o, bwd.raw(), reps, [&] { bwd.forward(); });
      const Stats both{f.median_ns + b.median_ns, f.min_ns + b.min_ns};
      std::printf("csv,linear_backward,%s,%.4f,%.4f\n", what.c_str(), b.median_ns * 1e-6,
                  both.median_ns * 1e-6);
      std::string why;
      if (const std::optional<Stats> peer = fla_backward(peers, stem, why))
        report.compare(what + " bwd vs fla", b, "fla", *peer, 1.0 / 1.5,
                       "[" + bwd.plan_name() + "]");
      else
        report.note(what + " bwd: eagle " + format_ns(b.median_ns) + "; no ratio: " + why);
      compare_with_peer(report, peers, what + " fwd+bwd vs fla", both, "fla", stem + "_fwdbwd",
                        1.0 / 1.5);
    } catch (const std::exception& ex) {
      report.note(what + " bwd: eagle did not run: " + ex.what());
    }
  });
}

// fla's chunk_kda(use_graph=True) forward, captured for the capacity and for the exact batch
// (bench/peers/fla_linear.py --only overcapture), beside ours.
void fla_overcapture(Report& report, const Peers& peers, const std::string& sweep,
                     const std::string& x) {
  const std::string point = sweep + "_" + x;
  const std::string name = "fla_kda_fwd_overcapture_" + point;
  std::string why_w, why_x;
  const std::optional<Stats> worst = peers.find(name + "_worst", why_w);
  const std::optional<Stats> exact = peers.find(name + "_exact", why_x);
  if (worst && exact) {
    const double ratio = worst->median_ns / exact->median_ns;
    report.note("kda overcapture_" + point +
                " fla use_graph: worst / exact = " + std::to_string(ratio));
    std::printf("csv,linear_overcapture,%s,%s,fla kda,%.4f\n", sweep.c_str(), x.c_str(), ratio);
  } else {
    report.note("kda overcapture_" + point + " fla: " + (worst ? why_x : why_w));
  }
}

void overcapture(const Options& o, Report& report, const Peers& peers) {
  report.section(
      "14b. linear attention over-capture: the forward captured for the capacity vs for the "
      "exact batch (bf16, H=32, K=V=128); goal <= 1.10");
  struct Point {
    std::string sweep, x;  // sweep a, b or c; the x value (M or L)
    int64_t capacity, slots;
    std::vector<int64_t> lengths;
  };
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
  // Each also with the persistent schedule (knob schedule = 1), both graphs alike; and per stage
  // (2: the state launch alone persistent, 3: the chunk launches alone) at the points where a
  // whole-launch schedule missed (a M1, c M16, c M8) or lost at a full batch (b L16384).
  struct Variant {
    std::string rule, tag;
    plan::Knobs knobs;
    bool misses_only = false;
  };
  std::vector<Variant> variants;
  for (const char* rule : {"kda", "gdn"}) {
    variants.push_back({rule, "", {}});
    variants.push_back({rule, " persistent", {{"schedule", 1}}});
    variants.push_back({rule, " persistent state", {{"schedule", 2}}, true});
    variants.push_back({rule, " persistent chunks", {{"schedule", 3}}, true});
  }
  const std::set<std::string> misses = {"aM1", "bL16384", "cM16", "cM8"};
  for (const Variant& v : variants)
    for (const Point& p : points) {
      if (v.misses_only && !misses.count(p.sweep + p.x)) continue;
      const std::string& rule = v.rule;
      int64_t active = 0;
      for (int64_t l : p.lengths) active += l;
      const std::string what = rule + " overcapture_" + p.sweep + "_" + p.x + v.tag;
      try {
        LinearStep worst(rule, p.capacity, cu_seqlens(p.lengths, p.slots), v.knobs);
        LinearStep exact(rule, active,
                         cu_seqlens(p.lengths, static_cast<int64_t>(p.lengths.size())), v.knobs);
        worst.capture();
        exact.capture();
        const Stats w = device_time(o, worst.raw(), 5, [&] { worst.replay(); });
        const Stats x = device_time(o, exact.raw(), 5, [&] { exact.replay(); });
        report.compare(what + ": worst-case graph", w, "exact graph", x, 1.10);
        std::printf("csv,linear_overcapture,%s,%s,eagle %s%s,%.4f\n", p.sweep.c_str(), p.x.c_str(),
                    rule.c_str(), v.tag.c_str(), w.median_ns / x.median_ns);
        if (rule == "kda" && v.tag.empty()) fla_overcapture(report, peers, p.sweep, p.x);
      } catch (const std::exception& ex) {
        report.note(what + ": did not run: " + ex.what());
      }
    }
}

}  // namespace

void run_linear_sections(const Options& o, Report& report) {
  const Peers peers(o.peers);
  if (o.runs_part(14, 'a')) exact_shapes(o, report, peers);
  if (o.runs_part(14, 'b')) overcapture(o, report, peers);
  if (o.runs_part(14, 'c')) backward_shapes(o, report, peers);
}

}  // namespace eagle::bench
