// The uniform pointwise table: one row per op (name, arity, what it accepts, what it yields).
// Every row becomes a schema with ports a [, b] (where: cond, a, b), numpy broadcasting and
// one output `out`.
#include <array>

#include "eagle/core/error.hpp"
#include "op/tables.hpp"

namespace eagle::op::detail {

namespace {

// What the output dtype is: a's, boolean (comparisons, logic) or the `dtype` attribute (cast).
enum class Result : uint8_t { like_a, boolean, cast };

struct Row {
  const char* name;
  int arity;
  DTypeClass accepts;
  Result result;
  const char* doc;
  GradFn grad;  // pointwise_grads.cpp; nullptr: the output is not floating point
};

constexpr DTypeClass kFloat = DTypeClass::floating;
constexpr DTypeClass kAny = DTypeClass::any;

constexpr std::array kRows = {
    Row{"identity", 1, kAny, Result::like_a, "a", &pointwise_grad_identity},
    Row{"neg", 1, kAny, Result::like_a, "-a", &pointwise_grad_neg},
    Row{"abs", 1, kAny, Result::like_a, "|a|", &pointwise_grad_abs},
    Row{"exp", 1, kFloat, Result::like_a, "e^a", &pointwise_grad_exp},
    Row{"log", 1, kFloat, Result::like_a, "natural log", &pointwise_grad_log},
    Row{"sqrt", 1, kFloat, Result::like_a, "square root", &pointwise_grad_sqrt},
    Row{"rsqrt", 1, kFloat, Result::like_a, "1 / sqrt(a)", &pointwise_grad_rsqrt},
    Row{"reciprocal", 1, kFloat, Result::like_a, "1 / a", &pointwise_grad_reciprocal},
    Row{"square", 1, kAny, Result::like_a, "a * a", &pointwise_grad_square},
    Row{"tanh", 1, kFloat, Result::like_a, "hyperbolic tangent", &pointwise_grad_tanh},
    Row{"sigmoid", 1, kFloat, Result::like_a, "1 / (1 + e^-a)", &pointwise_grad_sigmoid},
    Row{"relu", 1, kAny, Result::like_a, "max(a, 0)", &pointwise_grad_relu},
    Row{"gelu", 1, kFloat, Result::like_a, "a * Phi(a), erf form", &pointwise_grad_gelu},
    Row{"gelu_tanh", 1, kFloat, Result::like_a, "gelu, tanh approximation",
        &pointwise_grad_gelu_tanh},
    Row{"silu", 1, kFloat, Result::like_a, "a * sigmoid(a)", &pointwise_grad_silu},
    Row{"softplus", 1, kFloat, Result::like_a, "log(1 + e^a), stable", &pointwise_grad_softplus},
    Row{"erf", 1, kFloat, Result::like_a, "error function", &pointwise_grad_erf},
    Row{"sin", 1, kFloat, Result::like_a, "sine", &pointwise_grad_sin},
    Row{"cos", 1, kFloat, Result::like_a, "cosine", &pointwise_grad_cos},
    Row{"floor", 1, kFloat, Result::like_a, "round down", &pointwise_grad_zero},
    Row{"ceil", 1, kFloat, Result::like_a, "round up", &pointwise_grad_zero},
    Row{"logical_not", 1, kAny, Result::boolean, "a == 0", nullptr},
    Row{"cast", 1, kAny, Result::cast, "a converted to the `dtype` attribute",
        &pointwise_grad_cast},
    Row{"add", 2, kAny, Result::like_a, "a + b", &pointwise_grad_add},
    Row{"sub", 2, kAny, Result::like_a, "a - b", &pointwise_grad_sub},
    Row{"mul", 2, kAny, Result::like_a, "a * b", &pointwise_grad_mul},
    Row{"div", 2, kAny, Result::like_a, "a / b", &pointwise_grad_div},
    Row{"max", 2, kAny, Result::like_a, "larger of a and b", &pointwise_grad_max},
    Row{"min", 2, kAny, Result::like_a, "smaller of a and b", &pointwise_grad_min},
    Row{"pow", 2, kFloat, Result::like_a, "a ^ b", &pointwise_grad_pow},
    Row{"mod", 2, kAny, Result::like_a, "fmod(a, b)", &pointwise_grad_mod},
    // torch's gelu_backward(grad, self) and silu_backward(grad, self): the derivative rules of
    // gelu and silu, one node each.
    Row{"gelu_backward", 2, kFloat, Result::like_a,
        "a * gelu'(b): gelu's backward, a the cotangent", &pointwise_grad_gelu_backward},
    Row{"silu_backward", 2, kFloat, Result::like_a,
        "a * silu'(b): silu's backward, a the cotangent", &pointwise_grad_silu_backward},
    Row{"cmp_eq", 2, kAny, Result::boolean, "a == b", nullptr},
    Row{"cmp_neq", 2, kAny, Result::boolean, "a != b", nullptr},
    Row{"cmp_lt", 2, kAny, Result::boolean, "a < b", nullptr},
    Row{"cmp_le", 2, kAny, Result::boolean, "a <= b", nullptr},
    Row{"cmp_gt", 2, kAny, Result::boolean, "a > b", nullptr},
    Row{"cmp_ge", 2, kAny, Result::boolean, "a >= b", nullptr},
    Row{"logical_and", 2, kAny, Result::boolean, "a != 0 and b != 0", nullptr},
    Row{"logical_or", 2, kAny, Result::boolean, "a != 0 or b != 0", nullptr},
    Row{"where", 3, kAny, Result::like_a, "cond != 0 ? a : b", &pointwise_grad_where},
};

template <Result R>
void infer_pointwise(InferContext& ctx) {
  Dims dims = ctx.in("a").dims;
  for (const char* port : {"b", "cond"})
    if (ctx.has(port)) dims = broadcast(ctx, port, dims, ctx.in(port).dims);
  DType dtype = ctx.in("a").dtype;
  if constexpr (R == Result::boolean) dtype = DType::boolean;
  if constexpr (R == Result::cast) dtype = ctx.attr("dtype").as_dtype(ctx.op + ": attribute dtype");
  ctx.outputs["out"] = {dims, dtype};
}

OpSchema schema_of(const Row& row) {
  OpSchema s;
  s.name = row.name;
  s.kind = OpKind::pointwise;
  if (row.arity == 3) s.inputs.push_back({"cond", true, DTypeClass::any});
  s.inputs.push_back({"a", true, row.accepts});
  if (row.arity == 2 || row.arity == 3) s.inputs.push_back({"b", true, row.accepts});
  s.outputs.push_back({"out"});
  switch (row.result) {
    case Result::like_a:
      s.infer = &infer_pointwise<Result::like_a>;
      break;
    case Result::boolean:
      s.infer = &infer_pointwise<Result::boolean>;
      break;
    case Result::cast:
      s.infer = &infer_pointwise<Result::cast>;
      s.attrs.push_back({"dtype", AttrType::dtype, std::nullopt, true});
      break;
  }
  s.doc = row.doc;
  s.grad = row.grad;
  const char* dims = row.arity == 1   ? "out has a's dims"
                     : row.arity == 2 ? "out dims = broadcast(a, b)"
                                      : "out dims = broadcast(cond, a, b)";
  const char* dtype = row.result == Result::like_a    ? "; dtype of a"
                      : row.result == Result::boolean ? "; dtype bool"
                                                      : "; dtype = the `dtype` attribute";
  s.shape_rule = std::string(dims) + dtype +
                 (row.arity == 1 ? ""
                                 : " (numpy broadcasting: aligned from the last dim, sizes "
                                   "equal or 1)");
  return s;
}

}  // namespace

Dims broadcast(const InferContext& ctx, const std::string& port, const Dims& a, const Dims& b) {
  const std::size_t n = std::max(a.size(), b.size());
  Dims out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1)
      ctx.fail(port, "does not broadcast with " + dims_str(a) + " (sizes must match or be 1)");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

const std::vector<OpSchema>& pointwise_ops() {
  static const std::vector<OpSchema> ops = [] {
    std::vector<OpSchema> out;
    for (const Row& row : kRows) out.push_back(schema_of(row));
    return out;
  }();
  return ops;
}

}  // namespace eagle::op::detail
