// Section 11: the native structured engines at training sizes. Each op is planned for cuda:0
// through the built-in manifest (the native engine leads its family's list), run on inputs
// drawn on the device, and timed with CUDA events (median of batches). Reported: time per call,
// the fewest bytes the op must move (each input read once, each output written once; the
// gathered rows for an embedding lookup), the achieved bandwidth, and that against 4.3 TB/s
// (the H200 copy rate measured before) and against a device-to-device copy timed in this run.
// Then eagle / torch for each case bench/peers/torch_ops.py timed in the same device call
// (--peers FILE; goal <= 1). CUDA builds only.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "bench_common.hpp"
#include "bench_cuda.hpp"
#include "bench_kernels.hpp"
#include "eagle/engines/builtin.hpp"

namespace eagle::bench {
namespace {

constexpr double kCopyTbps = 4.3;  // the H200's measured copy rate (bytes read + written)
constexpr double kGoal = 0.75;     // issue 9: achieved bandwidth >= 75% of the copy rate

int fill_kind(DType d) {
  switch (d) {
    case DType::f32:
      return 0;
    case DType::f16:
      return 1;
    case DType::bf16:
      return 2;
    case DType::i32:
      return 3;
    case DType::u8:
      return 5;
    default:
      return 4;
  }
}

// NaN or infinity among the first elements of a floating output (read back raw: no host copy
// of gigabytes).
bool sample_finite(const Array& a) {
  const int64_t n = std::min<int64_t>(a.numel(), 4096);
  const std::size_t size = itemsize(a.dtype());
  std::vector<unsigned char> bytes(static_cast<std::size_t>(n) * size);
  EAGLE_CUDA_CHECK(cudaMemcpy(bytes.data(), a.data(), bytes.size(), cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < n; ++i) {
    const unsigned char* p = bytes.data() + i * static_cast<int64_t>(size);
    if (a.dtype() == DType::f32) {
      float f;
      std::memcpy(&f, p, 4);
      if (!std::isfinite(f)) return false;
    } else if (a.dtype() == DType::f16 || a.dtype() == DType::bf16) {
      uint16_t b;
      std::memcpy(&b, p, 2);
      const uint16_t exp = a.dtype() == DType::f16 ? 0x7c00 : 0x7f80;
      if ((b & exp) == exp) return false;
    }
  }
  return true;
}

struct Range {
  double lo = -1, hi = 1;
};

struct Case {
  std::string what;
  op::Graph graph;
  std::map<std::string, Range> ranges;  // by tensor name; [-1, 1) otherwise
  // Bytes the op must move, when not every operand in full (an embedding's table).
  std::function<double(const op::Graph&)> bytes;
  std::string peer;  // the torch case (bench/peers/torch_ops.py) timed against, or none
  // A second graph run after the first in each timed call (a forward then its backward): its
  // operands named like one of the first graph's share that array.
  std::optional<op::Graph> then;
};

int64_t count(const op::Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

double operand_bytes(const op::Graph& g) {
  double b = 0;
  for (const op::Tensor& t : g.operand_tensors()) {
    double n = static_cast<double>(itemsize(t.dtype()));
    for (int64_t d : t.dims()) n *= static_cast<double>(d);
    b += n;
  }
  return b;
}

// Times `issue` (one call) with events on `stream`: nanoseconds per call over batches.
Stats time_calls(const Options& o, cudaStream_t stream, const std::function<void()>& issue) {
  cudaEvent_t start, stop;
  EAGLE_CUDA_CHECK(cudaEventCreate(&start));
  EAGLE_CUDA_CHECK(cudaEventCreate(&stop));
  const int reps = o.quick ? 5 : 20;
  const Stats s = measure(o.warmup(), o.batches(), {[&] {
                            EAGLE_CUDA_CHECK(cudaEventRecord(start, stream));
                            for (int i = 0; i < reps; ++i) issue();
                            EAGLE_CUDA_CHECK(cudaEventRecord(stop, stream));
                            EAGLE_CUDA_CHECK(cudaEventSynchronize(stop));
                            float ms = 0;
                            EAGLE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
                            return 1e6 * ms / reps;
                          }})[0];
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return s;
}

std::string tbps(double bytes, double ns) {
  char b[64];
  std::snprintf(b, sizeof b, "%.2f TB/s", bytes / ns / 1e3);
  return b;
}

// A graph planned for the device with its operands on it: inputs drawn, outputs kept to check.
struct Planned {
  plan::ExecutionPlans plans;
  int chosen;
  std::vector<Array> keep, outputs;
  std::unique_ptr<plan::VariantPack> pack;
  Array ws;
  plan::ExecutionContext ctx;
};

Planned plan_case(const Case& c, op::Graph graph, Device dev, cudaStream_t stream,
                  std::map<std::string, Array>& by_name, uint64_t& seed) {
  Planned p{engines::create_execution_plans(graph, dev), 0, {}, {}, nullptr, Array(), {}};
  p.chosen = p.plans.build_plans();
  p.pack = std::make_unique<plan::VariantPack>(p.plans.layout());
  for (const op::Tensor& t : graph.operand_tensors()) {
    const bool shared = by_name.count(t.name()) > 0;
    const Array a = shared ? by_name.at(t.name()) : Array::empty(t.dims(), t.dtype(), dev);
    p.keep.push_back(a);
    p.pack->set(t, plan::Operand(a));
    if (t.producer() >= 0) p.outputs.push_back(a);
    if (shared) continue;
    by_name.emplace(t.name(), a);
    if (t.producer() >= 0) continue;
    const Range r = c.ranges.count(t.name()) ? c.ranges.at(t.name()) : Range{};
    EAGLE_CUDA_CHECK(raw_fill_uniform(a.data(), fill_kind(t.dtype()), count(t.dims()), r.lo, r.hi,
                                      seed++, stream));
  }
  const std::size_t ws_bytes = p.plans.workspace_size();
  if (ws_bytes) p.ws = Array::empty({static_cast<int64_t>(ws_bytes)}, DType::u8, dev);
  p.ctx = {stream, nullptr, ws_bytes ? p.ws.data() : nullptr, ws_bytes, nullptr};
  return p;
}

void run_case(const Options& o, Report& report, const Peers& peers, Case c, Device dev,
              cudaStream_t stream, double copy_tbps) {
  double bytes = c.bytes ? c.bytes(c.graph) : operand_bytes(c.graph);
  if (c.then) bytes += operand_bytes(*c.then);
  std::map<std::string, Array> by_name;
  uint64_t seed = 1;
  std::vector<Planned> steps;
  steps.push_back(plan_case(c, c.graph, dev, stream, by_name, seed));
  if (c.then) steps.push_back(plan_case(c, *c.then, dev, stream, by_name, seed));
  const auto issue = [&] {
    for (const Planned& p : steps) p.plans.execute(*p.pack, p.ctx);
  };
  issue();
  EAGLE_CUDA_CHECK(cudaStreamSynchronize(stream));
  bool finite = true;
  for (const Planned& p : steps)
    for (const Array& a : p.outputs) finite = finite && sample_finite(a);
  const Stats s = time_calls(o, stream, issue);
  const double frac = bytes / s.median_ns / 1e3 / kCopyTbps;
  std::string engine = steps[0].plans.name_at(steps[0].chosen);
  if (c.then) engine += " + " + steps[1].plans.name_at(steps[1].chosen);
  char line[256];
  std::snprintf(line, sizeof line, "%s  %.3f ms  %.3f GB  %s = %.0f%% of %.1f, %.0f%% of copy",
                engine.c_str(), s.median_ns / 1e6, bytes / 1e9, tbps(bytes, s.median_ns).c_str(),
                100 * frac, kCopyTbps, 100 * bytes / s.median_ns / 1e3 / copy_tbps);
  report.check(c.what, finite && frac >= kGoal,
               std::string(line) + (finite ? "" : "  (NaN in the output sample)"));
  // Issue 9's goal against torch: eagle at least as fast (ratio eagle / torch <= 1).
  if (!c.peer.empty())
    compare_with_peer(report, peers, c.what + " vs torch", s, "torch", c.peer, 1.0);
}

op::Graph one(const std::string& name, const std::string& op,
              const std::vector<std::pair<std::string, op::TensorSpec>>& inputs,
              const op::Attrs& attrs) {
  op::Graph g(name);
  op::Ports ports;
  for (const auto& [port, spec] : inputs) ports.emplace_back(port, g.tensor(spec));
  for (auto& [port, t] : g.op(op, ports, attrs)) t.set_output(true).set_name(port);
  return g;
}

Case make(std::string what, op::Graph graph, std::map<std::string, Range> ranges = {},
          std::string peer = "") {
  Case c{std::move(what), std::move(graph), std::move(ranges), {}, std::move(peer), {}};
  return c;
}

// The cases, each named after its torch peer where bench/peers/torch_ops.py times one (same
// shapes, dtypes and options; rms_norm with a scale only, as torch's fused rms_norm has none).
std::vector<Case> cases() {
  const DType bf = DType::bf16, f32 = DType::f32;
  constexpr int64_t kRows = 16384, kDim = 4096;
  const op::Dims x = {kRows, kDim}, lead = {kRows}, trail = {kDim};
  const std::string tag = "bf16_16384x4096";
  const Range stats{0.5, 2.0};
  std::vector<Case> c;
  for (DType d : {bf, f32}) {
    const std::string dt(dtype_name(d));
    const bool peer = d == bf;
    c.push_back(make("softmax " + dt + " [16384, 4096]",
                     one("softmax", "softmax", {{"x", {"x", x, d}}}, {}), {},
                     peer ? "softmax_fwd_" + tag : ""));
    c.push_back(
        make("softmax_bwd " + dt + " [16384, 4096]",
             one("softmax_bwd", "softmax_bwd", {{"y", {"y", x, d}}, {"dy", {"dy", x, d}}}, {}),
             {{"y", {0.001, 0.01}}}, peer ? "softmax_bwd_" + tag : ""));
  }
  c.push_back(make("log_softmax bf16 [16384, 4096]",
                   one("log_softmax", "softmax", {{"x", {"x", x, bf}}}, {{"log", true}}), {},
                   "log_softmax_fwd_" + tag));
  c.push_back(make(
      "layer_norm bf16 [16384, 4096] training, scale+bias",
      one("layer_norm", "layer_norm",
          {{"x", {"x", x, bf}}, {"scale", {"scale", trail, bf}}, {"bias", {"bias", trail, bf}}},
          {{"training", true}}),
      {}, "layer_norm_fwd_" + tag));
  c.push_back(
      make("rms_norm bf16 [16384, 4096] training, scale",
           one("rms_norm", "rms_norm", {{"x", {"x", x, bf}}, {"scale", {"scale", trail, bf}}},
               {{"training", true}}),
           {}, "rms_norm_fwd_" + tag));
  c.push_back(make("layer_norm_bwd bf16 [16384, 4096] dscale+dbias",
                   one("layer_norm_bwd", "layer_norm_bwd",
                       {{"dy", {"dy", x, bf}},
                        {"x", {"x", x, bf}},
                        {"mean", {"mean", lead, f32}},
                        {"inv_variance", {"inv_variance", lead, f32}},
                        {"scale", {"scale", trail, bf}}},
                       {{"bias_grad", true}}),
                   {{"inv_variance", stats}}, "layer_norm_bwd_" + tag));
  c.push_back(make("rms_norm_bwd bf16 [16384, 4096] dscale",
                   one("rms_norm_bwd", "rms_norm_bwd",
                       {{"dy", {"dy", x, bf}},
                        {"x", {"x", x, bf}},
                        {"inv_rms", {"inv_rms", lead, f32}},
                        {"scale", {"scale", trail, bf}}},
                       {}),
                   {{"inv_rms", stats}}, "rms_norm_bwd_" + tag));
  for (const auto& [rows, classes] : {std::pair<int64_t, int64_t>{16384, 32768}, {4096, 128256}}) {
    const std::string shape = "[" + std::to_string(rows) + ", " + std::to_string(classes) + "]";
    const std::string ce_tag = "bf16_" + std::to_string(rows) + "x" + std::to_string(classes);
    const Range targets{0, static_cast<double>(classes)};
    const auto forward = [&] {
      return one("cross_entropy", "cross_entropy",
                 {{"logits", {"logits", {rows, classes}, bf}},
                  {"targets", {"targets", {rows}, DType::i64}}},
                 {{"output_lse", true}});
    };
    c.push_back(make("cross_entropy bf16 " + shape + " mean, lse", forward(),
                     {{"logits", {-4, 4}}, {"targets", targets}}, "cross_entropy_fwd_" + ce_tag));
    const double lse = std::log(static_cast<double>(classes)) + 4;
    const auto backward = [&] {
      return one("cross_entropy_bwd", "cross_entropy_bwd",
                 {{"logits", {"logits", {rows, classes}, bf}},
                  {"targets", {"targets", {rows}, DType::i64}},
                  {"dloss", {"dloss", {}, f32}},
                  {"lse", {"lse", {rows}, f32}}},
                 {});
    };
    c.push_back(make("cross_entropy_bwd bf16 " + shape + " mean, lse", backward(),
                     {{"logits", {-4, 4}}, {"targets", targets}, {"lse", {lse, lse + 1}}}));
    // The forward then the backward from its lse (torch's forward + backward).
    Case pair =
        make("cross_entropy fwd+bwd bf16 " + shape, forward(),
             {{"logits", {-4, 4}}, {"targets", targets}}, "cross_entropy_fwd_bwd_" + ce_tag);
    pair.then = backward();
    c.push_back(std::move(pair));
  }
  for (int64_t vocab : {int64_t{32768}, int64_t{131072}}) {
    const std::string shape = "V " + std::to_string(vocab) + ", D 4096, 16384 ids";
    const std::string e_tag = "bf16_" + std::to_string(vocab) + "x4096_16384";
    const Range ids{0, static_cast<double>(vocab)};
    Case fwd = make(
        "embedding bf16 " + shape,
        one("embedding", "embedding",
            {{"table", {"table", {vocab, kDim}, bf}}, {"ids", {"ids", {kRows}, DType::i64}}}, {}),
        {{"ids", ids}}, "embedding_fwd_" + e_tag);
    fwd.bytes = [](const op::Graph& g) {  // ids read, the gathered rows read, y written
      const op::Tensor y = g.nodes()[0].output("y");
      return 2.0 * static_cast<double>(y.dims()[0] * y.dims()[1]) * 2 + 8.0 * y.dims()[0];
    };
    c.push_back(std::move(fwd));
    c.push_back(make("embedding_bwd bf16 " + shape,
                     one("embedding_bwd", "embedding_bwd",
                         {{"dy", {"dy", {kRows, kDim}, bf}}, {"ids", {"ids", {kRows}, DType::i64}}},
                         {{"num_embeddings", vocab}}),
                     {{"ids", ids}}, "embedding_bwd_" + e_tag));
  }
  // Hot ids: 16384 positions over 8 ids of a 4096-row table (about 2048 each), as byte-level
  // text's frequent characters: a segment's sum must not serialize on one warp.
  c.push_back(make("embedding_bwd bf16 V 4096, D 4096, 16384 ids among 8 (hot)",
                   one("embedding_bwd", "embedding_bwd",
                       {{"dy", {"dy", {kRows, kDim}, bf}}, {"ids", {"ids", {kRows}, DType::i64}}},
                       {{"num_embeddings", int64_t{4096}}}),
                   {{"ids", {0, 8}}}, "embedding_bwd_hot_bf16_4096x4096_16384"));
  // The fused pointwise engine on the training job's shapes ([T 4096, MLP width 16384], f32
  // activations): a cast before a bf16 matmul, the active-row mask, a silu gate.
  {
    const op::Dims h = {4096, 16384};
    op::Graph cast("cast");
    cast.pointwise("cast", cast.tensor({"x", h, f32}), {{"dtype", bf}})
        .set_output(true)
        .set_name("y");
    c.push_back(make("fused cast f32 -> bf16 [4096, 16384]", std::move(cast)));
    op::Graph mask("mask");
    mask.where(mask.tensor({"active", {4096, 1}, DType::u8}), mask.tensor({"x", h, f32}),
               mask.tensor({"zero", {1}, f32}))
        .set_output(true)
        .set_name("y");
    c.push_back(make("fused where(active [T, 1] u8, x, 0) f32 [4096, 16384]", std::move(mask),
                     {{"active", {0, 2}}}));
    op::Graph gate("gate");
    const op::Tensor x = gate.tensor({"x", h, f32}), u = gate.tensor({"u", h, f32});
    gate.pointwise("cast", gate.pointwise("mul", gate.pointwise("silu", x), u), {{"dtype", bf}})
        .set_output(true)
        .set_name("y");
    c.push_back(make("fused cast(silu(x) * u, bf16) f32 [4096, 16384]", std::move(gate)));
  }
  c.push_back(make("reduction sum bf16 [16384, 4096] last axis",
                   one("reduce_rows", "reduction", {{"x", {"x", x, bf}}},
                       {{"mode", "sum"}, {"axes", std::vector<int64_t>{-1}}}),
                   {}, "reduction_sum_rows_" + tag));
  c.push_back(make("reduction sum bf16 [16384, 4096] all axes",
                   one("reduce_all", "reduction", {{"x", {"x", x, bf}}}, {{"mode", "sum"}}), {},
                   "reduction_sum_all_" + tag));
  c.push_back(make("reduction max f32 [16384, 4096] axis 0",
                   one("reduce_cols", "reduction", {{"x", {"x", x, f32}}},
                       {{"mode", "max"}, {"axes", std::vector<int64_t>{0}}}),
                   {}, "reduction_max_cols_f32_16384x4096"));
  return c;
}

}  // namespace

void run_structured_sections(const Options& o, Report& report) {
  if (cuda_device_count() == 0) {
    // Nothing to time; the section's graphs still plan and build for an H200 descriptor.
    report.section("11. native structured engines: not timed, no CUDA device; planned for an H200");
    DeviceProperties h200;
    h200.device = "cuda:0";
    h200.name = "H200 (descriptor)";
    h200.sm = 90;
    h200.multiprocessors = 132;
    for (Case& c : cases()) {
      std::string line = c.what + ":";
      for (op::Graph* g : {&c.graph, c.then ? &*c.then : nullptr}) {
        if (!g) continue;
        plan::ExecutionPlans plans =
            plan::ExecutionPlans::create(*g, engines::builtin_manifest(), h200);
        const int chosen = plans.build_plans();
        line += " " + plans.name_at(chosen) + ", workspace " +
                std::to_string(plans.workspace_size()) + " bytes;";
      }
      report.note(line + (c.peer.empty() ? "" : " torch peer " + c.peer));
    }
    return;
  }
  report.section(
      "11. GPU: native structured engines at training sizes: time per call (CUDA events), the "
      "fewest bytes the op moves, achieved bandwidth against 4.3 TB/s (goal >= 75%) and against "
      "a device-to-device copy timed here");
  const Device dev = Device::cuda(0);
  RawStream stream;
  // The copy peer: 1 GiB device to device (2 GiB moved).
  constexpr int64_t kCopy = int64_t{1} << 30;
  const Array src = Array::empty({kCopy}, DType::u8, dev),
              dst = Array::empty({kCopy}, DType::u8, dev);
  EAGLE_CUDA_CHECK(raw_fill_uniform(src.data(), 3, kCopy / 4, -1e6, 1e6, 99, stream.get()));
  const Stats copy = time_calls(o, stream.get(), [&] {
    EAGLE_CUDA_CHECK(
        cudaMemcpyAsync(dst.data(), src.data(), kCopy, cudaMemcpyDeviceToDevice, stream.get()));
  });
  const double copy_tbps = 2.0 * kCopy / copy.median_ns / 1e3;
  report.note("device-to-device copy of 1 GiB: " + format_ns(copy.median_ns) + ", " +
              tbps(2.0 * kCopy, copy.median_ns) + " (read + written)");
  const Peers peers(o.peers);
  for (Case& c : cases()) run_case(o, report, peers, std::move(c), dev, stream.get(), copy_tbps);
}

}  // namespace eagle::bench
