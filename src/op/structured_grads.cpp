// Derivative rules of the structured ops: reductions broadcast the cotangent back, softmax and
// the norms go through their backward ops (statistics from the forward when it outputs them,
// else recomputed), matmul is two matmuls over transposed operands, embedding and cross_entropy
// go through embedding_bwd and cross_entropy_bwd.
#include <string>
#include <vector>

#include "op/grad_context.hpp"
#include "op/tables.hpp"

namespace eagle::op::detail {

namespace {

Tensor sign(GradContext& c, const Tensor& x, DType dtype) {
  const Tensor zero = c.constant(0.0, x.dtype());
  return c.pw("sub", c.cast(c.pw("cmp_gt", x, zero), dtype),
              c.cast(c.pw("cmp_lt", x, zero), dtype));
}

// The statistics outputs carry no gradient here: refuse a cotangent flowing into one.
void refuse_cotangents(GradContext& c, const std::vector<std::string>& ports) {
  for (const std::string& p : ports)
    if (c.node().output(p).defined() && c.cot(p).defined())
      c.refuse("a cotangent flows into its output '" + p +
               "'; gradients through it are not done (differentiate its main output only)");
}

}  // namespace

namespace {

// The reduction's cotangent in dims that broadcast against x: as given when keepdim or the
// reduced axes lead (`broadcasts`); else only a cotangent given from outside can be read in the
// keepdim dims (a reshaped view of the same elements; the op IR has no reshape), and only sum
// and mean need nothing else.
Tensor reduction_cotangent(GradContext& c, const Dims& dims, const std::vector<bool>& reduced,
                           bool broadcasts, const std::string& mode) {
  if (broadcasts) return c.cot("y");
  Dims kept = dims;
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (reduced[i]) kept[i] = 1;
  Tensor g;
  if (mode == "sum" || mode == "mean") g = c.cot_as("y", kept);
  if (!g.defined())
    c.refuse(
        "reduction over axes that are not leading without keepdim (other than a sum or "
        "mean of a graph output no node reads): the op IR has no reshape to broadcast "
        "the cotangent back; reduce with keepdim = true");
  return g;
}

}  // namespace

void reduction_grad(GradContext& c) {
  if (!c.wants("x")) return;
  const Node& n = c.node();
  const Dims& dims = n.input("x").dims();
  const auto rank = static_cast<int64_t>(dims.size());
  const std::string& mode = n.attr("mode").as_text("reduction: attribute mode");
  const bool keep = n.attr("keepdim").as_bool("reduction: attribute keepdim");
  const std::vector<int64_t>& axes = n.attr("axes").as_ints("reduction: attribute axes");
  std::vector<bool> reduced(dims.size(), axes.empty());
  for (int64_t a : axes) reduced[static_cast<std::size_t>(a < 0 ? a + rank : a)] = true;
  bool leading = true;  // the reduced axes are a prefix: y broadcasts against x as it is
  for (std::size_t i = 1; i < reduced.size(); ++i)
    leading = leading && (!reduced[i] || reduced[i - 1]);
  Tensor g = reduction_cotangent(c, dims, reduced, keep || leading, mode);
  if (mode == "sum" || mode == "mean") {
    if (mode == "mean") {
      int64_t count = 1;
      for (std::size_t i = 0; i < dims.size(); ++i)
        if (reduced[i]) count *= dims[i];
      g = c.pw("mul", g, c.constant(count ? 1.0 / static_cast<double>(count) : 0.0, g.dtype()));
    }
    c.grad("x", c.expand(g, dims));
    return;
  }
  const Tensor x = c.value("x");
  if (mode == "l2") {  // x / y
    c.grad("x", c.pw("mul", g, c.pw("div", x, c.value("y"))));
    return;
  }
  if (mode == "prod") {  // y / x
    c.grad("x", c.pw("mul", g, c.pw("div", c.value("y"), x)));
    return;
  }
  // max, min, amax: g shared evenly among the elements attaining the result.
  const bool amax = mode == "amax";
  const Tensor mask = c.pw("cmp_eq", amax ? c.pw("abs", x) : x, c.value("y"));
  const Tensor ties =
      c.graph()
          .op("reduction", {{"x", c.cast(mask, g.dtype())}},
              {{"mode", Attr("sum")}, {"axes", Attr(axes)}, {"keepdim", Attr(keep)}})
          .at("y");
  Tensor share = c.pw("div", g, ties);
  if (amax) share = c.pw("mul", share, sign(c, x, g.dtype()));
  c.grad("x", c.where(mask, share, c.constant(0.0, g.dtype())));
}

void softmax_grad(GradContext& c) {
  if (!c.wants("x")) return;
  const Node& n = c.node();
  const Tensor dx = c.graph()
                        .op("softmax_bwd", {{"y", c.value("y")}, {"dy", c.cot("y")}},
                            {{"axis", n.attr("axis")}, {"log", n.attr("log")}})
                        .at("dx");
  c.grad("x", dx);
}

namespace {

void norm_grad(GradContext& c, const std::string& bwd, const std::vector<std::string>& stats) {
  refuse_cotangents(c, stats);
  const bool want_bias = c.node().input("bias").defined() && c.wants("bias");
  const bool want_scale = c.node().input("scale").defined() && c.wants("scale");
  if (!c.wants("x") && !want_scale && !want_bias) return;
  Ports ins = {{"dy", c.cot("y")}, {"x", c.value("x")}};
  const std::vector<Tensor> s = c.values(stats);
  for (std::size_t i = 0; i < stats.size(); ++i) ins.emplace_back(stats[i], s[i]);
  if (c.node().input("scale").defined()) ins.emplace_back("scale", c.value("scale"));
  const auto out = c.graph().op(
      bwd, ins,
      {{"normalized_ndim", c.node().attr("normalized_ndim")}, {"bias_grad", Attr(want_bias)}});
  c.grad("x", out.at("dx"));
  if (want_scale) c.grad("scale", out.at("dscale"));
  if (want_bias) c.grad("bias", out.at("dbias"));
}

}  // namespace

void layer_norm_grad(GradContext& c) {
  norm_grad(c, "layer_norm_bwd", {"mean", "inv_variance"});
}

void rms_norm_grad(GradContext& c) {
  norm_grad(c, "rms_norm_bwd", {"inv_rms"});
}

void matmul_grad(GradContext& c) {  // dA = dC B^T, dB = A^T dC, dbias = dC summed
  const Tensor g = c.cot("c");
  if (c.wants("a")) c.grad("a", c.graph().matmul(g, c.transposed("b")));
  if (c.wants("b")) c.grad("b", c.graph().matmul(c.transposed("a"), g));
  if (c.node().input("bias").defined()) c.grad("bias", g);
}

void embedding_grad(GradContext& c) {
  if (!c.wants("table")) return;
  const int64_t rows = c.node().input("table").dims()[0];
  c.grad("table", c.graph()
                      .op("embedding_bwd", {{"dy", c.cot("y")}, {"ids", c.value("ids")}},
                          {{"num_embeddings", Attr(rows)}})
                      .at("dtable"));
}

void cross_entropy_grad(GradContext& c) {
  refuse_cotangents(c, {"lse"});
  if (!c.wants("logits")) return;
  const Node& n = c.node();
  Tensor dloss = c.cot("loss");
  Attr reduction = n.attr("reduction");
  // A mean's cotangent is shared by the rows not ignored: their count, a node of its own that
  // reads only the targets (so a graph runs it early, off the backward's path), divides it;
  // the backward then weighs each row as a sum does.
  if (reduction.as_text("reduction") == "mean") {
    const Tensor count =
        c.graph()
            .op("count_not_equal", {{"x", c.value("targets")}},
                {{"value", n.attr("ignore_index")}, {"dtype", Attr(dloss.dtype())}})
            .at("y");
    dloss = c.pw("div", dloss, count);
    reduction = Attr("sum");
  }
  Ports ins = {{"logits", c.value("logits")}, {"targets", c.value("targets")}, {"dloss", dloss}};
  if (c.exposed("lse")) ins.emplace_back("lse", c.value("lse"));  // else the op recomputes it
  c.grad("logits", c.graph()
                       .op("cross_entropy_bwd", ins,
                           {{"ignore_index", n.attr("ignore_index")},
                            {"label_smoothing", n.attr("label_smoothing")},
                            {"reduction", reduction}})
                       .at("dlogits"));
}

}  // namespace eagle::op::detail
