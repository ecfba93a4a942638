// The built-in manifest: the only place an eagle engine comes into existence.
#include "eagle/engines/builtin.hpp"

#include <cmath>

#include "engines/analyzers.hpp"
#include "engines/cublaslt/cublaslt_engine.hpp"
#include "engines/cudnn/backend.hpp"
#include "engines/native/attention_engine.hpp"
#include "engines/native/embedding_engine.hpp"
#include "engines/native/fused_engine.hpp"
#include "engines/native/gdn_engine.hpp"
#include "engines/native/gemm_engine.hpp"
#include "engines/native/kda_bwd_engine.hpp"
#include "engines/native/kda_engine.hpp"
#include "engines/native/loss_engine.hpp"
#include "engines/native/normalization_engine.hpp"
#include "engines/native/pointwise_engine.hpp"
#include "engines/native/reduction_engine.hpp"
#include "engines/reference/reference_engine.hpp"

namespace eagle::engines {

namespace {

using plan::HeurMode;
using plan::PlanConfig;

// Pointwise ranking. Mode A: the native kernel at block 256 first (the size we launch with
// everywhere; no cell has been timed against the others yet, so they follow in domain order),
// then the reference. FALLBACK: block 128 (asks least of the device), then the reference.
// OPENSOURCE: A without the backend. Backend entries of a mode follow our entries of that mode.
// Which native engine leads: a single reduction node (unanchored, so it lands here) puts the
// reduction engine first; a single pointwise node the one-op kernels, then the fused engine;
// a graph of several nodes the fused engine (one launch instead of one per node). An engine
// that serves none of these graphs is not listed for it. Default, untimed.
// The native engines that lead for a pointwise-family graph, in order (see rank_pointwise).
std::vector<std::string> pointwise_leaders(const std::vector<std::string>& ops) {
  if (ops == std::vector<std::string>{"reduction"}) return {"native_reduction"};
  if (ops.size() == 1) return {"native_pointwise", "native_fused_pointwise"};
  return {"native_fused_pointwise"};
}

// One engine's entries for a mode: each block size of its domain (FALLBACK: 128 only), or its
// first knob point when it names no block.
void add_pointwise_entries(const plan::Engine& e, HeurMode mode, std::vector<PlanConfig>& out) {
  const plan::Capabilities& caps = e.capabilities();
  if (!caps.knobs.count("block")) {
    out.push_back({e.id(), caps.first_point(), mode, ""});
    return;
  }
  std::vector<int64_t> blocks = caps.knobs.at("block");
  if (mode == HeurMode::FALLBACK) blocks = {128};
  for (int64_t b : blocks) out.push_back({e.id(), {{"block", b}}, mode, ""});
}

std::vector<PlanConfig> rank_pointwise(const plan::RankInput& in) {
  const auto is_native = [](const plan::Engine* e) { return e->name().rfind("native_", 0) == 0; };
  std::vector<const plan::Engine*> order;
  for (const std::string& name : pointwise_leaders(in.facts->ops))
    for (const plan::Engine* e : in.offered)
      if (e->name() == name) order.push_back(e);
  for (const plan::Engine* e : in.offered)
    if (!is_native(e)) order.push_back(e);
  std::vector<PlanConfig> out;
  for (HeurMode mode : in.modes) {
    for (const plan::Engine* e : order)
      if (e->capabilities().mismatch(*in.facts, *in.device).empty())
        add_pointwise_entries(*e, mode, out);
    for (const PlanConfig& b : in.backend)
      if (b.mode == mode) out.push_back(b);
  }
  for (const PlanConfig& b : in.backend)
    if (!b.mode) out.push_back(b);  // the delegating entry leads nothing of ours
  plan::dedupe(out);
  return out;
}

// The structured families (normalization, embedding, loss). Per mode: the offered engines whose
// capabilities match, our native CUDA engine (slot name "native_...") first and the others in
// slot order behind it, then the backend's entries of that mode; the delegating entry last.
// Default, untimed: on a GPU the native engine is the only engine of ours that matches (the
// reference runs on the CPU), and no cell has been timed against a backend yet.
std::vector<PlanConfig> rank_native_first(const plan::RankInput& in) {
  std::vector<const plan::Engine*> order;
  for (const plan::Engine* e : in.offered)
    if (e->name().rfind("native_", 0) == 0) order.push_back(e);
  for (const plan::Engine* e : in.offered)
    if (e->name().rfind("native_", 0) != 0) order.push_back(e);
  std::vector<PlanConfig> out;
  for (HeurMode mode : in.modes) {
    for (const plan::Engine* e : order)
      if (e->capabilities().mismatch(*in.facts, *in.device).empty())
        out.push_back({e->id(), e->capabilities().first_point(), mode, ""});
    for (const PlanConfig& b : in.backend)
      if (b.mode == mode) out.push_back(b);
  }
  for (const PlanConfig& b : in.backend)
    if (!b.mode) out.push_back(b);
  plan::dedupe(out);
  return out;
}

// Gemm ranking: the GEMM engines (those naming an `algo` knob: cuBLASLt) ahead of the reference,
// since the reference runs on the CPU only and a GEMM engine serves a GPU graph. Rules:
// - A (and OPENSOURCE, which is A without the backend): cuBLASLt's heuristic entries 0..15 in the
//   order cuBLASLt ranks its own algorithms, with 32 MiB of workspace (room for its split-K and
//   stream-K algorithms; no smaller size was timed) and tf32 off (an f32 graph computes in f32
//   unless a caller pins tf32=1). Timed (H200, bf16, plan::autotune, bench/RESULTS.md
//   2026-12-03 session 3): entry 0 was within 1.1% of the fastest of entries 0-7 at 4096³,
//   8192³ and [8192,4096]x[4096,12288], so the heuristic's order stands; where a shape is hot,
//   plan::autotune measures instead.
//   sm_share 0: a GEMM with few output tiles (a weight gradient) is planned for three quarters
//   of the SMs (cublaslt::sm_count_target says why), every other for all of them.
// - FALLBACK: entry 0 with no workspace, the config that asks least of the device.
// - native_gemm (no knobs) first: it serves only a gelu or gelu_backward epilogue (which
//   cuBLASLt declines; cuDNN's fused matmul measured slower than cuBLASLt and a pointwise
//   kernel apart, session 23) and declines the rest.
// Backend entries of a mode follow ours; the delegating entry comes last.
std::vector<PlanConfig> rank_gemm(const plan::RankInput& in) {
  std::vector<PlanConfig> out;
  for (HeurMode mode : in.modes) {
    std::vector<PlanConfig> gemm, others;
    for (const plan::Engine* e : in.offered) {
      const plan::Capabilities& caps = e->capabilities();
      if (!caps.mismatch(*in.facts, *in.device).empty()) continue;
      if (e->name() == "native_gemm") {
        gemm.insert(gemm.begin(), {e->id(), caps.first_point(), mode, ""});
        continue;
      }
      if (!caps.knobs.count("algo")) {
        others.push_back({e->id(), caps.first_point(), mode, ""});
        continue;
      }
      const std::vector<int64_t> algos =
          mode == HeurMode::FALLBACK ? std::vector<int64_t>{0} : caps.knobs.at("algo");
      const int64_t workspace_mb = mode == HeurMode::FALLBACK ? 0 : 32;
      for (int64_t a : algos)
        gemm.push_back({e->id(),
                        {{"algo", a}, {"tf32", 0}, {"workspace_mb", workspace_mb}, {"sm_share", 0}},
                        mode,
                        ""});
    }
    out.insert(out.end(), gemm.begin(), gemm.end());
    out.insert(out.end(), others.begin(), others.end());
    for (const PlanConfig& b : in.backend)
      if (b.mode == mode) out.push_back(b);
  }
  for (const PlanConfig& b : in.backend)
    if (!b.mode) out.push_back(b);
  plan::dedupe(out);
  return out;
}

// The measured cells of the attention ranking: our native engine's time over cuDNN's (flat
// schedule; bf16, H = Hk = 32, D = 128, zipf lengths) at the grid ratio R of the shape
// (AttentionFacts::grid_ratio: what a max-seqlen kernel's rectangular grid launches over the
// flat capacity bound). bench section 13a, H200, 2026-12-03 session 4, final run
// (bench/RESULTS.md); the backward's cells are forward+backward times (ours includes our slower
// forward there). The cell nearest in R (same family and causal flag) decides.
struct AttentionCell {
  bool backward, causal;
  double grid_ratio;
  double native_over_cudnn;
};
constexpr AttentionCell kAttentionCells[] = {
    // T=16384 N=8 (R 7.6), T=4096 N=32 (R 16.3), T=16384 N=64 (R 42.9)
    {false, false, 7.6, 0.997}, {false, false, 16.3, 1.373}, {false, false, 42.9, 1.110},
    {false, true, 7.6, 1.036},  {false, true, 16.3, 1.449},  {false, true, 42.9, 1.184},
    {true, false, 7.6, 1.336},  {true, false, 16.3, 1.339},  {true, false, 42.9, 1.361},
    {true, true, 7.6, 0.854},   {true, true, 16.3, 1.103},   {true, true, 42.9, 0.939},
};
// Native leads only where it was measured at least 5% faster than cuDNN (beyond the run-to-run
// spread); cells of other head dims and dtypes are untimed and take the D = 128 bf16 cells.
constexpr double kNativeLeadsBelow = 0.95;

bool native_leads(const AttentionFacts& f) {
  const AttentionCell* best = nullptr;
  for (const AttentionCell& c : kAttentionCells)
    if (c.backward == f.backward && c.causal == f.causal &&
        (!best ||
         std::abs(c.grid_ratio - f.grid_ratio) < std::abs(best->grid_ratio - f.grid_ratio)))
      best = &c;
  return best && best->native_over_cudnn < kNativeLeadsBelow;
}

// Attention ranking (sdpa, sdpa_bwd).
// - THD (cu_seqlens): cuDNN's entries mode by mode in the order cuDNN ranked them and its
//   delegating entry, and our varlen engine with every point of its knobs (schedule 0 flat, 1
//   persistent; the backward's deterministic 0 before 1); ours first only where
//   native_leads() says the measurement favours it. Without cuDNN ours lead.
// - Dense: cuDNN's entries (ours declines dense).
// The reference (CPU, float64) serves where no GPU engine does. The delegating entry would
// build the same config as the first mode-A entry that builds, so it follows the concrete
// configs, and it is placed only beside entries of the backend's own.
std::vector<PlanConfig> rank_attention(const plan::RankInput& in) {
  const auto& facts = static_cast<const AttentionFacts&>(*in.facts);
  std::vector<PlanConfig> ours, backend, rest;
  for (const plan::Engine* e : in.offered) {
    const plan::Capabilities& caps = e->capabilities();
    if (!caps.mismatch(*in.facts, *in.device).empty()) continue;
    if (e->name().rfind("native_", 0) == 0) {
      if (!facts.packed) continue;  // ours serves THD only
      for (const plan::Knobs& k : caps.points()) ours.push_back({e->id(), k, in.modes.front(), ""});
    } else {
      rest.push_back({e->id(), caps.first_point(), in.modes.front(), ""});
    }
  }
  for (HeurMode mode : in.modes)
    for (const PlanConfig& b : in.backend)
      if (b.mode == mode) backend.push_back(b);
  if (!backend.empty())
    for (const PlanConfig& b : in.backend)
      if (!b.mode) backend.push_back(b);
  std::vector<PlanConfig> out;
  const std::vector<PlanConfig>* order[2] = {&ours, &backend};
  if (!facts.packed || !native_leads(facts)) std::swap(order[0], order[1]);
  for (const auto* part : order) out.insert(out.end(), part->begin(), part->end());
  out.insert(out.end(), rest.begin(), rest.end());
  plan::dedupe(out);
  return out;
}

plan::EngineSlot reference_slot() {
  return {"reference", &reference::make_reference_engine, false};
}

plan::ManifestSpec builtin_spec() {
  plan::ManifestSpec spec;
  spec.families = {
      {"pointwise",
       0,
       {},
       &analyze_pointwise,
       &rank_pointwise,
       {reference_slot(),
        {"native_pointwise", &native::make_pointwise_engine, false},
        {"native_reduction", &native::make_reduction_engine, false},
        {"native_fused_pointwise", &native::make_fused_engine, false}}},
      {"gemm",
       1,
       {"matmul"},
       nullptr,
       &rank_gemm,
       {reference_slot(),
        {"cublaslt", &cublaslt::make_cublaslt_engine, false},
        {"native_gemm", &native::make_gemm_engine, false}}},
      {"normalization",
       2,
       {"softmax", "layer_norm", "rms_norm", "softmax_bwd", "layer_norm_bwd", "rms_norm_bwd"},
       nullptr,
       &rank_native_first,
       {reference_slot(), {"native_normalization", &native::make_normalization_engine, false}}},
      {"embedding",
       3,
       {"embedding", "embedding_bwd"},
       nullptr,
       &rank_native_first,
       {reference_slot(), {"native_embedding", &native::make_embedding_engine, false}}},
      {"loss",
       4,
       {"cross_entropy", "cross_entropy_bwd", "count_not_equal"},
       nullptr,
       &rank_native_first,
       {reference_slot(), {"native_loss", &native::make_loss_engine, false}}},
      {"sdpa",
       5,
       {"sdpa"},
       &analyze_attention,
       &rank_attention,
       {reference_slot(), {"native_attention", &native::make_attention_engine, false}}},
      {"sdpa_bwd",
       6,
       {"sdpa_bwd"},
       &analyze_attention,
       &rank_attention,
       {reference_slot(), {"native_attention_bwd", &native::make_attention_bwd_engine, false}}},
      {"linear_attention",
       7,
       {"gdn", "kda", "gdn2"},
       &analyze_delta,
       &rank_native_first,
       {reference_slot(),
        {"native_gdn", &native::make_gdn_engine, false},
        {"native_kda", &native::make_kda_engine, false}}},
      {"linear_attention_bwd",
       8,
       {"gdn_bwd", "kda_bwd", "gdn2_bwd"},
       &analyze_delta,
       &rank_native_first,
       {reference_slot(), {"native_kda_bwd", &native::make_kda_bwd_engine, false}}},
      {"composite", 9, {}, nullptr, nullptr, {reference_slot()}},
  };
  spec.unanchored_family = "pointwise";
  spec.mixed_family = "composite";
  spec.backend = cudnn::make_backend();
  return spec;
}

}  // namespace

const plan::Manifest& builtin_manifest() {
  static const plan::Manifest manifest(builtin_spec());
  return manifest;
}

plan::ExecutionPlans create_execution_plans(const op::Graph& graph, Device device,
                                            const std::vector<plan::HeurMode>& modes) {
  return plan::ExecutionPlans::create(graph, builtin_manifest(), device, modes);
}

plan::ExecutionPlans create_execution_plan(const op::Graph& graph, Device device, int64_t engine_id,
                                           const plan::Knobs& knobs) {
  return plan::ExecutionPlans::create_for(graph, builtin_manifest(), device, engine_id, knobs);
}

}  // namespace eagle::engines
