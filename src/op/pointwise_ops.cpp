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
};

constexpr DTypeClass kFloat = DTypeClass::floating;
constexpr DTypeClass kAny = DTypeClass::any;

constexpr std::array kRows = {
    Row{"identity", 1, kAny, Result::like_a, "a"},
    Row{"neg", 1, kAny, Result::like_a, "-a"},
    Row{"abs", 1, kAny, Result::like_a, "|a|"},
    Row{"exp", 1, kFloat, Result::like_a, "e^a"},
    Row{"log", 1, kFloat, Result::like_a, "natural log"},
    Row{"sqrt", 1, kFloat, Result::like_a, "square root"},
    Row{"rsqrt", 1, kFloat, Result::like_a, "1 / sqrt(a)"},
    Row{"reciprocal", 1, kFloat, Result::like_a, "1 / a"},
    Row{"square", 1, kAny, Result::like_a, "a * a"},
    Row{"tanh", 1, kFloat, Result::like_a, "hyperbolic tangent"},
    Row{"sigmoid", 1, kFloat, Result::like_a, "1 / (1 + e^-a)"},
    Row{"relu", 1, kAny, Result::like_a, "max(a, 0)"},
    Row{"gelu", 1, kFloat, Result::like_a, "a * Phi(a), erf form"},
    Row{"gelu_tanh", 1, kFloat, Result::like_a, "gelu, tanh approximation"},
    Row{"silu", 1, kFloat, Result::like_a, "a * sigmoid(a)"},
    Row{"softplus", 1, kFloat, Result::like_a, "log(1 + e^a), stable"},
    Row{"erf", 1, kFloat, Result::like_a, "error function"},
    Row{"sin", 1, kFloat, Result::like_a, "sine"},
    Row{"cos", 1, kFloat, Result::like_a, "cosine"},
    Row{"floor", 1, kFloat, Result::like_a, "round down"},
    Row{"ceil", 1, kFloat, Result::like_a, "round up"},
    Row{"logical_not", 1, kAny, Result::boolean, "a == 0"},
    Row{"cast", 1, kAny, Result::cast, "a converted to the `dtype` attribute"},
    Row{"add", 2, kAny, Result::like_a, "a + b"},
    Row{"sub", 2, kAny, Result::like_a, "a - b"},
    Row{"mul", 2, kAny, Result::like_a, "a * b"},
    Row{"div", 2, kAny, Result::like_a, "a / b"},
    Row{"max", 2, kAny, Result::like_a, "larger of a and b"},
    Row{"min", 2, kAny, Result::like_a, "smaller of a and b"},
    Row{"pow", 2, kFloat, Result::like_a, "a ^ b"},
    Row{"mod", 2, kAny, Result::like_a, "fmod(a, b)"},
    Row{"cmp_eq", 2, kAny, Result::boolean, "a == b"},
    Row{"cmp_neq", 2, kAny, Result::boolean, "a != b"},
    Row{"cmp_lt", 2, kAny, Result::boolean, "a < b"},
    Row{"cmp_le", 2, kAny, Result::boolean, "a <= b"},
    Row{"cmp_gt", 2, kAny, Result::boolean, "a > b"},
    Row{"cmp_ge", 2, kAny, Result::boolean, "a >= b"},
    Row{"logical_and", 2, kAny, Result::boolean, "a != 0 and b != 0"},
    Row{"logical_or", 2, kAny, Result::boolean, "a != 0 or b != 0"},
    Row{"where", 3, kAny, Result::like_a, "cond != 0 ? a : b"},
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
