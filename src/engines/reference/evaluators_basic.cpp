// Evaluators of the pointwise table and the structured ops.
#include "eagle/core/error.hpp"
#include "engines/reference/dense_io.hpp"
#include "engines/reference/evaluators.hpp"
#include "engines/reference/math/pointwise.hpp"
#include "engines/reference/math/structured.hpp"
#include "engines/reference/math/structured_grad.hpp"

namespace eagle::reference {

const Dense& input(const op::Node& node, const Env& env, const char* port) {
  const op::Tensor t = node.input(port);
  if (!t.defined()) throw InvalidArgument(node.name() + ": input '" + port + "' is not wired");
  return env.values[t.index()];
}

const Dense* optional_input(const op::Node& node, const Env& env, const char* port) {
  const op::Tensor t = node.input(port);
  return t.defined() ? &env.values[t.index()] : nullptr;
}

void store(const op::Node& node, Env& env, const char* port, Dense value) {
  const op::Tensor t = node.output(port);
  if (t.defined()) env.values[t.index()] = std::move(value);
}

double real_attr(const op::Node& node, const char* name, double fallback) {
  return node.has_attr(name) ? node.attr(name).as_real(name) : fallback;
}

namespace {

// Integer operands compute exactly in integer arithmetic (pointwise.hpp); a real operand makes
// the op compute in float64.
void eval_pointwise(const op::Node& node, Env& env) {
  const std::string& op = node.op();
  Dense out;
  if (op == "where") {
    out = where(input(node, env, "cond"), input(node, env, "a"), input(node, env, "b"));
  } else if (node.input("b").defined()) {
    const Dense& a = input(node, env, "a");
    const Dense& b = input(node, env, "b");
    const IntBinaryFn exact = a.integer && b.integer ? int_binary_fn(op) : nullptr;
    out = exact ? map_binary_int(op, exact, a, b) : map_binary(binary_fn(op), a, b);
  } else {
    const Dense& a = input(node, env, "a");
    const IntUnaryFn exact = a.integer ? int_unary_fn(op) : nullptr;
    out = exact ? map_unary_int(exact, a) : map_unary(unary_fn(op == "cast" ? "identity" : op), a);
  }
  store(node, env, "out", std::move(out));
}

void eval_reduction(const op::Node& node, Env& env) {
  std::vector<int> axes;
  for (int64_t a : node.attr("axes").as_ints("axes")) axes.push_back(static_cast<int>(a));
  store(node, env, "y",
        reduce(input(node, env, "x"), node.attr("mode").as_text("mode"), axes,
               node.attr("keepdim").as_bool("keepdim")));
}

void eval_softmax(const op::Node& node, Env& env) {
  store(node, env, "y",
        softmax(input(node, env, "x"), static_cast<int>(node.attr("axis").as_int("axis")),
                node.attr("log").as_bool("log")));
}

int normalized_ndim(const op::Node& node) {
  return static_cast<int>(node.attr("normalized_ndim").as_int("normalized_ndim"));
}

void eval_layer_norm(const op::Node& node, Env& env) {
  NormOut r = layer_norm(input(node, env, "x"), optional_input(node, env, "scale"),
                         optional_input(node, env, "bias"), normalized_ndim(node),
                         node.attr("epsilon").as_real("epsilon"));
  store(node, env, "y", std::move(r.y));
  store(node, env, "mean", std::move(r.mean));
  store(node, env, "inv_variance", std::move(r.inv_std));
}

void eval_rms_norm(const op::Node& node, Env& env) {
  RmsOut r = rms_norm(input(node, env, "x"), optional_input(node, env, "scale"),
                      optional_input(node, env, "bias"), normalized_ndim(node),
                      node.attr("epsilon").as_real("epsilon"));
  store(node, env, "y", std::move(r.y));
  store(node, env, "inv_rms", std::move(r.inv_rms));
}

void eval_matmul(const op::Node& node, Env& env) {
  store(node, env, "c",
        matmul(input(node, env, "a"), input(node, env, "b"), optional_input(node, env, "bias")));
}

void eval_embedding(const op::Node& node, Env& env) {
  const Dense& ids = input(node, env, "ids");
  store(node, env, "y", embedding(input(node, env, "table"), as_integers(ids), ids.dims));
}

void eval_cross_entropy(const op::Node& node, Env& env) {
  CrossEntropyOut r =
      cross_entropy(input(node, env, "logits"), as_integers(input(node, env, "targets")),
                    node.attr("ignore_index").as_int("ignore_index"),
                    node.attr("label_smoothing").as_real("label_smoothing"),
                    node.attr("reduction").as_text("reduction"));
  store(node, env, "loss", std::move(r.loss));
  store(node, env, "lse", std::move(r.lse));
}

void eval_softmax_bwd(const op::Node& node, Env& env) {
  store(node, env, "dx",
        softmax_bwd(input(node, env, "y"), input(node, env, "dy"),
                    static_cast<int>(node.attr("axis").as_int("axis")),
                    node.attr("log").as_bool("log")));
}

// layer_norm_bwd reads mean and inv_variance; rms_norm_bwd inv_rms (no mean).
void eval_norm_bwd(const op::Node& node, Env& env) {
  const bool centered = node.op() == "layer_norm_bwd";
  NormGrads g = norm_bwd(node.op(), input(node, env, "dy"), input(node, env, "x"),
                         centered ? &input(node, env, "mean") : nullptr,
                         input(node, env, centered ? "inv_variance" : "inv_rms"),
                         optional_input(node, env, "scale"), normalized_ndim(node),
                         node.attr("bias_grad").as_bool("bias_grad"));
  store(node, env, "dx", std::move(g.dx));
  store(node, env, "dscale", std::move(g.dscale));
  store(node, env, "dbias", std::move(g.dbias));
}

void eval_embedding_bwd(const op::Node& node, Env& env) {
  store(node, env, "dtable",
        embedding_bwd(input(node, env, "dy"), as_integers(input(node, env, "ids")),
                      node.attr("num_embeddings").as_int("num_embeddings")));
}

void eval_count_not_equal(const op::Node& node, Env& env) {
  const std::vector<int64_t> x = as_integers(input(node, env, "x"));
  const int64_t value = node.attr("value").as_int("value");
  const auto n = std::count_if(x.begin(), x.end(), [&](int64_t v) { return v != value; });
  store(node, env, "y", Dense(Dims{}, static_cast<double>(n)));
}

void eval_cross_entropy_bwd(const op::Node& node, Env& env) {
  store(node, env, "dlogits",
        cross_entropy_bwd(input(node, env, "logits"), as_integers(input(node, env, "targets")),
                          input(node, env, "dloss"), optional_input(node, env, "lse"),
                          node.attr("ignore_index").as_int("ignore_index"),
                          node.attr("label_smoothing").as_real("label_smoothing"),
                          node.attr("reduction").as_text("reduction")));
}

}  // namespace

Eval basic_evaluator(const std::string& op) {
  if (unary_fn(op == "cast" ? "identity" : op) || binary_fn(op) || op == "where")
    return &eval_pointwise;
  if (op == "reduction") return &eval_reduction;
  if (op == "softmax") return &eval_softmax;
  if (op == "layer_norm") return &eval_layer_norm;
  if (op == "rms_norm") return &eval_rms_norm;
  if (op == "matmul") return &eval_matmul;
  if (op == "embedding") return &eval_embedding;
  if (op == "cross_entropy") return &eval_cross_entropy;
  if (op == "softmax_bwd") return &eval_softmax_bwd;
  if (op == "layer_norm_bwd" || op == "rms_norm_bwd") return &eval_norm_bwd;
  if (op == "embedding_bwd") return &eval_embedding_bwd;
  if (op == "cross_entropy_bwd") return &eval_cross_entropy_bwd;
  if (op == "count_not_equal") return &eval_count_not_equal;
  return nullptr;
}

Eval evaluator_for(const std::string& op) {
  if (Eval e = basic_evaluator(op)) return e;
  return attention_evaluator(op);
}

}  // namespace eagle::reference
