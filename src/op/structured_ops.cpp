// Structured ops: one table entry each, with its own ports, attributes and shape rule.
#include <algorithm>
#include <cmath>
#include <set>

#include "eagle/core/error.hpp"
#include "op/tables.hpp"

namespace eagle::op::detail {

namespace {

using When = OutputPort::When;
constexpr DTypeClass kFloat = DTypeClass::floating;
constexpr DTypeClass kInt = DTypeClass::integer;

// Resolves a possibly negative axis of a rank-`rank` tensor; fails naming the attribute.
int64_t resolve_axis(const InferContext& ctx, int64_t axis, std::size_t rank, const char* attr) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    ctx.fail("x", std::string("attribute ") + attr + " = " + std::to_string(axis) +
                      " is outside [-" + std::to_string(r) + ", " + std::to_string(r) + ")");
  return axis < 0 ? axis + r : axis;
}

void infer_reduction(InferContext& ctx) {
  const TensorMeta& x = ctx.in("x");
  static const std::set<std::string> modes = {"sum", "mean", "max", "min", "prod", "l2", "amax"};
  const std::string& mode = ctx.attr("mode").as_text("reduction: attribute mode");
  if (!modes.count(mode))
    ctx.fail("x",
             "attribute mode '" + mode + "' is not one of sum, mean, max, min, prod, l2, amax");
  std::vector<bool> reduced(x.dims.size(), false);
  const auto& axes = ctx.attr("axes").as_ints("reduction: attribute axes");
  for (int64_t a : axes) {
    const int64_t axis = resolve_axis(ctx, a, x.dims.size(), "axes");
    if (reduced[axis]) ctx.fail("x", "attribute axes names axis " + std::to_string(a) + " twice");
    reduced[axis] = true;
  }
  if (axes.empty()) reduced.assign(x.dims.size(), true);
  const bool keep = ctx.attr("keepdim").as_bool("reduction: attribute keepdim");
  Dims out;
  for (std::size_t i = 0; i < x.dims.size(); ++i)
    if (!reduced[i])
      out.push_back(x.dims[i]);
    else if (keep)
      out.push_back(1);
  ctx.outputs["y"] = {out, x.dtype};
}

void infer_softmax(InferContext& ctx) {
  const TensorMeta& x = ctx.in("x");
  if (x.dims.empty()) ctx.fail("x", "needs at least one dimension");
  resolve_axis(ctx, ctx.attr("axis").as_int("softmax: attribute axis"), x.dims.size(), "axis");
  ctx.outputs["y"] = x;
}

// Layer norm and RMS norm: x [..., normalized dims]; scale/bias have the normalized dims;
// statistics have the leading dims.
void infer_norm(InferContext& ctx, const char* stat_a, const char* stat_b) {
  const TensorMeta& x = ctx.in("x");
  const int64_t nd = ctx.attr("normalized_ndim").as_int(ctx.op + ": attribute normalized_ndim");
  if (nd < 1 || nd > static_cast<int64_t>(x.dims.size()))
    ctx.fail("x", "attribute normalized_ndim = " + std::to_string(nd) + " must be in [1, rank]");
  const Dims trailing(x.dims.end() - nd, x.dims.end());
  const Dims leading(x.dims.begin(), x.dims.end() - nd);
  for (const char* p : {"scale", "bias"})
    if (ctx.has(p)) ctx.expect_dims(p, trailing, "the normalized dims of x");
  // Written so that NaN fails too (resolve_attrs refuses it first; validate() re-runs this).
  const double epsilon = ctx.attr("epsilon").as_real(ctx.op + ": attribute epsilon");
  if (!(epsilon >= 0 && std::isfinite(epsilon)))
    ctx.fail("x",
             "attribute epsilon must be >= 0 and finite, got " + ctx.attr("epsilon").to_json());
  ctx.outputs["y"] = x;
  const DType stats = x.dtype == DType::f64 ? DType::f64 : DType::f32;
  ctx.outputs[stat_a] = {leading, stats};
  if (stat_b) ctx.outputs[stat_b] = {leading, stats};
}
void infer_layer_norm(InferContext& ctx) {
  infer_norm(ctx, "mean", "inv_variance");
}
void infer_rms_norm(InferContext& ctx) {
  infer_norm(ctx, "inv_rms", nullptr);
}

void infer_matmul(InferContext& ctx) {
  const TensorMeta& a = ctx.in("a");
  const TensorMeta& b = ctx.in("b");
  if (a.dims.size() < 2) ctx.fail("a", "needs at least 2 dims [..., M, K]");
  if (b.dims.size() < 2) ctx.fail("b", "needs at least 2 dims [..., K, N]");
  const int64_t m = a.dims[a.dims.size() - 2], k = a.dims.back();
  const int64_t n = b.dims.back();
  if (b.dims[b.dims.size() - 2] != k)
    ctx.fail("b", "inner dimension must equal a's last dimension " + std::to_string(k));
  Dims batch = broadcast(ctx, "b", Dims(a.dims.begin(), a.dims.end() - 2),
                         Dims(b.dims.begin(), b.dims.end() - 2));
  batch.push_back(m);
  batch.push_back(n);
  if (ctx.has("bias") && broadcast(ctx, "bias", batch, ctx.in("bias").dims) != batch)
    ctx.fail("bias", "must broadcast to the result " + dims_str(batch));
  ctx.outputs["c"] = {batch, a.dtype};
}

void infer_embedding(InferContext& ctx) {
  const TensorMeta& table = ctx.in("table");
  ctx.expect_rank("table", 2, "[V, D]");
  Dims out = ctx.in("ids").dims;
  out.push_back(table.dims[1]);
  ctx.outputs["y"] = {out, table.dtype};
}

void infer_cross_entropy(InferContext& ctx) {
  ctx.expect_rank("logits", 2, "[N, C]");
  const int64_t n = ctx.in("logits").dims[0];
  ctx.expect_dims("targets", {n}, "[N]");
  const std::string& red = ctx.attr("reduction").as_text("cross_entropy: attribute reduction");
  if (red != "none" && red != "sum" && red != "mean")
    ctx.fail("logits", "attribute reduction '" + red + "' is not one of none, sum, mean");
  const double ls = ctx.attr("label_smoothing").as_real("cross_entropy: attribute label_smoothing");
  if (!(ls >= 0 && ls <= 1))  // NaN fails too
    ctx.fail("logits", "attribute label_smoothing must be in [0, 1], got " +
                           ctx.attr("label_smoothing").to_json());
  const DType dt = ctx.in("logits").dtype == DType::f64 ? DType::f64 : DType::f32;
  ctx.outputs["loss"] = {red == "none" ? Dims{n} : Dims{}, dt};
  ctx.outputs["lse"] = {{n}, dt};
}

void infer_count_not_equal(InferContext& ctx) {
  const DType dt = ctx.attr("dtype").as_dtype("count_not_equal: attribute dtype");
  if (dt != DType::f32 && dt != DType::f64)
    ctx.fail("x", "attribute dtype must be f32 or f64, got " + std::string(dtype_name(dt)));
  ctx.outputs["y"] = {Dims{}, dt};
}

void infer_softmax_bwd(InferContext& ctx) {
  const TensorMeta& y = ctx.in("y");
  if (y.dims.empty()) ctx.fail("y", "needs at least one dimension");
  ctx.expect_dims("dy", y.dims, "y's dims");
  const auto axis = ctx.attr("axis").as_int("softmax_bwd: attribute axis");
  const auto r = static_cast<int64_t>(y.dims.size());
  if (axis < -r || axis >= r)
    ctx.fail("y", "attribute axis = " + std::to_string(axis) + " is outside [-" +
                      std::to_string(r) + ", " + std::to_string(r) + ")");
  ctx.outputs["dx"] = ctx.in("dy");
}

// The backward of layer_norm (stat_a "mean", stat_b "inv_variance") and rms_norm (stat_a
// "inv_rms", no stat_b): statistics of the leading dims, scale of the trailing ones.
void infer_norm_bwd(InferContext& ctx, const char* stat_a, const char* stat_b) {
  const TensorMeta& x = ctx.in("x");
  const int64_t nd = ctx.attr("normalized_ndim").as_int(ctx.op + ": attribute normalized_ndim");
  if (nd < 1 || nd > static_cast<int64_t>(x.dims.size()))
    ctx.fail("x", "attribute normalized_ndim = " + std::to_string(nd) + " must be in [1, rank]");
  const Dims trailing(x.dims.end() - nd, x.dims.end());
  const Dims leading(x.dims.begin(), x.dims.end() - nd);
  ctx.expect_dims("dy", x.dims, "x's dims");
  ctx.expect_dims(stat_a, leading, "the leading dims of x");
  if (stat_b) ctx.expect_dims(stat_b, leading, "the leading dims of x");
  if (ctx.has("scale")) ctx.expect_dims("scale", trailing, "the normalized dims of x");
  const DType param = ctx.has("scale") ? ctx.in("scale").dtype : ctx.in("dy").dtype;
  ctx.outputs["dx"] = {x.dims, ctx.in("dy").dtype};
  ctx.outputs["dscale"] = {trailing, param};
  ctx.outputs["dbias"] = {trailing, param};
}
void infer_layer_norm_bwd(InferContext& ctx) {
  infer_norm_bwd(ctx, "mean", "inv_variance");
}
void infer_rms_norm_bwd(InferContext& ctx) {
  infer_norm_bwd(ctx, "inv_rms", nullptr);
}

void infer_embedding_bwd(InferContext& ctx) {
  const TensorMeta& dy = ctx.in("dy");
  const Dims& ids = ctx.in("ids").dims;
  if (dy.dims.size() != ids.size() + 1 || !std::equal(ids.begin(), ids.end(), dy.dims.begin()))
    ctx.fail("dy", "must be ids' dims followed by D, ids dims " + dims_str(ids));
  const int64_t v = ctx.attr("num_embeddings").as_int("embedding_bwd: attribute num_embeddings");
  if (v < 0) ctx.fail("dy", "attribute num_embeddings = " + std::to_string(v) + " must be >= 0");
  ctx.outputs["dtable"] = {{v, dy.dims.back()}, dy.dtype};
}

void infer_cross_entropy_bwd(InferContext& ctx) {
  infer_cross_entropy(ctx);  // the forward's checks of logits, targets and attributes
  const Dims loss = ctx.outputs["loss"].dims;
  const int64_t n = ctx.in("logits").dims[0];
  ctx.outputs.clear();
  ctx.expect_dims("dloss", loss,
                  loss.empty() ? "[] (reduction sum or mean)" : "[N] (reduction none)");
  if (ctx.has("lse")) ctx.expect_dims("lse", {n}, "[N]");
  ctx.outputs["dlogits"] = ctx.in("logits");
}

std::vector<AttrSpec> norm_attrs() {
  return {{"epsilon", AttrType::real, Attr(1e-5)},
          {"normalized_ndim", AttrType::integer, Attr(1)},
          {"training", AttrType::boolean, Attr(false)}};
}

}  // namespace

