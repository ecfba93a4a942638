// Captured ops: attention and linear attention, each with an explicit schema (positional port
// order, conditional outputs) and a shape rule for the token-packed (THD) layout.
#include <cmath>
#include <utility>

#include "eagle/core/error.hpp"
#include "op/tables.hpp"

namespace eagle::op::detail {

namespace {

using When = OutputPort::When;
constexpr DTypeClass kFloat = DTypeClass::floating;
constexpr DTypeClass kInt = DTypeClass::integer;

// Number of sequences described by a cumulative-lengths port [B+1].
int64_t sequences(const InferContext& ctx, const std::string& port) {
  const Dims& d = ctx.in(port).dims;
  if (d.size() != 1 || d[0] < 1) ctx.fail(port, "expected [B+1] cumulative sequence lengths");
  return d[0] - 1;
}

// Written so that NaN fails too; infinity is refused with every non-finite real attribute.
void check_scale(const InferContext& ctx) {
  if (!ctx.attrs.count("scale")) return;
  const double scale = ctx.attr("scale").as_real(ctx.op + ": attribute scale");
  if (!(scale > 0 && std::isfinite(scale)))
    ctx.fail("q", "attribute scale must be > 0 and finite, got " + ctx.attr("scale").to_json());
}

// max_seqlen_q / max_seqlen_kv: FlashAttention's bound on every sequence's rows (0: none, the
// capacity). Only the THD form has sequences of their own length.
void check_max_seqlens(const InferContext& ctx, bool packed) {
  for (const auto& [attr, port] :
       {std::pair{"max_seqlen_q", "cu_seqlens_q"}, std::pair{"max_seqlen_kv", "cu_seqlens_kv"}}) {
    const int64_t v = ctx.attr(attr).as_int(ctx.op + ": attribute " + attr);
    if (v < 0)
      ctx.fail(port, std::string("attribute ") + attr + " must be >= 0, got " + std::to_string(v));
    if (v > 0 && !packed)
      ctx.fail("q", std::string("attribute ") + attr +
                        " bounds THD sequences (with cu_seqlens); the dense form's are all S long");
  }
}

// q [Tq, H, D] with cu_seqlens (THD) or [B, S, H, D] without (dense). k, v alike with Hk heads,
// H % Hk == 0 (grouped queries).
struct SdpaDims {
  bool packed;
  int64_t h, hk, d, dv;
};
SdpaDims sdpa_dims(const InferContext& ctx) {
  const bool packed = ctx.has("cu_seqlens_q") || ctx.has("cu_seqlens_kv");
  const std::size_t rank = packed ? 3 : 4;
  const std::string layout = packed ? "[T, heads, dim] (THD, with cu_seqlens)"
                                    : "[B, S, heads, dim] (dense, without cu_seqlens)";
  for (const char* p : {"q", "k", "v"}) ctx.expect_rank(p, rank, layout);
  if (packed) {
    if (!ctx.has("cu_seqlens_q") || !ctx.has("cu_seqlens_kv"))
      ctx.fail(ctx.has("cu_seqlens_q") ? "cu_seqlens_q" : "cu_seqlens_kv",
               "cu_seqlens_q and cu_seqlens_kv go together");
    if (sequences(ctx, "cu_seqlens_q") != sequences(ctx, "cu_seqlens_kv"))
      ctx.fail("cu_seqlens_kv", "must describe as many sequences as cu_seqlens_q");
  }
  const Dims& q = ctx.in("q").dims;
  const Dims& k = ctx.in("k").dims;
  const Dims& v = ctx.in("v").dims;
  SdpaDims s{packed, q[rank - 2], k[rank - 2], q[rank - 1], v[rank - 1]};
  if (k[rank - 1] != s.d) ctx.fail("k", "head dim must equal q's " + std::to_string(s.d));
  if (v[rank - 2] != s.hk) ctx.fail("v", "heads must equal k's " + std::to_string(s.hk));
  for (std::size_t i = 0; i + 2 < rank; ++i)
    if (v[i] != k[i]) ctx.fail("v", "leading dims must equal k's " + dims_str(k));
  if (!packed && k[0] != q[0]) ctx.fail("k", "batch must equal q's " + std::to_string(q[0]));
  if (s.hk < 1 || s.h % s.hk != 0)
    ctx.fail("k", "heads must divide q's heads " + std::to_string(s.h) + " (grouped queries)");
  check_scale(ctx);
  check_max_seqlens(ctx, packed);
  return s;
}

Dims with_last(Dims d, int64_t last) {
  d.back() = last;
  return d;
}

void infer_sdpa(InferContext& ctx) {
  const SdpaDims s = sdpa_dims(ctx);
  const Dims& q = ctx.in("q").dims;
  ctx.outputs["o"] = {with_last(q, s.dv), ctx.in("q").dtype};
  ctx.outputs["stats"] = {Dims(q.begin(), q.end() - 1), DType::f32};
}

void infer_sdpa_bwd(InferContext& ctx) {
  const SdpaDims s = sdpa_dims(ctx);
  const Dims& q = ctx.in("q").dims;
  ctx.expect_dims("o", with_last(q, s.dv), "q's dims with v's head dim");
  ctx.expect_dims("d_o", with_last(q, s.dv), "o's dims");
  ctx.expect_dims("stats", Dims(q.begin(), q.end() - 1), "q's dims without the head dim");
  for (const char* p : {"q", "k", "v"}) ctx.outputs[std::string("d") + p] = ctx.in(p);
}

// Linear attention: q, k [T, H, K], v [T, HV, V], HV % H == 0; gates per rule. gdn and kda
// erase and write with one beta per token and head; gdn2 erases with b per key channel and
// writes with w per value channel (fla's chunk_gdn2 names).
enum class Rule : uint8_t { gdn, kda, gdn2 };

// gdn's safe_gate: when set, a_log and dt_bias [HV] are required, else they must be absent.
bool check_safe_gate(InferContext& ctx, int64_t hv) {
  const bool safe_gate = ctx.attr("safe_gate").as_bool("gdn: attribute safe_gate");
  for (const char* p : {"a_log", "dt_bias"}) {
    if (safe_gate && !ctx.has(p)) ctx.fail(p, "is required when safe_gate is set");
    if (!safe_gate && ctx.has(p)) ctx.fail(p, "is only read when safe_gate is set");
    if (ctx.has(p)) ctx.expect_dims(p, {hv}, "[HV]");
  }
  return safe_gate;
}

template <Rule R, bool Backward>
void infer_delta(InferContext& ctx) {
  ctx.expect_rank("q", 3, "[T, H, K]");
  ctx.expect_rank("v", 3, "[T, HV, V]");
  const Dims& q = ctx.in("q").dims;
  const int64_t t = q[0], h = q[1], k = q[2];
  const int64_t hv = ctx.in("v").dims[1], v = ctx.in("v").dims[2];
  ctx.expect_dims("k", q, "q's dims [T, H, K]");
  if (ctx.in("v").dims[0] != t) ctx.fail("v", "tokens must equal q's " + std::to_string(t));
  if (h < 1 || hv % h != 0) ctx.fail("v", "heads must be a multiple of q's " + std::to_string(h));
  const Dims per_token = R == Rule::gdn ? Dims{t, hv} : Dims{t, hv, k};
  ctx.expect_dims("g", per_token, R == Rule::gdn ? "[T, HV]" : "[T, HV, K]");
  if constexpr (R == Rule::gdn2) {
    ctx.expect_dims("b", {t, hv, k}, "[T, HV, K]");
    ctx.expect_dims("w", {t, hv, v}, "[T, HV, V]");
  } else {
    ctx.expect_dims("beta", {t, hv}, "[T, HV]");
  }
  const int64_t b = sequences(ctx, "cu_seqlens");
  const Dims state = {b, hv, k, v};
  if (ctx.has("initial_state")) ctx.expect_dims("initial_state", state, "[B, HV, K, V]");
  const bool safe_gate = R == Rule::gdn && check_safe_gate(ctx, hv);
  check_scale(ctx);
  const DType state_dtype = ctx.has("initial_state") ? ctx.in("initial_state").dtype : DType::f32;
  if constexpr (!Backward) {
    ctx.outputs["o"] = {{t, hv, v}, ctx.in("v").dtype};
    ctx.outputs["final_state"] = {state, state_dtype};
  } else {
    ctx.expect_dims("d_o", {t, hv, v}, "[T, HV, V]");
    if (ctx.has("d_final_state")) ctx.expect_dims("d_final_state", state, "[B, HV, K, V]");
    for (const char* p : {"q", "k", "v", "g"}) ctx.outputs[std::string("d") + p] = ctx.in(p);
    ctx.outputs["dg"].dtype = DType::f32;
    if constexpr (R == Rule::gdn2) {
      ctx.outputs["db"] = ctx.in("b");
      ctx.outputs["dw"] = ctx.in("w");
    } else {
      ctx.outputs["dbeta"] = ctx.in("beta");
    }
    if (ctx.has("initial_state")) ctx.outputs["d_initial_state"] = {state, DType::f32};
    if (safe_gate) {
      ctx.outputs["d_a_log"] = {{hv}, DType::f32};
      ctx.outputs["d_dt_bias"] = {{hv}, DType::f32};
    }
  }
}

std::vector<InputPort> delta_inputs(Rule r, bool backward) {
  std::vector<InputPort> in = {
      {"q", true, kFloat}, {"k", true, kFloat}, {"v", true, kFloat}, {"g", true, kFloat}};
  if (r == Rule::gdn2) {
    in.push_back({"b", true, kFloat});
    in.push_back({"w", true, kFloat});
  } else {
    in.push_back({"beta", true, kFloat});
  }
  in.push_back({"cu_seqlens", true, kInt});
  in.push_back({"initial_state", false, kFloat});
  if (r == Rule::gdn) {
    in.push_back({"a_log", false, kFloat});
    in.push_back({"dt_bias", false, kFloat});
  }
  if (backward) {
    in.push_back({"d_o", true, kFloat});
    in.push_back({"d_final_state", false, kFloat});
  }
  return in;
}

std::vector<OutputPort> delta_outputs(Rule r, bool backward) {
  if (!backward) return {{"o"}, {"final_state", When::attr_true, "output_final_state"}};
  std::vector<OutputPort> out = {{"dq"}, {"dk"}, {"dv"}, {"dg"}};
  if (r == Rule::gdn2) {
    out.push_back({"db"});
    out.push_back({"dw"});
  } else {
    out.push_back({"dbeta"});
  }
  out.push_back({"d_initial_state", When::input_wired, "initial_state"});
  if (r == Rule::gdn) {
    out.push_back({"d_a_log", When::attr_true, "safe_gate"});
    out.push_back({"d_dt_bias", When::attr_true, "safe_gate"});
  }
  return out;
}

std::vector<AttrSpec> delta_attrs(Rule r, bool backward) {
  std::vector<AttrSpec> a = {{"scale", AttrType::real, std::nullopt},
                             {"use_qk_l2norm", AttrType::boolean, Attr(false)}};
  if (r == Rule::gdn) {
    a.push_back({"safe_gate", AttrType::boolean, Attr(false)});
    a.push_back({"use_beta_sigmoid", AttrType::boolean, Attr(false)});
  }
  if (!backward) a.push_back({"output_final_state", AttrType::boolean, Attr(false)});
  return a;
}

// The shape rule of infer_delta in words.
std::string delta_shape_rule(Rule r, bool backward) {
  std::string in = "q, k [T, H, K], v [T, HV, V] with HV a multiple of H, g " +
                   std::string(r == Rule::gdn ? "[T, HV]" : "[T, HV, K]") +
                   (r == Rule::gdn2 ? ", b [T, HV, K], w [T, HV, V]" : ", beta [T, HV]") +
                   ", cu_seqlens [B+1], initial_state [B, HV, K, V]" +
                   (r == Rule::gdn ? ", a_log and dt_bias [HV]" : "");
  if (!backward)
    return in +
           " -> o [T, HV, V] (dtype of v), final_state [B, HV, K, V] (initial_state's dtype, "
           "else f32)";
  return in + ", d_o [T, HV, V], d_final_state [B, HV, K, V] -> dq, dk, dv, dg" +
         (r == Rule::gdn2 ? ", db, dw" : ", dbeta") +
         " with their input's dims and dtype (dg f32), d_initial_state [B, HV, K, V] f32" +
         (r == Rule::gdn ? ", d_a_log and d_dt_bias [HV] f32" : "");
}

template <Rule R>
void add_delta_pair(std::vector<OpSchema>& ops, const std::string& name, const std::string& doc) {
  ops.push_back({name, OpKind::captured, delta_inputs(R, false), delta_outputs(R, false),
                 delta_attrs(R, false), &infer_delta<R, false>, doc, delta_shape_rule(R, false),
                 &delta_rule_grad});
  ops.push_back({name + "_bwd", OpKind::captured, delta_inputs(R, true), delta_outputs(R, true),
                 delta_attrs(R, true), &infer_delta<R, true>,
                 "gradients of " + name + " w.r.t. its raw inputs, recomputing the forward",
                 delta_shape_rule(R, true), nullptr});
}

std::vector<OpSchema> make_captured() {
  const std::vector<AttrSpec> sdpa_attrs = {{"scale", AttrType::real, std::nullopt},
                                            {"causal", AttrType::boolean, Attr(false)},
                                            {"max_seqlen_q", AttrType::integer, Attr(int64_t{0})},
                                            {"max_seqlen_kv", AttrType::integer, Attr(int64_t{0})}};
  std::vector<AttrSpec> fwd_attrs = sdpa_attrs;
  fwd_attrs.push_back({"generate_stats", AttrType::boolean, Attr(false)});
  std::vector<OpSchema> ops;
  ops.push_back(
      {"sdpa",
       OpKind::captured,
       {{"q", true, kFloat},
        {"k", true, kFloat},
        {"v", true, kFloat},
        {"cu_seqlens_q", false, kInt},
        {"cu_seqlens_kv", false, kInt}},
       {{"o"}, {"stats", When::attr_true, "generate_stats"}},
       fwd_attrs,
       &infer_sdpa,
       "softmax(scale * q k^T, causal bottom-right) v per sequence; stats = logsumexp; "
       "max_seqlen_q / max_seqlen_kv (THD, 0 none) promise each sequence's rows at most that",
       "q [Tq, H, D], k [Tk, Hk, D], v [Tk, Hk, Dv] with cu_seqlens_q and cu_seqlens_kv "
       "[B+1] (THD), or [B, S, heads, dim] without them (dense); H a multiple of Hk -> o = "
       "q's dims with Dv last (dtype of q), stats = q's dims without the last (f32)",
       &sdpa_grad});
  ops.push_back({"sdpa_bwd",
                 OpKind::captured,
                 {{"q", true, kFloat},
                  {"k", true, kFloat},
                  {"v", true, kFloat},
                  {"o", true, kFloat},
                  {"d_o", true, kFloat},
                  {"stats", true, kFloat},
                  {"cu_seqlens_q", false, kInt},
                  {"cu_seqlens_kv", false, kInt}},
                 {{"dq"}, {"dk"}, {"dv"}},
                 sdpa_attrs,
                 &infer_sdpa_bwd,
                 "gradients of sdpa w.r.t. q, k, v from the forward's o and stats",
                 "q, k, v and cu_seqlens as sdpa; o and d_o = q's dims with Dv last, stats = q's "
                 "dims without the last -> dq, dk, dv with the dims and dtypes of q, k, v",
                 nullptr});
  add_delta_pair<Rule::gdn>(ops, "gdn", "gated delta rule, scalar decay per token and head");
  add_delta_pair<Rule::kda>(ops, "kda", "gated delta rule, decay per key channel");
  add_delta_pair<Rule::gdn2>(
      ops, "gdn2",
      "gated delta rule 2 (fla's GDN-2), channel-wise decay, key-channel erase gate b, "
      "value-channel write gate w");
  return ops;
}

}  // namespace

const std::vector<OpSchema>& captured_ops() {
  static const std::vector<OpSchema> ops = make_captured();
  return ops;
}

}  // namespace eagle::op::detail