const std::vector<OpSchema>& structured_ops() {
  static const std::vector<OpSchema> ops = {
      {"reduction",
       OpKind::structured,
       {{"x", true, DTypeClass::any}},
       {{"y"}},
       {{"mode", AttrType::text, std::nullopt, true},
        {"axes", AttrType::integers, Attr(std::vector<int64_t>{})},
        {"keepdim", AttrType::boolean, Attr(false)}},
       &infer_reduction,
       "sum, mean, max, min, prod, l2 or amax over `axes` (all when empty)",
       "y = x's dims without the reduced axes (each kept as 1 when keepdim); axes in [-rank, "
       "rank), "
       "none twice; dtype of x",
       &reduction_grad},
      {"softmax",
       OpKind::structured,
       {{"x", true, kFloat}},
       {{"y"}},
       {{"axis", AttrType::integer, Attr(-1)}, {"log", AttrType::boolean, Attr(false)}},
       &infer_softmax,
       "softmax (log softmax when log) along `axis`",
       "y = x's dims and dtype; x has rank >= 1 and axis is in [-rank, rank)",
       &softmax_grad},
      {"layer_norm",
       OpKind::structured,
       {{"x", true, kFloat}, {"scale", false, kFloat}, {"bias", false, kFloat}},
       {{"y"},
        {"mean", When::attr_true, "training"},
        {"inv_variance", When::attr_true, "training"}},
       norm_attrs(),
       &infer_layer_norm,
       "(x - mean) / sqrt(var + epsilon) * scale + bias over the trailing normalized_ndim dims",
       "y = x's dims and dtype; scale, bias = the trailing normalized_ndim dims of x; mean, "
       "inv_variance = the leading dims (f64 for f64 x, else f32); normalized_ndim in [1, rank]",
       &layer_norm_grad},
      {"rms_norm",
       OpKind::structured,
       {{"x", true, kFloat}, {"scale", false, kFloat}, {"bias", false, kFloat}},
       {{"y"}, {"inv_rms", When::attr_true, "training"}},
       norm_attrs(),
       &infer_rms_norm,
       "x / sqrt(mean(x^2) + epsilon) * scale + bias",
       "y = x's dims and dtype; scale, bias = the trailing normalized_ndim dims of x; inv_rms = "
       "the leading dims (f64 for f64 x, else f32); normalized_ndim in [1, rank]",
       &rms_norm_grad},
      {"softmax_bwd",
       OpKind::structured,
       {{"y", true, kFloat}, {"dy", true, kFloat}},
       {{"dx"}},
       {{"axis", AttrType::integer, Attr(-1)}, {"log", AttrType::boolean, Attr(false)}},
       &infer_softmax_bwd,
       "gradient of softmax (log softmax when log) from its output y and dy",
       "y, dy of one dims (rank >= 1), axis in [-rank, rank) -> dx = dy's dims and dtype",
       nullptr},
      {"layer_norm_bwd",
       OpKind::structured,
       {{"dy", true, kFloat},
        {"x", true, kFloat},
        {"mean", true, kFloat},
        {"inv_variance", true, kFloat},
        {"scale", false, kFloat}},
       {{"dx"}, {"dscale", When::input_wired, "scale"}, {"dbias", When::attr_true, "bias_grad"}},
       {{"normalized_ndim", AttrType::integer, Attr(1)},
        {"bias_grad", AttrType::boolean, Attr(false)}},
       &infer_layer_norm_bwd,
       "gradients of layer_norm from dy, x and the training statistics",
       "dy = x's dims; mean, inv_variance = the leading dims; scale = the trailing "
       "normalized_ndim dims -> dx (dy's dtype), dscale (when scale is wired) and dbias (when "
       "bias_grad) of the trailing dims, scale's dtype (dy's without scale)",
       nullptr},
      {"rms_norm_bwd",
       OpKind::structured,
       {{"dy", true, kFloat},
        {"x", true, kFloat},
        {"inv_rms", true, kFloat},
        {"scale", false, kFloat}},
       {{"dx"}, {"dscale", When::input_wired, "scale"}, {"dbias", When::attr_true, "bias_grad"}},
       {{"normalized_ndim", AttrType::integer, Attr(1)},
        {"bias_grad", AttrType::boolean, Attr(false)}},
       &infer_rms_norm_bwd,
       "gradients of rms_norm from dy, x and the training statistic inv_rms",
       "as layer_norm_bwd with inv_rms in place of mean and inv_variance",
       nullptr},
      {"matmul",
       OpKind::structured,
       {{"a", true, kFloat}, {"b", true, kFloat}, {"bias", false, kFloat}},
       {{"c"}},
       {},
       &infer_matmul,
       "a [..., M, K] @ b [..., K, N] (+ bias), batch dims broadcast",
       "a [..., M, K], b [..., K, N] -> c [broadcast(batch dims of a and b), M, N], dtype of a; "
       "bias "
       "broadcasts to c",
       &matmul_grad},
      {"embedding",
       OpKind::structured,
       {{"table", true, kFloat}, {"ids", true, kInt}},
       {{"y"}},
       {},
       &infer_embedding,
       "rows of table [V, D] picked by ids; an id outside [0, V) is refused at execute",
       "table [V, D], ids [...] -> y [..., D], dtype of table",
       &embedding_grad},
      {"embedding_bwd",
       OpKind::structured,
       {{"dy", true, kFloat}, {"ids", true, kInt}},
       {{"dtable"}},
       {{"num_embeddings", AttrType::integer, std::nullopt, true},
        {"deterministic", AttrType::boolean, Attr(true)}},
       &infer_embedding_bwd,
       "gradient of the table of an embedding: rows of dy summed per id; an id outside [0, V) "
       "is refused at execute",
       "dy [..., D] with ids [...] -> dtable [num_embeddings, D], dtype of dy; deterministic "
       "(the default) sums each row in the order of the ids",
       nullptr},
      {"cross_entropy",
       OpKind::structured,
       {{"logits", true, kFloat}, {"targets", true, kInt}},
       {{"loss"}, {"lse", When::attr_true, "output_lse"}},
       {{"ignore_index", AttrType::integer, Attr(-100)},
        {"label_smoothing", AttrType::real, Attr(0.0)},
        {"reduction", AttrType::text, Attr("mean")},
        {"output_lse", AttrType::boolean, Attr(false)}},
       &infer_cross_entropy,
       "softmax cross entropy of logits [N, C] against integer targets [N]",
       "logits [N, C], targets [N] -> loss [N] (reduction none) or [] (sum, mean), lse [N]; f64 "
       "for "
       "f64 logits, else f32",
       &cross_entropy_grad},
      {"count_not_equal",
       OpKind::structured,
       {{"x", true, kInt}},
       {{"y"}},
       {{"value", AttrType::integer, Attr(0)}, {"dtype", AttrType::dtype, Attr(DType::f32)}},
       &infer_count_not_equal,
       "the number of elements of x unequal to `value` (cross_entropy's backward counts the "
       "targets not ignored with it)",
       "x [...] integer -> y [] of the `dtype` attribute (f32, exact to 2^24; or f64)",
       nullptr},
      {"cross_entropy_bwd",
       OpKind::structured,
       {{"logits", true, kFloat},
        {"targets", true, kInt},
        {"dloss", true, kFloat},
        {"lse", false, kFloat}},
       {{"dlogits"}},
       {{"ignore_index", AttrType::integer, Attr(-100)},
        {"label_smoothing", AttrType::real, Attr(0.0)},
        {"reduction", AttrType::text, Attr("mean")}},
       &infer_cross_entropy_bwd,
       "gradient of cross_entropy w.r.t. logits (from the forward's lse when wired)",
       "logits [N, C], targets [N], dloss [N] (reduction none) or [] (sum, mean), lse [N] -> "
       "dlogits = logits' dims and dtype",
       nullptr},
  };
  return ops;
}

}  // namespace eagle::op::detail
