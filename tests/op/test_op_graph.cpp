// The operation IR: op tables, graph building with shape inference, error paths, uids,
// outputs and operands, tensor setters, validation, freezing and the JSON dump.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "eagle/op/graph.hpp"
#include "test_util.hpp"

namespace eagle::op {
namespace {

using test::expect_throw_with;

// A graph input of `dims` and `dtype`.
Tensor in(Graph& g, const Dims& dims, DType dtype = DType::f32, const std::string& name = "") {
  return g.tensor({name, dims, dtype});
}

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

std::vector<std::string> port_names(const Ports& ports) {
  std::vector<std::string> out;
  for (const auto& p : ports) out.push_back(p.first);
  return out;
}

std::vector<std::string> keys(const std::map<std::string, Tensor>& outs) {
  std::vector<std::string> out;
  for (const auto& p : outs) out.push_back(p.first);
  return out;
}

// `p` with `port` rewired to `t` (appended when absent).
Ports with(Ports p, const std::string& port, const Tensor& t) {
  for (auto& w : p)
    if (w.first == port) {
      w.second = t;
      return p;
    }
  p.emplace_back(port, t);
  return p;
}

Ports without(Ports p, const std::string& port) {
  p.erase(std::remove_if(p.begin(), p.end(), [&](const auto& w) { return w.first == port; }),
          p.end());
  return p;
}

// Expects `fn` to throw InvalidArgument naming every needle, and the graph to be unchanged.
template <class Fn>
void expect_rejected(const Graph& g, Fn&& fn, std::initializer_list<std::string> needles) {
  const std::size_t nodes = g.nodes().size();
  const std::size_t tensors = g.tensors().size();
  const std::string json = g.to_json();
  expect_throw_with<InvalidArgument>(fn, needles);
  EXPECT_EQ(g.nodes().size(), nodes);
  EXPECT_EQ(g.tensors().size(), tensors);
  EXPECT_EQ(g.to_json(), json);
}

// Expects g.op(op, ports, attrs) to be rejected naming every needle, the graph unchanged. The
// arguments (and any tensors they create) are evaluated before the graph is compared.
void expect_op_rejected(Graph& g, const std::string& op, const Ports& ports, const Attrs& attrs,
                        std::initializer_list<std::string> needles) {
  expect_rejected(
      g, [&] { g.op(op, ports, attrs); }, needles);
}

// ---- The op tables

TEST(OpGraphSchema, EveryOpHasAShapeRuleAndIsFoundByName) {
  const auto& ops = all_ops();
  ASSERT_FALSE(ops.empty());
  std::set<std::string> names;
  for (const OpSchema* s : ops) {
    ASSERT_NE(s, nullptr);
    SCOPED_TRACE(s->name);
    EXPECT_FALSE(s->name.empty());
    EXPECT_NE(s->infer, nullptr);
    EXPECT_FALSE(s->outputs.empty());
    EXPECT_FALSE(s->doc.empty());
    EXPECT_TRUE(names.insert(s->name).second) << "duplicate op " << s->name;
    EXPECT_EQ(find_op(s->name), s);
  }
  for (const char* name :
       {"add",        "exp",      "cast",   "where",     "cmp_lt",        "reduction", "softmax",
        "layer_norm", "rms_norm", "matmul", "embedding", "cross_entropy", "sdpa",      "sdpa_bwd",
        "gdn",        "gdn_bwd",  "kda",    "kda_bwd",   "gdn2",          "gdn2_bwd"})
    EXPECT_TRUE(names.count(name)) << name;
}

TEST(OpGraphSchema, TablesComePointwiseThenStructuredThenCaptured) {
  int last = 0;
  for (const OpSchema* s : all_ops()) {
    const int kind = static_cast<int>(s->kind);
    EXPECT_GE(kind, last) << s->name;
    last = kind;
  }
  EXPECT_EQ(find_op("add")->kind, OpKind::pointwise);
  EXPECT_EQ(find_op("where")->kind, OpKind::pointwise);
  EXPECT_EQ(find_op("matmul")->kind, OpKind::structured);
  EXPECT_EQ(find_op("cross_entropy")->kind, OpKind::structured);
  EXPECT_EQ(find_op("sdpa")->kind, OpKind::captured);
  EXPECT_EQ(find_op("gdn2_bwd")->kind, OpKind::captured);
}

TEST(OpGraphSchema, FindOpReturnsNullForUnknownNames) {
  EXPECT_EQ(find_op("conv2d"), nullptr);
  EXPECT_EQ(find_op(""), nullptr);
  EXPECT_EQ(find_op("ADD"), nullptr);
  const OpSchema* add = find_op("add");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->name, "add");
}

TEST(OpGraphSchema, OpKindNames) {
  EXPECT_EQ(op_kind_name(OpKind::pointwise), "pointwise");
  EXPECT_EQ(op_kind_name(OpKind::structured), "structured");
  EXPECT_EQ(op_kind_name(OpKind::captured), "captured");
}

TEST(OpGraphSchema, ConditionalOutputsNameABooleanAttributeOrAnOptionalInput) {
  for (const OpSchema* s : all_ops()) {
    SCOPED_TRACE(s->name);
    for (const OutputPort& p : s->outputs) {
      if (p.when == OutputPort::When::attr_true) {
        auto a = std::find_if(s->attrs.begin(), s->attrs.end(),
                              [&](const AttrSpec& x) { return x.name == p.condition; });
        ASSERT_NE(a, s->attrs.end()) << p.name << " conditions on " << p.condition;
        EXPECT_EQ(a->type, AttrType::boolean);
        ASSERT_TRUE(a->default_value.has_value());
        EXPECT_EQ(*a->default_value, Attr(false));
      } else if (p.when == OutputPort::When::input_wired) {
        auto i = std::find_if(s->inputs.begin(), s->inputs.end(),
                              [&](const InputPort& x) { return x.name == p.condition; });
        ASSERT_NE(i, s->inputs.end()) << p.name << " conditions on " << p.condition;
        EXPECT_FALSE(i->required);
      } else {
        EXPECT_TRUE(p.condition.empty());
      }
    }
  }
}

TEST(OpGraphSchema, PointwisePortsFollowTheArity) {
  EXPECT_EQ(find_op("exp")->inputs.size(), 1u);
  EXPECT_EQ(find_op("exp")->inputs[0].name, "a");
  const OpSchema* add = find_op("add");
  ASSERT_EQ(add->inputs.size(), 2u);
  EXPECT_EQ(add->inputs[0].name, "a");
  EXPECT_EQ(add->inputs[1].name, "b");
  const OpSchema* where = find_op("where");
  ASSERT_EQ(where->inputs.size(), 3u);
  EXPECT_EQ(where->inputs[0].name, "cond");
  EXPECT_EQ(where->inputs[1].name, "a");
  EXPECT_EQ(where->inputs[2].name, "b");
  for (const OpSchema* s : all_ops()) {
    if (s->kind != OpKind::pointwise) continue;
    ASSERT_EQ(s->outputs.size(), 1u) << s->name;
    EXPECT_EQ(s->outputs[0].name, "out");
  }
}

// ---- Pointwise

TEST(OpGraphPointwise, EveryPointwiseOpBroadcastsAndYieldsItsDtype) {
  for (const OpSchema* s : all_ops()) {
    if (s->kind != OpKind::pointwise) continue;
    SCOPED_TRACE(s->name);
    Graph g;
    Ports p;
    // Ports alternate shapes [2, 1] and [3]: the result broadcasts to [2, 3].
    for (std::size_t i = 0; i < s->inputs.size(); ++i)
      p.emplace_back(s->inputs[i].name, in(g, i % 2 ? Dims{3} : Dims{2, 1}));
    Attrs attrs;
    if (s->name == "cast") attrs.emplace_back("dtype", DType::f16);
    const auto outs = g.op(s->name, p, attrs);
    ASSERT_EQ(outs.count("out"), 1u);
    const Tensor out = outs.at("out");
    const bool one_input = s->inputs.size() == 1;
    EXPECT_EQ(out.dims(), one_input ? Dims({2, 1}) : Dims({2, 3}));
    const bool boolean = s->name.rfind("cmp_", 0) == 0 || s->name.rfind("logical_", 0) == 0;
    EXPECT_EQ(out.dtype(), boolean ? DType::boolean : s->name == "cast" ? DType::f16 : DType::f32);
    EXPECT_EQ(out.producer(), 0);
    EXPECT_TRUE(out.is_virtual());
  }
}

TEST(OpGraphPointwise, BroadcastingFollowsNumpy) {
  Graph g;
  Tensor a = in(g, {4, 1, 3}, DType::f16);
  Tensor b = in(g, {5, 1}, DType::f16);
  Tensor c = g.pointwise("add", a, b);
  EXPECT_EQ(c.dims(), Dims({4, 5, 3}));
  EXPECT_EQ(c.dtype(), DType::f16);
  EXPECT_EQ(c.strides(), Dims({15, 3, 1}));
  Tensor scalar = in(g, {});
  EXPECT_EQ(g.pointwise("mul", in(g, {7}), scalar).dims(), Dims({7}));
  EXPECT_EQ(g.pointwise("mul", scalar, in(g, {2, 7})).dims(), Dims({2, 7}));
  EXPECT_EQ(g.pointwise("sub", scalar, scalar).dims(), Dims({}));
  // Integers go through ops that accept any dtype and keep a's dtype.
  Tensor i = in(g, {6}, DType::i32);
  EXPECT_EQ(g.pointwise("add", i, i).dtype(), DType::i32);
  EXPECT_EQ(g.pointwise("relu", i).dtype(), DType::i32);
}

TEST(OpGraphPointwise, MismatchedShapesNameThePort) {
  Graph g;
  Tensor a = in(g, {4, 3});
  Tensor b = in(g, {5});
  expect_rejected(g, [&] { g.pointwise("add", a, b); },
                  {"add", "b dims [5]", "does not broadcast with [4,3]"});
}

TEST(OpGraphPointwise, ComparisonsAndLogicYieldBoolean) {
  Graph g;
  Tensor a = in(g, {2, 3});
  Tensor b = in(g, {3});
  for (const char* op :
       {"cmp_eq", "cmp_neq", "cmp_lt", "cmp_le", "cmp_gt", "cmp_ge", "logical_and", "logical_or"}) {
    Tensor c = g.pointwise(op, a, b);
    EXPECT_EQ(c.dtype(), DType::boolean) << op;
    EXPECT_EQ(c.dims(), Dims({2, 3})) << op;
  }
  EXPECT_EQ(g.pointwise("logical_not", a).dtype(), DType::boolean);
  EXPECT_EQ(g.pointwise("add", a, b).dtype(), DType::f32);
}

TEST(OpGraphPointwise, CastTakesTheDtypeAttributeAsDtypeOrName) {
  Graph g;
  Tensor a = in(g, {2, 3});
  Tensor c = g.pointwise("cast", a, {{"dtype", DType::i32}});
  EXPECT_EQ(c.dtype(), DType::i32);
  EXPECT_EQ(c.dims(), Dims({2, 3}));
  Tensor d = g.pointwise("cast", a, {{"dtype", "bf16"}});
  EXPECT_EQ(d.dtype(), DType::bf16);
  EXPECT_EQ(g.nodes().back().attr("dtype").as_dtype("dtype"), DType::bf16);
  expect_rejected(g, [&] { g.pointwise("cast", a); }, {"cast", "attribute 'dtype' is required"});
  // An unknown dtype name is reported with the op and attribute it was given for.
  expect_rejected(g,
                  [&] {
                    g.pointwise("cast", a, {{"dtype", "f128"}});
                  },
                  {"cast: attribute dtype", "unknown name 'f128'"});
  expect_rejected(g,
                  [&] {
                    g.pointwise("cast", a, {{"dtype", 3}});
                  },
                  {"cast", "attribute 'dtype' must be dtype, got integer"});
}

TEST(OpGraphPointwise, FloatingOnlyOpsRejectIntegers) {
  Graph g;
  Tensor i = in(g, {4}, DType::i64, "ids");
  expect_rejected(g, [&] { g.pointwise("exp", i); },
                  {"exp", "input 'a'", "'ids'", "i64", "a floating dtype"});
  expect_op_rejected(g, "pow", {{"a", in(g, {4})}, {"b", i}}, {},
                     {"pow", "input 'b'", "a floating dtype"});
}

TEST(OpGraphPointwise, WhereBroadcastsAllThreeAndKeepsAsDtype) {
  Graph g;
  Tensor cond = in(g, {4, 1}, DType::boolean);
  Tensor a = in(g, {1, 3}, DType::bf16);
  Tensor b = in(g, {3}, DType::bf16);
  Tensor w = g.where(cond, a, b);
  EXPECT_EQ(w.dims(), Dims({4, 3}));
  EXPECT_EQ(w.dtype(), DType::bf16);
  const Node n = g.nodes().back();
  EXPECT_EQ(n.op(), "where");
  EXPECT_EQ(port_names(n.inputs()), (std::vector<std::string>{"cond", "a", "b"}));
  EXPECT_EQ(n.input("cond"), cond);
  EXPECT_EQ(n.input("a"), a);
  EXPECT_EQ(n.input("b"), b);
  expect_op_rejected(g, "where", {{"cond", in(g, {5, 2}, DType::boolean)}, {"a", a}, {"b", b}}, {},
                     {"where", "cond dims [5,2]", "does not broadcast with [1,3]"});
}

TEST(OpGraphPointwise, NodesListInputsInSchemaOrderAndNameTheirOutputs) {
  Graph g("pw");
  Tensor x = in(g, {3}, DType::f32, "x");
  Tensor y = in(g, {3}, DType::f32, "y");
  const auto outs = g.op("sub", {{"b", y}, {"a", x}}, {}, "diff");
  const Node n = g.nodes().at(0);
  EXPECT_EQ(n.name(), "diff");
  EXPECT_EQ(n.index(), 0);
  EXPECT_EQ(&n.schema(), find_op("sub"));
  EXPECT_EQ(port_names(n.inputs()), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(n.input("a"), x);
  EXPECT_EQ(n.input("b"), y);
  EXPECT_FALSE(n.input("cond").defined());
  EXPECT_FALSE(n.output("nope").defined());
  EXPECT_EQ(n.output("out"), outs.at("out"));
  EXPECT_EQ(outs.at("out").name(), "diff.out");
  EXPECT_TRUE(n.attrs().empty());
  // An unnamed node is named after its op and position.
  g.pointwise("exp", outs.at("out"));
  EXPECT_EQ(g.nodes().at(1).name(), "exp_1");
  EXPECT_EQ(g.nodes().at(1).output("out").name(), "exp_1.out");
  EXPECT_EQ(g.nodes().at(1).output("out").producer(), 1);
  EXPECT_EQ(x.producer(), -1);
  EXPECT_EQ(g.name(), "pw");
}

// ---- Structured ops

TEST(OpGraphMatmul, BatchDimsBroadcastAndBiasIsOptional) {
  Graph g;
  Tensor a = in(g, {2, 1, 4, 8}, DType::bf16);
  Tensor b = in(g, {3, 8, 5}, DType::bf16);
  Tensor c = g.matmul(a, b);
  EXPECT_EQ(c.dims(), Dims({2, 3, 4, 5}));
  EXPECT_EQ(c.dtype(), DType::bf16);
  EXPECT_EQ(port_names(g.nodes().back().inputs()), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(port_names(g.nodes().back().outputs()), (std::vector<std::string>{"c"}));

  Tensor bias = in(g, {5}, DType::bf16);
  Tensor cb = g.matmul(a, b, bias);
  EXPECT_EQ(cb.dims(), Dims({2, 3, 4, 5}));
  EXPECT_EQ(g.nodes().back().input("bias"), bias);
  EXPECT_EQ(g.matmul(a, b, in(g, {3, 4, 1})).dims(), Dims({2, 3, 4, 5}));
  EXPECT_EQ(g.matmul(in(g, {4, 8}), in(g, {8, 5})).dims(), Dims({4, 5}));
}

TEST(OpGraphMatmul, BadShapesNameThePort) {
  Graph g;
  Tensor a = in(g, {2, 4, 8});
  Tensor b = in(g, {8, 5});
  expect_op_rejected(g, "matmul", {{"a", in(g, {8})}, {"b", b}}, {},
                     {"matmul", "a dims [8]", "needs at least 2 dims"});
  expect_op_rejected(g, "matmul", {{"a", a}, {"b", in(g, {5})}}, {},
                     {"matmul", "b dims [5]", "needs at least 2 dims"});
  expect_op_rejected(g, "matmul", {{"a", a}, {"b", in(g, {7, 5})}}, {},
                     {"matmul", "b dims [7,5]", "inner dimension must equal a's last dimension 8"});
  expect_op_rejected(g, "matmul", {{"a", a}, {"b", in(g, {3, 8, 5})}}, {},
                     {"matmul", "b dims [3,8,5]", "does not broadcast with [2]"});
  expect_op_rejected(g, "matmul", {{"a", a}, {"b", b}, {"bias", in(g, {7})}}, {},
                     {"matmul", "bias dims [7]", "broadcast"});
  expect_op_rejected(g, "matmul", {{"a", a}, {"b", b}, {"bias", in(g, {3, 2, 4, 5})}}, {},
                     {"matmul", "bias", "must broadcast to the result [2,4,5]"});
  expect_op_rejected(g, "matmul", {{"a", a}, {"b", in(g, {8, 5}, DType::i32, "ib")}}, {},
                     {"matmul", "input 'b' ('ib') is i32; it must be a floating dtype"});
}

TEST(OpGraphReduction, AxesKeepdimNegativeAndEmpty) {
  Graph g;
  Tensor x = in(g, {2, 3, 4}, DType::f16);
  auto reduce = [&](const Attrs& attrs) { return g.op("reduction", {{"x", x}}, attrs).at("y"); };
  Tensor y = reduce({{"mode", "sum"}, {"axes", std::vector<int64_t>{1}}});
  EXPECT_EQ(y.dims(), Dims({2, 4}));
  EXPECT_EQ(y.dtype(), DType::f16);
  EXPECT_EQ(reduce({{"mode", "max"}, {"axes", std::vector<int64_t>{1}}, {"keepdim", true}}).dims(),
            Dims({2, 1, 4}));
  EXPECT_EQ(reduce({{"mode", "mean"}, {"axes", std::vector<int64_t>{-1, 0}}}).dims(), Dims({3}));
  EXPECT_EQ(
      reduce({{"mode", "mean"}, {"axes", std::vector<int64_t>{-1}}, {"keepdim", true}}).dims(),
      Dims({2, 3, 1}));
  // Empty axes (the default) reduce everything.
  EXPECT_EQ(reduce({{"mode", "l2"}}).dims(), Dims({}));
  EXPECT_EQ(reduce({{"mode", "amax"}, {"axes", std::vector<int64_t>{}}}).dims(), Dims({}));
  EXPECT_EQ(reduce({{"mode", "prod"}, {"keepdim", true}}).dims(), Dims({1, 1, 1}));
  const Node n = g.nodes().back();
  EXPECT_EQ(n.attr("mode").as_text("mode"), "prod");
  EXPECT_TRUE(n.attr("axes").as_ints("axes").empty());  // the default applied
  EXPECT_TRUE(n.attr("keepdim").as_bool("keepdim"));
  // Any dtype is accepted.
  EXPECT_EQ(g.op("reduction", {{"x", in(g, {5}, DType::i32)}}, {{"mode", "min"}}).at("y").dtype(),
            DType::i32);
}

TEST(OpGraphReduction, BadAttributesAreNamed) {
  Graph g;
  Tensor x = in(g, {2, 3, 4});
  auto reduce = [&](const Attrs& attrs) { g.op("reduction", {{"x", x}}, attrs); };
  expect_rejected(g, [&] { reduce({}); }, {"reduction", "attribute 'mode' is required"});
  expect_rejected(g, [&] { reduce({{"mode", "median"}}); }, {"reduction", "mode 'median'"});
  expect_rejected(g,
                  [&] {
                    reduce({{"mode", "sum"}, {"axes", std::vector<int64_t>{3}}});
                  },
                  {"reduction", "attribute axes = 3 is outside [-3, 3)"});
  expect_rejected(g,
                  [&] {
                    reduce({{"mode", "sum"}, {"axes", std::vector<int64_t>{-4}}});
                  },
                  {"attribute axes = -4 is outside"});
  expect_rejected(g,
                  [&] {
                    reduce({{"mode", "sum"}, {"axes", std::vector<int64_t>{1, -2}}});
                  },
                  {"reduction", "names axis -2 twice"});
  expect_rejected(g,
                  [&] {
                    reduce({{"mode", "sum"}, {"axes", 1}});
                  },
                  {"reduction", "attribute 'axes' must be integer list, got integer"});
  expect_rejected(g,
                  [&] {
                    reduce({{"mode", "sum"}, {"mode", "max"}});
                  },
                  {"reduction", "attribute 'mode' given twice"});
}

TEST(OpGraphSoftmax, KeepsTheShapeAndChecksTheAxis) {
  Graph g;
  Tensor x = in(g, {4, 10}, DType::f16);
  Tensor y = g.op("softmax", {{"x", x}}).at("y");
  EXPECT_EQ(y.dims(), Dims({4, 10}));
  EXPECT_EQ(y.dtype(), DType::f16);
  EXPECT_EQ(g.nodes().back().attr("axis").as_int("axis"), -1);
  EXPECT_FALSE(g.nodes().back().attr("log").as_bool("log"));
  EXPECT_EQ(g.op("softmax", {{"x", x}}, {{"axis", 0}, {"log", true}}).at("y").dims(),
            Dims({4, 10}));
  expect_rejected(g,
                  [&] {
                    g.op("softmax", {{"x", x}}, {{"axis", 2}});
                  },
                  {"softmax", "attribute axis = 2 is outside [-2, 2)"});
  expect_op_rejected(g, "softmax", {{"x", in(g, {})}}, {}, {"softmax", "at least one dimension"});
  expect_rejected(g,
                  [&] {
                    g.op("softmax", {{"x", x}}, {{"axis", 1.5}});
                  },
                  {"softmax", "attribute 'axis' must be integer, got real"});
}

TEST(OpGraphNorm, LayerNormStatisticsOnlyWhenTraining) {
  Graph g;
  Tensor x = in(g, {2, 5, 16}, DType::bf16);
  Tensor scale = in(g, {16}, DType::bf16);
  Tensor bias = in(g, {16}, DType::bf16);
  auto outs = g.op("layer_norm", {{"x", x}, {"scale", scale}, {"bias", bias}});
  EXPECT_EQ(keys(outs), (std::vector<std::string>{"y"}));
  EXPECT_EQ(outs.at("y").dims(), Dims({2, 5, 16}));
  EXPECT_EQ(outs.at("y").dtype(), DType::bf16);
  EXPECT_EQ(g.nodes().back().outputs().size(), 1u);
  EXPECT_FALSE(g.nodes().back().output("mean").defined());

  outs = g.op("layer_norm", {{"x", x}, {"scale", scale}}, {{"training", true}});
  EXPECT_EQ(keys(outs), (std::vector<std::string>{"inv_variance", "mean", "y"}));
  EXPECT_EQ(outs.at("mean").dims(), Dims({2, 5}));
  EXPECT_EQ(outs.at("mean").dtype(), DType::f32);
  EXPECT_EQ(outs.at("inv_variance").dims(), Dims({2, 5}));
  EXPECT_EQ(port_names(g.nodes().back().outputs()),
            (std::vector<std::string>{"y", "mean", "inv_variance"}));
  EXPECT_EQ(port_names(g.nodes().back().inputs()), (std::vector<std::string>{"x", "scale"}));

  // Two normalized dims; f64 keeps f64 statistics.
  Tensor x64 = in(g, {3, 4, 8}, DType::f64);
  outs = g.op("layer_norm", {{"x", x64}, {"scale", in(g, {4, 8}, DType::f64)}},
              {{"normalized_ndim", 2}, {"training", true}, {"epsilon", 0}});
  EXPECT_EQ(outs.at("mean").dims(), Dims({3}));
  EXPECT_EQ(outs.at("mean").dtype(), DType::f64);
}

TEST(OpGraphNorm, RmsNormStatisticsOnlyWhenTraining) {
  Graph g;
  Tensor x = in(g, {6, 32});
  auto outs = g.op("rms_norm", {{"x", x}});
  EXPECT_EQ(keys(outs), (std::vector<std::string>{"y"}));
  outs = g.op("rms_norm", {{"x", x}, {"scale", in(g, {32})}}, {{"training", true}});
  EXPECT_EQ(keys(outs), (std::vector<std::string>{"inv_rms", "y"}));
  EXPECT_EQ(outs.at("inv_rms").dims(), Dims({6}));
  EXPECT_EQ(outs.at("inv_rms").dtype(), DType::f32);
  EXPECT_EQ(outs.at("y").dims(), Dims({6, 32}));
}

TEST(OpGraphNorm, BadShapesAndAttributesAreNamed) {
  Graph g;
  Tensor x = in(g, {6, 32});
  for (const char* op : {"layer_norm", "rms_norm"}) {
    SCOPED_TRACE(op);
    expect_op_rejected(g, op, {{"x", x}, {"scale", in(g, {16})}}, {},
                       {op, "scale dims [16]", "expected the normalized dims of x = [32]"});
    expect_op_rejected(g, op, {{"x", x}, {"bias", in(g, {6, 32})}}, {}, {op, "bias dims [6,32]"});
    expect_rejected(g,
                    [&] {
                      g.op(op, {{"x", x}}, {{"normalized_ndim", 3}});
                    },
                    {op, "normalized_ndim = 3 must be in [1, rank]"});
    expect_rejected(g,
                    [&] {
                      g.op(op, {{"x", x}}, {{"normalized_ndim", 0}});
                    },
                    {"normalized_ndim = 0"});
    expect_rejected(g,
                    [&] {
                      g.op(op, {{"x", x}}, {{"epsilon", -1.0}});
                    },
                    {op, "epsilon must be >= 0"});
    expect_rejected(g,
                    [&] {
                      g.op(op, {{"x", x}}, {{"training", 1}});
                    },
                    {op, "attribute 'training' must be bool, got integer"});
  }
}

TEST(OpGraphEmbedding, AppendsTheRowWidthToTheIdsDims) {
  Graph g;
  Tensor table = in(g, {100, 64}, DType::bf16, "table");
  Tensor ids = in(g, {4, 7}, DType::i32, "ids");
  Tensor y = g.op("embedding", {{"table", table}, {"ids", ids}}).at("y");
  EXPECT_EQ(y.dims(), Dims({4, 7, 64}));
  EXPECT_EQ(y.dtype(), DType::bf16);
  expect_op_rejected(g, "embedding", {{"table", table}, {"ids", in(g, {4}, DType::f32, "fids")}},
                     {}, {"embedding", "input 'ids'", "'fids'", "an integer dtype"});
  expect_op_rejected(g, "embedding", {{"table", in(g, {100, 64, 2})}, {"ids", ids}}, {},
                     {"embedding", "table dims [100,64,2]", "expected [V, D]"});
  expect_rejected(g,
                  [&] {
                    g.op("embedding", {{"table", table}});
                  },
                  {"embedding", "input 'ids' is required"});
}

TEST(OpGraphCrossEntropy, ReductionDecidesTheLossDimsAndLseIsOptional) {
  Graph g;
  Tensor logits = in(g, {8, 50}, DType::bf16);
  Tensor targets = in(g, {8}, DType::i64);
  Ports p = {{"logits", logits}, {"targets", targets}};
  auto outs = g.op("cross_entropy", p);
  EXPECT_EQ(keys(outs), (std::vector<std::string>{"loss"}));
  EXPECT_EQ(outs.at("loss").dims(), Dims({}));  // mean by default
  EXPECT_EQ(outs.at("loss").dtype(), DType::f32);
  EXPECT_EQ(g.nodes().back().attr("reduction").as_text("reduction"), "mean");
  EXPECT_EQ(g.nodes().back().attr("ignore_index").as_int("ignore_index"), -100);

  outs = g.op("cross_entropy", p, {{"reduction", "none"}, {"output_lse", true}});
  EXPECT_EQ(keys(outs), (std::vector<std::string>{"loss", "lse"}));
  EXPECT_EQ(outs.at("loss").dims(), Dims({8}));
  EXPECT_EQ(outs.at("lse").dims(), Dims({8}));
  EXPECT_EQ(outs.at("lse").dtype(), DType::f32);
  EXPECT_EQ(g.op("cross_entropy", p, {{"reduction", "sum"}}).at("loss").dims(), Dims({}));

  expect_op_rejected(g, "cross_entropy", with(p, "targets", in(g, {7}, DType::i64)), {},
                     {"cross_entropy", "targets dims [7]", "expected [N] = [8]"});
  expect_op_rejected(g, "cross_entropy", with(p, "logits", in(g, {8})), {},
                     {"cross_entropy", "logits dims [8]", "expected [N, C]"});
  expect_rejected(g,
                  [&] {
                    g.op("cross_entropy", p, {{"reduction", "avg"}});
                  },
                  {"cross_entropy", "reduction 'avg'"});
  expect_rejected(g,
                  [&] {
                    g.op("cross_entropy", p, {{"label_smoothing", 1.5}});
                  },
                  {"cross_entropy", "label_smoothing must be in [0, 1]"});
  expect_op_rejected(g, "cross_entropy", with(p, "targets", in(g, {8})), {},
                     {"cross_entropy", "input 'targets'", "an integer dtype"});
}

// ---- Attention

struct SdpaThd {
  Tensor q, k, v, cu_q, cu_kv;
  Ports ports() const {
    return {{"q", q}, {"k", k}, {"v", v}, {"cu_seqlens_q", cu_q}, {"cu_seqlens_kv", cu_kv}};
  }
};
// q [12, 8, 64], k [20, 2, 64], v [20, 2, 32], 3 sequences.
SdpaThd sdpa_thd(Graph& g, DType dtype = DType::f32) {
  return {in(g, {12, 8, 64}, dtype, "q"), in(g, {20, 2, 64}, dtype, "k"),
          in(g, {20, 2, 32}, dtype, "v"), in(g, {4}, DType::i32, "cu_q"),
          in(g, {4}, DType::i32, "cu_kv")};
}

TEST(OpGraphSdpa, ThdWithCuSeqlensAndGroupedQueries) {
  Graph g;
  const SdpaThd s = sdpa_thd(g, DType::bf16);
  auto outs = g.op("sdpa", s.ports(), {{"causal", true}});
  EXPECT_EQ(keys(outs), (std::vector<std::string>{"o"}));
  EXPECT_EQ(outs.at("o").dims(), Dims({12, 8, 32}));  // v's head dim
  EXPECT_EQ(outs.at("o").dtype(), DType::bf16);
  const Node n = g.nodes().back();
  EXPECT_FALSE(n.has_attr("scale"));  // derived by the op when absent
  EXPECT_TRUE(n.attr("causal").as_bool("causal"));
  EXPECT_TRUE(n.flag("causal"));
  EXPECT_FALSE(n.flag("no_such_flag"));  // absent: false, no throw
  expect_throw_with<InvalidArgument>([&] { n.attr("scale"); }, {"scale", "no default"});
  EXPECT_EQ(port_names(n.inputs()),
            (std::vector<std::string>{"q", "k", "v", "cu_seqlens_q", "cu_seqlens_kv"}));
}

TEST(OpGraphSdpa, GenerateStatsAddsTheLogsumexpOutput) {
  Graph g;
  const SdpaThd s = sdpa_thd(g, DType::f16);
  auto outs = g.op("sdpa", s.ports(), {{"generate_stats", true}, {"scale", 0.125}});
  EXPECT_EQ(keys(outs), (std::vector<std::string>{"o", "stats"}));
  EXPECT_EQ(outs.at("stats").dims(), Dims({12, 8}));
  EXPECT_EQ(outs.at("stats").dtype(), DType::f32);
  EXPECT_EQ(port_names(g.nodes().back().outputs()), (std::vector<std::string>{"o", "stats"}));
  EXPECT_EQ(g.nodes().back().attr("scale").as_real("scale"), 0.125);
  // An integer scale reads as a real.
  EXPECT_NO_THROW(g.op("sdpa", s.ports(), {{"scale", 1}}));
}

TEST(OpGraphSdpa, DenseBshdWithoutCuSeqlens) {
  Graph g;
  Tensor q = in(g, {2, 16, 8, 64});
  Tensor k = in(g, {2, 24, 4, 64});
  Tensor v = in(g, {2, 24, 4, 64});
  auto outs = g.op("sdpa", {{"q", q}, {"k", k}, {"v", v}}, {{"generate_stats", true}});
  EXPECT_EQ(outs.at("o").dims(), Dims({2, 16, 8, 64}));
  EXPECT_EQ(outs.at("stats").dims(), Dims({2, 16, 8}));
  EXPECT_EQ(g.nodes().back().inputs().size(), 3u);
}

TEST(OpGraphSdpa, BadShapesAreNamed) {
  Graph g;
  const SdpaThd s = sdpa_thd(g);
  const Ports p = s.ports();
  const std::string op = "sdpa";
  // Rank follows the layout: THD with cu_seqlens, BSHD without.
  expect_op_rejected(g, op, without(without(p, "cu_seqlens_q"), "cu_seqlens_kv"), {},
                     {"sdpa", "q dims [12,8,64]", "[B, S, heads, dim]"});
  expect_op_rejected(g, op, with(p, "q", in(g, {1, 12, 8, 64})), {},
                     {"sdpa", "q dims [1,12,8,64]", "[T, heads, dim]"});
  expect_op_rejected(g, op, without(p, "cu_seqlens_kv"), {},
                     {"sdpa", "cu_seqlens_q", "cu_seqlens_q and cu_seqlens_kv go together"});
  expect_op_rejected(g, op, without(p, "cu_seqlens_q"), {},
                     {"sdpa", "cu_seqlens_kv", "go together"});
  expect_op_rejected(g, op, with(p, "cu_seqlens_kv", in(g, {5}, DType::i32)), {},
                     {"sdpa", "cu_seqlens_kv dims [5]", "as many sequences as cu_seqlens_q"});
  expect_op_rejected(g, op, with(p, "cu_seqlens_q", in(g, {2, 2}, DType::i32)), {},
                     {"sdpa", "cu_seqlens_q dims [2,2]", "[B+1]"});
  expect_op_rejected(g, op, with(p, "cu_seqlens_q", in(g, {4}, DType::f32, "fcu")), {},
                     {"sdpa", "input 'cu_seqlens_q'", "an integer dtype"});
  expect_op_rejected(g, op, with(p, "k", in(g, {20, 2, 32})), {},
                     {"sdpa", "k dims [20,2,32]", "head dim must equal q's 64"});
  expect_op_rejected(g, op, with(p, "v", in(g, {20, 4, 32})), {},
                     {"sdpa", "v dims [20,4,32]", "heads must equal k's 2"});
  expect_op_rejected(g, op, with(p, "v", in(g, {21, 2, 32})), {},
                     {"sdpa", "v dims [21,2,32]", "leading dims must equal k's"});
  // Grouped queries: k's heads must divide q's.
  expect_op_rejected(g, op, with(with(p, "k", in(g, {20, 3, 64})), "v", in(g, {20, 3, 32})), {},
                     {"sdpa", "k dims [20,3,64]", "heads must divide q's heads 8"});
  expect_op_rejected(g, op, p, {{"scale", 0.0}}, {"sdpa", "scale must be > 0"});
  expect_op_rejected(g, op, p, {{"scale", -1}}, {"sdpa", "scale must be > 0"});
  expect_op_rejected(g, op, p, {{"scale", "auto"}},
                     {"sdpa", "attribute 'scale' must be real, got text"});
  // Dense: batches agree.
  Tensor q = in(g, {2, 16, 8, 64});
  Tensor kv = in(g, {3, 24, 8, 64});
  expect_op_rejected(g, op, {{"q", q}, {"k", kv}, {"v", kv}}, {},
                     {"sdpa", "k dims [3,24,8,64]", "batch must equal q's 2"});
}

TEST(OpGraphSdpa, MaxSeqlenBoundsTheThdSequencesOnly) {
  Graph g;
  const SdpaThd s = sdpa_thd(g, DType::bf16);
  g.op("sdpa", s.ports(), {});
  EXPECT_EQ(g.nodes().back().attr("max_seqlen_q").as_int("max_seqlen_q"), 0);  // none
  EXPECT_EQ(g.nodes().back().attr("max_seqlen_kv").as_int("max_seqlen_kv"), 0);
  g.op("sdpa", s.ports(), {{"max_seqlen_q", 4}, {"max_seqlen_kv", 64}});
  EXPECT_EQ(g.nodes().back().attr("max_seqlen_kv").as_int("max_seqlen_kv"), 64);
  expect_op_rejected(g, "sdpa", s.ports(), {{"max_seqlen_q", -1}},
                     {"sdpa", "cu_seqlens_q", "max_seqlen_q must be >= 0, got -1"});
  expect_op_rejected(g, "sdpa", s.ports(), {{"max_seqlen_kv", 2.5}},
                     {"sdpa", "attribute 'max_seqlen_kv' must be integer, got real"});
  Tensor q = in(g, {2, 16, 8, 64});
  expect_op_rejected(g, "sdpa", {{"q", q}, {"k", q}, {"v", q}}, {{"max_seqlen_q", 8}},
                     {"sdpa", "max_seqlen_q bounds THD sequences", "dense form"});
}

TEST(OpGraphSdpa, BackwardGivesGradientsShapedLikeTheInputs) {
  Graph g;
  const SdpaThd s = sdpa_thd(g, DType::bf16);
  auto fwd = g.op("sdpa", s.ports(), {{"generate_stats", true}, {"causal", true}});
  Tensor d_o = in(g, {12, 8, 32}, DType::bf16, "d_o");
  Ports p = s.ports();
  p.emplace_back("o", fwd.at("o"));
  p.emplace_back("d_o", d_o);
  p.emplace_back("stats", fwd.at("stats"));
  auto outs = g.op("sdpa_bwd", p, {{"causal", true}});
  EXPECT_EQ(keys(outs), (std::vector<std::string>{"dk", "dq", "dv"}));
  EXPECT_EQ(outs.at("dq").dims(), s.q.dims());
  EXPECT_EQ(outs.at("dk").dims(), s.k.dims());
  EXPECT_EQ(outs.at("dv").dims(), s.v.dims());
  EXPECT_EQ(outs.at("dq").dtype(), DType::bf16);
  EXPECT_EQ(port_names(g.nodes().back().inputs()),
            (std::vector<std::string>{"q", "k", "v", "o", "d_o", "stats", "cu_seqlens_q",
                                      "cu_seqlens_kv"}));

  expect_op_rejected(
      g, "sdpa_bwd", with(p, "stats", in(g, {12, 8, 1})), {},
      {"sdpa_bwd", "stats dims [12,8,1]", "expected q's dims without the head dim = [12,8]"});
  expect_op_rejected(g, "sdpa_bwd", with(p, "o", in(g, {12, 8, 64})), {},
                     {"sdpa_bwd", "o dims [12,8,64]", "= [12,8,32]"});
  expect_op_rejected(g, "sdpa_bwd", with(p, "d_o", in(g, {12, 4, 32})), {},
                     {"sdpa_bwd", "d_o dims [12,4,32]", "expected o's dims"});
  expect_op_rejected(g, "sdpa_bwd", without(p, "stats"), {},
                     {"sdpa_bwd", "input 'stats' is required"});
  expect_op_rejected(g, "sdpa_bwd", p, {{"generate_stats", true}},
                     {"sdpa_bwd", "unknown attribute 'generate_stats'", "scale, causal"});
  expect_op_rejected(g, "sdpa_bwd", with(p, "k", in(g, {20, 2, 16})), {},
                     {"sdpa_bwd", "k dims [20,2,16]", "head dim"});
}

// ---- Linear attention

struct DeltaDims {
  int64_t t = 10, h = 2, hv = 4, k = 8, v = 16, b = 3;
};

// Required inputs of `rule` (gdn, kda, gdn2), forward or backward.
Ports delta_ports(Graph& g, const std::string& rule, bool backward, const DeltaDims& d = {}) {
  Ports p;
  p.emplace_back("q", in(g, {d.t, d.h, d.k}, DType::bf16, "q"));
  p.emplace_back("k", in(g, {d.t, d.h, d.k}, DType::bf16, "k"));
  p.emplace_back("v", in(g, {d.t, d.hv, d.v}, DType::bf16, "v"));
  p.emplace_back("g",
                 in(g, rule == "gdn" ? Dims{d.t, d.hv} : Dims{d.t, d.hv, d.k}, DType::f32, "g"));
  if (rule == "gdn2") {
    p.emplace_back("b", in(g, {d.t, d.hv, d.k}, DType::bf16, "b"));
    p.emplace_back("w", in(g, {d.t, d.hv, d.v}, DType::bf16, "w"));
  } else {
    p.emplace_back("beta", in(g, {d.t, d.hv}, DType::bf16, "beta"));
  }
  p.emplace_back("cu_seqlens", in(g, {d.b + 1}, DType::i32, "cu"));
  if (backward) p.emplace_back("d_o", in(g, {d.t, d.hv, d.v}, DType::bf16, "d_o"));
  return p;
}

class OpGraphDelta : public ::testing::TestWithParam<std::string> {
 protected:
  const std::string& rule() const { return GetParam(); }
  std::string bwd() const { return rule() + "_bwd"; }
};

TEST_P(OpGraphDelta, ForwardFinalStateOnlyWhenAsked) {
  Graph g;
  const DeltaDims d;
  const Ports p = delta_ports(g, rule(), false);
  auto outs = g.op(rule(), p);
  EXPECT_EQ(keys(outs), (std::vector<std::string>{"o"}));
  EXPECT_EQ(outs.at("o").dims(), Dims({d.t, d.hv, d.v}));
  EXPECT_EQ(outs.at("o").dtype(), DType::bf16);  // v's dtype

  outs = g.op(rule(), p, {{"output_final_state", true}, {"scale", 0.5}});
  EXPECT_EQ(keys(outs), (std::vector<std::string>{"final_state", "o"}));
  EXPECT_EQ(outs.at("final_state").dims(), Dims({d.b, d.hv, d.k, d.v}));
  EXPECT_EQ(outs.at("final_state").dtype(), DType::f32);

  // With an initial state, the final state takes its dtype.
  Tensor h0 = in(g, {d.b, d.hv, d.k, d.v}, DType::f16, "h0");
  outs = g.op(rule(), with(p, "initial_state", h0), {{"output_final_state", true}});
  EXPECT_EQ(outs.at("final_state").dims(), Dims({d.b, d.hv, d.k, d.v}));
  EXPECT_EQ(outs.at("final_state").dtype(), DType::f16);
  EXPECT_EQ(g.nodes().back().input("initial_state"), h0);
}

TEST_P(OpGraphDelta, BackwardOutputsFollowTheWiredInputs) {
  Graph g;
  const DeltaDims d;
  const Ports p = delta_ports(g, rule(), true);
  auto outs = g.op(bwd(), p);
  std::vector<std::string> want = {"dg", "dk", "dq", "dv"};
  if (rule() == "gdn2") {
    want.push_back("db");
    want.push_back("dw");
  } else {
    want.push_back("dbeta");
  }
  std::sort(want.begin(), want.end());
  EXPECT_EQ(keys(outs), want);
  for (const auto& [port, t] : p) {
    if (port == "cu_seqlens" || port == "d_o") continue;
    ASSERT_EQ(outs.count("d" + port), 1u) << port;
    EXPECT_EQ(outs.at("d" + port).dims(), t.dims()) << port;
  }
  EXPECT_EQ(outs.at("dq").dtype(), DType::bf16);
  EXPECT_EQ(outs.at("dg").dtype(), DType::f32);
  EXPECT_EQ(outs.count("d_initial_state"), 0u);

  // d_initial_state exists iff initial_state is wired; d_final_state adds no output.
  const Dims state = {d.b, d.hv, d.k, d.v};
  Ports ps = with(p, "initial_state", in(g, state, DType::bf16, "h0"));
  ps.emplace_back("d_final_state", in(g, state, DType::f32, "dht"));
  outs = g.op(bwd(), ps);
  ASSERT_EQ(outs.count("d_initial_state"), 1u);
  EXPECT_EQ(outs.at("d_initial_state").dims(), state);
  EXPECT_EQ(outs.at("d_initial_state").dtype(), DType::f32);
  EXPECT_EQ(outs.size(), want.size() + 1);
  EXPECT_EQ(outs.count("d_a_log"), 0u);
  EXPECT_EQ(outs.count("d_dt_bias"), 0u);
  outs = g.op(bwd(), with(p, "d_final_state", in(g, state)));
  EXPECT_EQ(outs.size(), want.size());
}

TEST_P(OpGraphDelta, BadShapesAreNamed) {
  Graph g;
  const DeltaDims d;
  const std::string op = rule();
  const Ports p = delta_ports(g, op, false);
  expect_op_rejected(g, op, with(p, "q", in(g, {d.t, d.h * d.k})), {},
                     {op + ": q dims [10,16]", "expected [T, H, K]"});
  expect_op_rejected(g, op, with(p, "k", in(g, {d.t, d.h, d.k + 1})), {},
                     {op + ": k dims [10,2,9]", "expected q's dims [T, H, K] = [10,2,8]"});
  expect_op_rejected(g, op, with(p, "v", in(g, {d.t + 1, d.hv, d.v})), {},
                     {op + ": v dims [11,4,16]", "tokens must equal q's 10"});
  expect_op_rejected(g, op, with(p, "v", in(g, {d.t, 3, d.v})), {},
                     {op + ": v dims [10,3,16]", "heads must be a multiple of q's 2"});
  expect_op_rejected(g, op, with(p, "g", in(g, {d.t, d.hv + 1, d.k})), {},
                     {op + ": g dims [10,5,8]", "expected"});
  const std::string gate = op == "gdn2" ? "b" : "beta";  // the erase gate
  expect_op_rejected(g, op, with(p, gate, in(g, {d.t, d.hv, d.k, 1})), {},
                     {op + ": " + gate + " dims [10,4,8,1]", "expected"});
  expect_op_rejected(g, op, with(p, "cu_seqlens", in(g, {d.b + 1, 1}, DType::i32)), {},
                     {op + ": cu_seqlens dims [4,1]", "[B+1] cumulative sequence lengths"});
  expect_op_rejected(g, op, with(p, "cu_seqlens", in(g, {d.b + 1}, DType::f32, "fcu")), {},
                     {op + ": input 'cu_seqlens' ('fcu') is f32; it must be an integer dtype"});
  expect_op_rejected(
      g, op, with(p, "initial_state", in(g, {d.b + 1, d.hv, d.k, d.v})), {},
      {op + ": initial_state dims [4,4,8,16]", "expected [B, HV, K, V] = [3,4,8,16]"});
  expect_op_rejected(g, op, p, {{"scale", -0.5}}, {op, "scale must be > 0"});
  expect_op_rejected(g, op, without(p, gate), {}, {op + ": input '" + gate + "' is required"});
  expect_op_rejected(g, op, without(p, "cu_seqlens"), {},
                     {op + ": input 'cu_seqlens' is required"});
  if (op == "gdn") {
    expect_op_rejected(g, op, with(p, "g", in(g, {d.t, d.hv, d.k})), {},
                       {"gdn: g dims [10,4,8]", "expected [T, HV] = [10,4]"});
    expect_op_rejected(g, op, with(p, "beta", in(g, {d.t, d.hv, d.k})), {},
                       {"gdn: beta dims [10,4,8]", "expected [T, HV] = [10,4]"});
  } else {
    expect_op_rejected(g, op, with(p, "g", in(g, {d.t, d.hv})), {},
                       {op + ": g dims [10,4]", "expected [T, HV, K] = [10,4,8]"});
    // Only gdn has the safe gate.
    expect_op_rejected(g, op, with(p, "a_log", in(g, {d.hv})), {},
                       {op + ": unknown input port 'a_log'"});
    expect_op_rejected(g, op, p, {{"safe_gate", true}}, {op + ": unknown attribute 'safe_gate'"});
  }
  if (op == "kda")
    expect_op_rejected(g, op, with(p, "beta", in(g, {d.t, d.hv, d.k})), {},
                       {"kda: beta dims [10,4,8]", "expected [T, HV] = [10,4]"});
  if (op == "gdn2") {
    expect_op_rejected(g, op, with(p, "b", in(g, {d.t, d.hv})), {},
                       {"gdn2: b dims [10,4]", "expected [T, HV, K] = [10,4,8]"});
    // gdn2 erases with b and writes with w; it has no beta.
    expect_op_rejected(g, op, with(p, "beta", in(g, {d.t, d.hv})), {},
                       {"gdn2: unknown input port 'beta'"});
    expect_op_rejected(g, op, with(p, "w", in(g, {d.t, d.hv, d.k})), {},
                       {"gdn2: w dims [10,4,8]", "expected [T, HV, V] = [10,4,16]"});
    expect_op_rejected(g, op, without(p, "w"), {}, {"gdn2: input 'w' is required"});
  } else {
    expect_op_rejected(g, op, with(p, "w", in(g, {d.t, d.hv, d.v})), {},
                       {op + ": unknown input port 'w'"});
    expect_op_rejected(g, op, with(p, "b", in(g, {d.t, d.hv, d.k})), {},
                       {op + ": unknown input port 'b'"});
  }
}

TEST_P(OpGraphDelta, BackwardBadShapesAreNamed) {
  Graph g;
  const DeltaDims d;
  const std::string op = bwd();
  const Ports p = delta_ports(g, rule(), true);
  expect_op_rejected(g, op, with(p, "d_o", in(g, {d.t, d.hv, d.k})), {},
                     {op + ": d_o dims [10,4,8]", "expected [T, HV, V] = [10,4,16]"});
  expect_op_rejected(g, op, without(p, "d_o"), {}, {op + ": input 'd_o' is required"});
  expect_op_rejected(g, op, with(p, "d_final_state", in(g, {d.b, d.hv, d.v, d.k})), {},
                     {op + ": d_final_state dims [3,4,16,8]", "[B, HV, K, V] = [3,4,8,16]"});
  expect_op_rejected(g, op, with(p, "initial_state", in(g, {d.b, d.hv, d.k})), {},
                     {op + ": initial_state dims [3,4,8]", "[B, HV, K, V] = [3,4,8,16]"});
  expect_op_rejected(g, op, with(p, "q", in(g, {d.t, d.h, d.k}, DType::i32, "iq")), {},
                     {op + ": input 'q' ('iq') is i32; it must be a floating dtype"});
  expect_op_rejected(g, op, p, {{"output_final_state", true}},
                     {op + ": unknown attribute 'output_final_state'"});
}

INSTANTIATE_TEST_SUITE_P(OpGraph, OpGraphDelta, ::testing::Values("gdn", "kda", "gdn2"),
                         [](const auto& info) { return info.param; });

TEST(OpGraphGdn, SafeGateNeedsALogAndDtBias) {
  Graph g;
  const DeltaDims d;
  const Ports p = delta_ports(g, "gdn", false);
  Tensor a_log = in(g, {d.hv}, DType::f32, "a_log");
  Tensor dt_bias = in(g, {d.hv}, DType::f32, "dt_bias");
  const Ports gated = with(with(p, "a_log", a_log), "dt_bias", dt_bias);
  auto outs = g.op("gdn", gated, {{"safe_gate", true}, {"use_beta_sigmoid", true}});
  EXPECT_EQ(outs.at("o").dims(), Dims({d.t, d.hv, d.v}));
  EXPECT_EQ(g.nodes().back().input("a_log"), a_log);

  expect_rejected(g,
                  [&] {
                    g.op("gdn", p, {{"safe_gate", true}});
                  },
                  {"gdn: a_log: is required when safe_gate is set"});
  expect_rejected(g,
                  [&] {
                    g.op("gdn", with(p, "a_log", a_log), {{"safe_gate", true}});
                  },
                  {"gdn: dt_bias: is required when safe_gate is set"});
  expect_rejected(g, [&] { g.op("gdn", with(p, "a_log", a_log)); },
                  {"gdn: a_log dims [4]: is only read when safe_gate is set"});
  expect_rejected(g, [&] { g.op("gdn", with(p, "dt_bias", dt_bias)); },
                  {"gdn: dt_bias", "is only read when safe_gate is set"});
  expect_op_rejected(g, "gdn", with(gated, "a_log", in(g, {d.h})), {{"safe_gate", true}},
                     {"gdn: a_log dims [2]", "expected [HV] = [4]"});
  expect_op_rejected(g, "gdn", with(gated, "dt_bias", in(g, {d.hv, 1})), {{"safe_gate", true}},
                     {"gdn: dt_bias dims [4,1]", "expected [HV] = [4]"});
}

TEST(OpGraphGdn, BackwardGateGradientsOnlyWithSafeGate) {
  Graph g;
  const DeltaDims d;
  const Ports p = delta_ports(g, "gdn", true);
  const Ports gated =
      with(with(p, "a_log", in(g, {d.hv}, DType::f32)), "dt_bias", in(g, {d.hv}, DType::f32));
  auto outs = g.op("gdn_bwd", gated, {{"safe_gate", true}});
  ASSERT_EQ(outs.count("d_a_log"), 1u);
  ASSERT_EQ(outs.count("d_dt_bias"), 1u);
  EXPECT_EQ(outs.at("d_a_log").dims(), Dims({d.hv}));
  EXPECT_EQ(outs.at("d_dt_bias").dims(), Dims({d.hv}));
  EXPECT_EQ(outs.at("d_a_log").dtype(), DType::f32);
  EXPECT_EQ(outs.count("dw"), 0u);
  EXPECT_EQ(port_names(g.nodes().back().outputs()),
            (std::vector<std::string>{"dq", "dk", "dv", "dg", "dbeta", "d_a_log", "d_dt_bias"}));
  outs = g.op("gdn_bwd", p);
  EXPECT_EQ(outs.count("d_a_log"), 0u);
  EXPECT_EQ(outs.count("d_dt_bias"), 0u);
  expect_rejected(g,
                  [&] {
                    g.op("gdn_bwd", p, {{"safe_gate", true}});
                  },
                  {"gdn_bwd: a_log: is required when safe_gate is set"});
  expect_rejected(g, [&] { g.op("gdn_bwd", gated); },
                  {"gdn_bwd: a_log", "is only read when safe_gate"});
}

TEST(OpGraphGdn2, BackwardHasDbDwAndNoGateGradients) {
  Graph g;
  const DeltaDims d;
  const Ports p = delta_ports(g, "gdn2", true);
  auto outs = g.op("gdn2_bwd", with(p, "initial_state", in(g, {d.b, d.hv, d.k, d.v})));
  EXPECT_EQ(port_names(g.nodes().back().outputs()),
            (std::vector<std::string>{"dq", "dk", "dv", "dg", "db", "dw", "d_initial_state"}));
  EXPECT_EQ(outs.at("dw").dims(), Dims({d.t, d.hv, d.v}));
  EXPECT_EQ(outs.at("db").dims(), Dims({d.t, d.hv, d.k}));
  EXPECT_EQ(outs.at("db").dtype(), DType::bf16);  // b's dtype
  EXPECT_EQ(outs.count("dbeta"), 0u);
  Graph k;
  outs = k.op("kda_bwd", delta_ports(k, "kda", true));
  EXPECT_EQ(outs.count("dw"), 0u);
  EXPECT_EQ(outs.count("db"), 0u);
  EXPECT_EQ(outs.at("dg").dims(), Dims({d.t, d.hv, d.k}));
}

// ---- Generic error paths

TEST(OpGraphErrors, UnknownOpPortAndDuplicatePort) {
  Graph g;
  Tensor x = in(g, {4});
  expect_rejected(g, [&] { g.op("conv2d", {{"a", x}}); }, {"unknown op 'conv2d'"});
  expect_rejected(g, [&] { g.pointwise("frobnicate", x); }, {"unknown op 'frobnicate'"});
  expect_rejected(g,
                  [&] {
                    g.op("exp", {{"x", x}});
                  },
                  {"exp: unknown input port 'x'", "(ports: a)"});
  expect_rejected(g,
                  [&] {
                    g.op("matmul", {{"a", x}, {"b", x}, {"c", x}});
                  },
                  {"matmul: unknown input port 'c'", "a, b, bias"});
  expect_rejected(g, [&] { g.op("add", {{"a", x}, {"a", x}}); }, {"add: input 'a' given twice"});
}

TEST(OpGraphErrors, MissingInputsWrongDtypesAndAttributes) {
  Graph g;
  Tensor x = in(g, {4, 8});
  Tensor ids = in(g, {4}, DType::i32, "ids");
  expect_rejected(g, [&] { g.op("add", {{"a", x}}); }, {"add: input 'b' is required"});
  expect_rejected(g, [&] { g.op("matmul", {{"b", x}}); }, {"matmul: input 'a' is required"});
  expect_rejected(g,
                  [&] {
                    g.op("softmax", {{"x", ids}});
                  },
                  {"softmax: input 'x' ('ids') is i32; it must be a floating dtype"});
  expect_rejected(g,
                  [&] {
                    g.op("softmax", {{"x", x}}, {{"dim", 1}});
                  },
                  {"softmax: unknown attribute 'dim'", "(known: axis, log)"});
  expect_rejected(g,
                  [&] {
                    g.pointwise("exp", x, {{"alpha", 1.0}});
                  },
                  {"exp: unknown attribute 'alpha'", "(known: none)"});
  expect_rejected(g,
                  [&] {
                    g.op("softmax", {{"x", x}}, {{"log", "yes"}});
                  },
                  {"softmax: attribute 'log' must be bool, got text"});
  expect_rejected(g,
                  [&] {
                    g.op("layer_norm", {{"x", x}}, {{"epsilon", true}});
                  },
                  {"layer_norm: attribute 'epsilon' must be real, got bool"});
  expect_rejected(g,
                  [&] {
                    g.op("reduction", {{"x", x}}, {{"axes", std::vector<int64_t>{0}}});
                  },
                  {"reduction: attribute 'mode' is required"});
}

TEST(OpGraphErrors, TensorsOfAnotherGraphOrUndefinedAreRejected) {
  Graph g;
  Graph other("other");
  Tensor x = in(g, {4});
  Tensor y = in(other, {4});
  expect_rejected(g, [&] { g.pointwise("add", x, y); },
                  {"add: input 'b' belongs to another graph"});
  expect_rejected(g, [&] { g.pointwise("exp", Tensor()); },
                  {"exp: input 'a' is an undefined Tensor"});
  expect_rejected(g, [&] { g.where(Tensor(), x, x); },
                  {"where: input 'cond' is an undefined Tensor"});
  EXPECT_FALSE(Tensor().defined());
  EXPECT_TRUE(x.defined());
  EXPECT_EQ(other.tensors().size(), 1u);
  EXPECT_TRUE(other.nodes().empty());
}

TEST(OpGraphErrors, AFailedOpLeavesUidsAndLaterNodesUnaffected) {
  Graph g;
  Tensor x = in(g, {4, 8});
  Tensor y = g.pointwise("exp", x);
  const int64_t y_uid = y.uid();
  EXPECT_THROW(g.matmul(x, x), InvalidArgument);
  Tensor z = g.pointwise("exp", y);
  EXPECT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(z.producer(), 1);
  EXPECT_EQ(y.uid(), y_uid);
  EXPECT_NE(z.uid(), y_uid);
  EXPECT_NO_THROW(g.validate());
}

// ---- Uids

std::set<int64_t> uids(const Graph& g) {
  std::set<int64_t> out;
  for (const Tensor& t : g.tensors()) out.insert(t.uid());
  return out;
}

TEST(OpGraphUid, AutomaticUidsAreUnique) {
  Graph g;
  Tensor a = in(g, {4});
  Tensor b = in(g, {4});
  g.pointwise("add", g.pointwise("mul", a, b), a);
  EXPECT_EQ(uids(g).size(), g.tensors().size());
  for (const Tensor& t : g.tensors()) {
    EXPECT_FALSE(t.uid_assigned_by_user());
    EXPECT_EQ(g.tensor_by_uid(t.uid()), t);
  }
  expect_throw_with<InvalidArgument>([&] { g.tensor_by_uid(999); }, {"no tensor has uid 999"});
}

TEST(OpGraphUid, AUserUidTakesTheNumberOfAnAutomaticHolder) {
  Graph g;
  Tensor a = in(g, {4}, DType::f32, "a");
  Tensor b = in(g, {4}, DType::f32, "b");
  Tensor c = g.pointwise("add", a, b);
  const int64_t taken = a.uid();
  c.set_uid(taken);
  EXPECT_EQ(c.uid(), taken);
  EXPECT_TRUE(c.uid_assigned_by_user());
  EXPECT_NE(a.uid(), taken);  // renumbered
  EXPECT_FALSE(a.uid_assigned_by_user());
  EXPECT_EQ(uids(g).size(), g.tensors().size());
  EXPECT_EQ(g.tensor_by_uid(taken), c);
  EXPECT_EQ(g.tensor_by_uid(a.uid()), a);
  // Later automatic uids stay clear of it.
  Tensor d = in(g, {4});
  EXPECT_EQ(uids(g).size(), g.tensors().size());
  EXPECT_NE(d.uid(), taken);
  g.pointwise("exp", d);  // read, so that validate() accepts it
  // Setting a tensor's own uid again is fine.
  c.set_uid(taken);
  EXPECT_EQ(c.uid(), taken);
  EXPECT_NO_THROW(g.validate());
}

TEST(OpGraphUid, UserUidsCollideWithEachOther) {
  Graph g;
  Tensor a = in(g, {4}, DType::f32, "a");
  Tensor b = in(g, {4}, DType::f32, "b");
  a.set_uid(10);
  const int64_t b_uid = b.uid();
  expect_rejected(g, [&] { b.set_uid(10); }, {"set_uid", "'b'", "uid 10 already belongs to 'a'"});
  EXPECT_EQ(b.uid(), b_uid);
  EXPECT_FALSE(b.uid_assigned_by_user());
  expect_rejected(g, [&] { b.set_uid(-1); }, {"set_uid", "uid must be >= 0"});
  // A user uid may change to a free one.
  a.set_uid(11);
  EXPECT_EQ(a.uid(), 11);
  b.set_uid(10);
  EXPECT_EQ(b.uid(), 10);
  b.set_uid(0);
  EXPECT_EQ(b.uid(), 0);
}

TEST(OpGraphUid, TensorSpecUid) {
  Graph g;
  Tensor a = g.tensor({"a", {4}, DType::f32, {}, 42});
  EXPECT_EQ(a.uid(), 42);
  EXPECT_TRUE(a.uid_assigned_by_user());
  Tensor b = in(g, {4}, DType::f32, "b");
  EXPECT_FALSE(b.uid_assigned_by_user());
  EXPECT_NE(b.uid(), 42);
  // A spec uid takes an automatic holder's number.
  const int64_t held = b.uid();
  Tensor c = g.tensor({"c", {4}, DType::f32, {}, held});
  EXPECT_EQ(c.uid(), held);
  EXPECT_NE(b.uid(), held);
  EXPECT_EQ(uids(g).size(), 3u);
  // Colliding with a user uid adds nothing.
  expect_rejected(g,
                  [&] {
                    g.tensor({"d", {4}, DType::f32, {}, 42});
                  },
                  {"uid 42 already belongs to 'a'"});
  expect_rejected(g, [&] { g.tensor({"e", {4}, DType::f32, {}, -3}); }, {"uid must be >= 0"});
  EXPECT_EQ(g.tensors().size(), 3u);
  EXPECT_EQ(g.tensor_by_uid(42), a);
}

// ---- Outputs and operands

TEST(OpGraphOutputs, OutputsStartVirtualAndSetOutputToggles) {
  Graph g;
  Tensor x = in(g, {4, 8}, DType::f32, "x");
  Tensor y = g.pointwise("exp", x);
  EXPECT_FALSE(x.is_virtual());
  EXPECT_TRUE(y.is_virtual());
  EXPECT_EQ(&y.set_output(true), &y);
  EXPECT_FALSE(y.is_virtual());
  y.set_output(false);
  EXPECT_TRUE(y.is_virtual());
  expect_rejected(g, [&] { x.set_output(true); },
                  {"set_output", "'x'", "a graph input is never virtual"});
  expect_rejected(g, [&] { x.set_output(false); }, {"a graph input is never virtual"});
  EXPECT_FALSE(x.is_virtual());
}

bool sorted_by_uid(const std::vector<Tensor>& ts) {
  for (std::size_t i = 1; i < ts.size(); ++i)
    if (ts[i - 1].uid() >= ts[i].uid()) return false;
  return true;
}

TEST(OpGraphOutputs, OperandTensorsAreTheNonVirtualOnesByUid) {
  Graph g;
  Tensor x = in(g, {4, 8}, DType::f32, "x");
  Tensor w = in(g, {8, 16}, DType::f32, "w");
  Tensor y = g.matmul(x, w);
  Tensor z = g.pointwise("relu", y);
  EXPECT_EQ(g.operand_tensors(), (std::vector<Tensor>{x, w}));
  z.set_output(true);
  EXPECT_EQ(g.operand_tensors(), (std::vector<Tensor>{x, w, z}));
  // Ordered by uid, not by creation.
  x.set_uid(1000);
  const auto ops = g.operand_tensors();
  EXPECT_EQ(ops, (std::vector<Tensor>{w, z, x}));
  EXPECT_TRUE(sorted_by_uid(ops));
  y.set_output(true);
  EXPECT_EQ(g.operand_tensors().size(), 4u);
  EXPECT_TRUE(sorted_by_uid(g.operand_tensors()));
}

TEST(OpGraphOutputs, RaggedOffsetsAreOperandsOnce) {
  Graph g;
  SdpaThd s = sdpa_thd(g);
  Tensor q_off = in(g, {4}, DType::i64, "q_off");
  Tensor o_off = in(g, {4}, DType::i64, "o_off");
  EXPECT_FALSE(s.q.ragged_offset().defined());
  EXPECT_EQ(&s.q.set_ragged_offset(q_off), &s.q);
  EXPECT_EQ(s.q.ragged_offset(), q_off);
  Tensor o = g.op("sdpa", s.ports()).at("o");
  o.set_output(true).set_ragged_offset(o_off);
  EXPECT_EQ(o.ragged_offset(), o_off);
  const auto ops = g.operand_tensors();
  EXPECT_TRUE(sorted_by_uid(ops));
  EXPECT_EQ(ops.size(), g.tensors().size());  // every tensor, each once
  EXPECT_EQ(std::count(ops.begin(), ops.end(), q_off), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), o_off), 1);
  const std::string json = g.to_json();
  EXPECT_TRUE(contains(json, "\"ragged_offset\":" + std::to_string(q_off.uid()))) << json;
  EXPECT_TRUE(contains(json, "\"ragged_offset\":" + std::to_string(o_off.uid()))) << json;
  EXPECT_NO_THROW(g.validate());
}

TEST(OpGraphOutputs, RaggedOffsetRules) {
  Graph g;
  Tensor q = in(g, {12, 8, 64}, DType::f32, "q");
  Graph other;
  Tensor foreign = in(other, {4}, DType::i32);
  expect_rejected(g, [&] { q.set_ragged_offset(foreign); },
                  {"set_ragged_offset", "'q'", "offsets belong to another graph"});
  Tensor fl = in(g, {4}, DType::f32, "fl");
  expect_rejected(g, [&] { q.set_ragged_offset(fl); },
                  {"set_ragged_offset", "offsets 'fl' must be a graph input of integers [B+1]"});
  Tensor mat = in(g, {2, 2}, DType::i32, "mat");
  expect_rejected(g, [&] { q.set_ragged_offset(mat); }, {"offsets 'mat' must be a graph input"});
  Tensor produced = g.pointwise("identity", in(g, {4}, DType::i32));
  expect_rejected(g, [&] { q.set_ragged_offset(produced); },
                  {"must be a graph input of integers [B+1]"});
  EXPECT_FALSE(q.ragged_offset().defined());
  // Accepted now, but validate() checks the offsets hold B+1 >= 1 entries.
  Tensor empty = in(g, {0}, DType::u32, "empty");
  q.set_ragged_offset(empty);
  g.pointwise("exp", q);
  expect_throw_with<InvalidArgument>([&] { g.validate(); },
                                     {"ragged offset 'empty' of 'q' must be integers [B+1]"});
  empty.set_dims({4});
  // The inputs tried as offsets above are read by nodes, as validate() wants of every input.
  g.pointwise("exp", fl);
  g.pointwise("neg", mat);
  EXPECT_NO_THROW(g.validate());
}

// ---- Tensor setters

TEST(OpGraphTensor, SpecDefaultsAndSetters) {
  Graph g;
  Tensor a = g.tensor({"", {2, 3, 4}});
  EXPECT_EQ(a.name(), "t0");
  EXPECT_EQ(a.dtype(), DType::f32);
  EXPECT_EQ(a.dims(), Dims({2, 3, 4}));
  EXPECT_EQ(a.strides(), Dims({12, 4, 1}));
  EXPECT_EQ(a.index(), 0);
  Tensor b = g.tensor({"b", {2, 3}, DType::f16, {1, 2}});
  EXPECT_EQ(b.strides(), Dims({1, 2}));
  a.set_name("act").set_dtype(DType::bf16).set_dims({5, 6});
  EXPECT_EQ(a.name(), "act");
  EXPECT_EQ(a.dtype(), DType::bf16);
  EXPECT_EQ(a.dims(), Dims({5, 6}));
  EXPECT_EQ(a.strides(), Dims({6, 1}));  // row-major again
  a.set_strides({1, 5});
  EXPECT_EQ(a.strides(), Dims({1, 5}));
  a.set_strides({});
  EXPECT_EQ(a.strides(), Dims({6, 1}));
  // The new dims reach the ops built afterwards.
  EXPECT_EQ(g.pointwise("exp", a).dims(), Dims({5, 6}));
  EXPECT_EQ(g.nodes().back().output("out").dtype(), DType::bf16);
}

TEST(OpGraphTensor, BadDimsAndStridesAreRejected) {
  Graph g;
  expect_rejected(g,
                  [&] {
                    g.tensor({"neg", {2, -1}});
                  },
                  {"Graph::tensor 'neg'", "dims [2,-1] must be >= 0"});
  expect_rejected(g,
                  [&] {
                    g.tensor({"s", {2, 3}, DType::f32, {1}});
                  },
                  {"strides [1] must have one entry per dim [2,3]"});
  expect_rejected(g,
                  [&] {
                    g.tensor({"s", {2, 3}, DType::f32, {3, -1}});
                  },
                  {"strides [3,-1] must be >= 0"});
  Tensor a = in(g, {2, 3}, DType::f32, "a");
  expect_rejected(g, [&] { a.set_dims({-2}); }, {"set_dims", "'a'", "must be >= 0"});
  expect_rejected(g,
                  [&] {
                    a.set_strides({1, 2, 3});
                  },
                  {"set_strides", "'a'", "one entry per dim"});
  EXPECT_EQ(g.tensors().size(), 1u);
}

TEST(OpGraphTensor, DimsAndDtypeAreFixedOnceANodeReadsTheTensor) {
  Graph g;
  Tensor x = in(g, {4, 8}, DType::f32, "x");
  Tensor y = g.pointwise("exp", x);
  expect_rejected(g, [&] { x.set_dims({4, 9}); }, {"set_dims", "'x'", "a node already reads it"});
  expect_rejected(g, [&] { x.set_dims({4, 8}); }, {"a node already reads it"});
  expect_rejected(g, [&] { x.set_dtype(DType::f16); },
                  {"set_dtype", "'x'", "a node already reads it"});
  // An output nobody reads yet keeps its inferred dims but may change precision.
  y.set_dims({4, 8});
  expect_rejected(g,
                  [&] {
                    y.set_dims({8, 4});
                  },
                  {"set_dims", "[8,4] differs from the inferred [4,8]"});
  y.set_dtype(DType::f16);
  EXPECT_EQ(y.dtype(), DType::f16);
  expect_rejected(g, [&] { y.set_dtype(DType::i32); },
                  {"set_dtype", "an op output stays floating"});
  Tensor c = g.pointwise("cmp_lt", x, x);
  expect_rejected(g, [&] { c.set_dtype(DType::f32); }, {"an op output stays non-floating"});
  c.set_dtype(DType::u8);
  // Once read, an output is fixed too.
  g.pointwise("exp", y);
  expect_rejected(g, [&] { y.set_dtype(DType::f32); }, {"a node already reads it"});
  expect_rejected(g, [&] { y.set_dims({4, 8}); }, {"a node already reads it"});
  // Names and strides stay free.
  x.set_name("input");
  EXPECT_EQ(x.name(), "input");
  EXPECT_NO_THROW(g.validate());
}

// ---- validate

TEST(OpGraphValidate, EmptyGraphThrowsAndAGoodGraphPasses) {
  Graph empty("nothing");
  expect_throw_with<InvalidArgument>([&] { empty.validate(); }, {"'nothing'", "has no nodes"});
  in(empty, {3});
  expect_throw_with<InvalidArgument>([&] { empty.validate(); }, {"has no nodes"});

  Graph g("mlp");
  Tensor x = in(g, {4, 8}, DType::bf16, "x");
  Tensor w = in(g, {8, 16}, DType::bf16, "w");
  Tensor b = in(g, {16}, DType::bf16, "b");
  Tensor h = g.pointwise("gelu", g.matmul(x, w, b));
  auto ln = g.op("layer_norm", {{"x", h}}, {{"training", true}});
  Tensor loss = g.op("cross_entropy", {{"logits", ln.at("y")}, {"targets", in(g, {4}, DType::i32)}})
                    .at("loss");
  loss.set_output(true);
  EXPECT_NO_THROW(g.validate());
  EXPECT_EQ(g.nodes().size(), 4u);
}

// ---- Freezing

TEST(OpGraphFreeze, EveryMutationThrowsAfterFreeze) {
  Graph g("frozen_one");
  Tensor x = in(g, {4, 8}, DType::f32, "x");
  Tensor off = in(g, {5}, DType::i32, "off");
  Tensor y = g.pointwise("exp", x);
  Tensor unread = in(g, {3}, DType::f32, "unread");
  EXPECT_FALSE(g.frozen());
  g.freeze();
  EXPECT_TRUE(g.frozen());
  g.freeze();  // idempotent
  EXPECT_TRUE(g.frozen());
  const std::initializer_list<std::string> frozen = {"graph 'frozen_one' is frozen"};
  expect_rejected(
      g,
      [&] {
        g.tensor({"z", {2}});
      },
      frozen);
  expect_rejected(
      g,
      [&] {
        g.op("exp", {{"a", x}});
      },
      frozen);
  expect_rejected(
      g, [&] { g.op("no_such_op", {}); }, frozen);
  expect_rejected(
      g, [&] { g.pointwise("add", x, x); }, frozen);
  expect_rejected(
      g, [&] { g.pointwise("exp", x); }, frozen);
  expect_rejected(
      g, [&] { g.where(x, x, x); }, frozen);
  expect_rejected(
      g, [&] { g.matmul(x, x); }, frozen);
  expect_rejected(g, [&] { unread.set_uid(77); }, {"set_uid", "is frozen"});
  expect_rejected(g, [&] { unread.set_name("n"); }, {"set_name", "is frozen"});
  expect_rejected(g, [&] { unread.set_dtype(DType::f16); }, {"set_dtype", "is frozen"});
  expect_rejected(g, [&] { unread.set_dims({4}); }, {"set_dims", "is frozen"});
  expect_rejected(g, [&] { unread.set_strides({1}); }, {"set_strides", "is frozen"});
  expect_rejected(g, [&] { y.set_output(true); }, {"set_output", "is frozen"});
  expect_rejected(g, [&] { unread.set_ragged_offset(off); }, {"set_ragged_offset", "is frozen"});
  EXPECT_TRUE(y.is_virtual());
}

TEST(OpGraphFreeze, InspectionStillWorks) {
  Graph g("inspect");
  Tensor x = in(g, {2, 3, 4}, DType::f32, "x");
  Tensor y =
      g.op("reduction", {{"x", x}}, {{"mode", "sum"}, {"axes", std::vector<int64_t>{1}}}).at("y");
  y.set_output(true);
  const std::string before = g.to_json();
  g.freeze();
  ASSERT_EQ(g.nodes().size(), 1u);
  const Node n = g.nodes()[0];
  EXPECT_EQ(n.op(), "reduction");
  EXPECT_EQ(n.attr("mode").as_text("mode"), "sum");
  EXPECT_EQ(n.attrs().size(), 3u);
  EXPECT_EQ(n.output("y"), y);
  EXPECT_EQ(g.tensors().size(), 2u);
  EXPECT_EQ(y.dims(), Dims({2, 4}));
  EXPECT_EQ(g.tensor_by_uid(x.uid()), x);
  EXPECT_EQ(g.operand_tensors(), (std::vector<Tensor>{x, y}));
  EXPECT_NO_THROW(g.validate());
  const std::string after = g.to_json();
  EXPECT_TRUE(contains(after, "\"frozen\":true"));
  EXPECT_TRUE(contains(before, "\"frozen\":false"));
  EXPECT_TRUE(contains(after, "\"op\":\"reduction\""));
}

TEST(OpGraphFreeze, PlanningIsClaimedOnce) {
  Graph g("once");
  g.pointwise("exp", in(g, {2}));
  g.freeze();
  g.claim_for_planning("first planner");
  expect_throw_with<InvalidArgument>(
      [&] { g.claim_for_planning("second planner"); },
      {"second planner", "'once'", "already planned", "by first planner"});
  // A copy of the graph handle shares the claim.
  Graph copy = g;
  expect_throw_with<InvalidArgument>([&] { copy.claim_for_planning("third"); },
                                     {"already planned"});
}

TEST(OpGraphFreeze, MemoNeedsAFrozenGraphAndComputesOnce) {
  Graph g("facts");
  g.pointwise("exp", in(g, {2}));
  static const int key_a = 0;
  static const int key_b = 0;
  int calls = 0;
  auto make = [&] {
    ++calls;
    return std::shared_ptr<const void>(std::make_shared<int>(40 + calls));
  };
  expect_throw_with<InvalidArgument>([&] { g.memo(&key_a, make); }, {"'facts'", "not frozen"});
  EXPECT_EQ(calls, 0);
  g.freeze();
  auto first = g.memo(&key_a, make);
  auto second = g.memo(&key_a, make);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(*static_cast<const int*>(first.get()), 41);
  auto other = g.memo(&key_b, make);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(*static_cast<const int*>(other.get()), 42);
  EXPECT_EQ(*static_cast<const int*>(g.memo(&key_a, make).get()), 41);
  EXPECT_EQ(calls, 2);
  // A computation that throws is not kept: the next call computes again.
  static const int key_c = 0;
  int failures = 0;
  auto failing = [&]() -> std::shared_ptr<const void> {
    ++failures;
    throw InvalidArgument("analysis failed");
  };
  EXPECT_THROW(g.memo(&key_c, failing), InvalidArgument);
  EXPECT_THROW(g.memo(&key_c, failing), InvalidArgument);
  EXPECT_EQ(failures, 2);
  EXPECT_EQ(*static_cast<const int*>(g.memo(&key_c, make).get()), 43);
  EXPECT_EQ(calls, 3);
  // Another graph has its own memo.
  Graph h;
  h.pointwise("exp", in(h, {2}));
  h.freeze();
  h.memo(&key_a, make);
  EXPECT_EQ(calls, 4);
}

// ---- JSON

TEST(OpGraphJson, ListsTensorsNodesPortsAndAttributes) {
  Graph g("dump \"me\"");
  Tensor x = in(g, {2, 3, 4}, DType::bf16, "x");
  x.set_uid(7);
  Tensor y =
      g.op("reduction", {{"x", x}},
           {{"mode", "max"}, {"axes", std::vector<int64_t>{0, -1}}, {"keepdim", true}}, "red")
          .at("y");
  Tensor z = g.pointwise("cast", y, {{"dtype", DType::f16}});
  z.set_output(true);
  const std::string json = g.to_json();
  for (const std::string& needle : {std::string("\"name\":\"dump \\\"me\\\"\""),
                                    std::string("\"frozen\":false"),
                                    std::string("\"uid\":7"),
                                    "\"uid\":" + std::to_string(y.uid()),
                                    std::string("\"name\":\"x\""),
                                    std::string("\"dtype\":\"bf16\""),
                                    std::string("\"dims\":[2,3,4]"),
                                    std::string("\"strides\":[12,4,1]"),
                                    std::string("\"dims\":[1,3,1]"),
                                    std::string("\"op\":\"reduction\""),
                                    std::string("\"op\":\"cast\""),
                                    std::string("\"name\":\"red\""),
                                    std::string("\"inputs\":{\"x\":7}"),
                                    "\"outputs\":{\"y\":" + std::to_string(y.uid()) + "}",
                                    std::string("\"mode\":\"max\""),
                                    std::string("\"axes\":[0,-1]"),
                                    std::string("\"keepdim\":true"),
                                    std::string("\"dtype\":\"f16\""),
                                    std::string("\"virtual\":true"),
                                    std::string("\"virtual\":false")})
    EXPECT_TRUE(contains(json, needle)) << "missing " << needle << " in " << json;
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
}

TEST(OpGraphJson, AttributesPrintByType) {
  EXPECT_EQ(Attr(true).to_json(), "true");
  EXPECT_EQ(Attr(-3).to_json(), "-3");
  EXPECT_EQ(Attr(0.5).to_json(), "0.5");
  EXPECT_EQ(Attr("a\"b").to_json(), "\"a\\\"b\"");
  EXPECT_EQ(Attr(std::vector<int64_t>{1, -2}).to_json(), "[1,-2]");
  EXPECT_EQ(Attr(std::vector<int64_t>{}).to_json(), "[]");
  EXPECT_EQ(Attr(DType::i64).to_json(), "\"i64\"");
  EXPECT_EQ(Attr(2).as_real("x"), 2.0);
  EXPECT_EQ(Attr("bf16").as_dtype("x"), DType::bf16);
  expect_throw_with<InvalidArgument>([] { Attr("half").as_dtype("my attr"); },
                                     {"my attr", "unknown name 'half'"});
  expect_throw_with<InvalidArgument>([] { Attr(true).as_dtype("my attr"); },
                                     {"my attr", "must be dtype, got bool"});
  expect_throw_with<InvalidArgument>([] { Attr(1.5).as_int("my attr"); },
                                     {"my attr", "must be integer, got real"});
}

// ---- Hostile input

TEST(OpGraphHostile, AnUndefinedTensorThrowsFromEveryAccessorAndSetter) {
  const Tensor none;
  const std::string rule = "the tensor is undefined (a default-constructed op::Tensor)";
  Tensor t;
  expect_throw_with<InvalidArgument>([&] { none.uid(); }, {"op::Tensor::uid", rule});
  expect_throw_with<InvalidArgument>([&] { none.uid_assigned_by_user(); }, {rule});
  expect_throw_with<InvalidArgument>([&] { none.name(); }, {"op::Tensor::name", rule});
  expect_throw_with<InvalidArgument>([&] { none.dtype(); }, {"op::Tensor::dtype", rule});
  expect_throw_with<InvalidArgument>([&] { none.dims(); }, {"op::Tensor::dims", rule});
  expect_throw_with<InvalidArgument>([&] { none.strides(); }, {"op::Tensor::strides", rule});
  expect_throw_with<InvalidArgument>([&] { none.is_virtual(); }, {"is_virtual", rule});
  expect_throw_with<InvalidArgument>([&] { none.ragged_offset(); }, {"ragged_offset", rule});
  expect_throw_with<InvalidArgument>([&] { none.producer(); }, {"producer", rule});
  expect_throw_with<InvalidArgument>([&] { t.set_uid(3); }, {"set_uid", rule});
  expect_throw_with<InvalidArgument>([&] { t.set_name("x"); }, {"set_name", rule});
  expect_throw_with<InvalidArgument>([&] { t.set_dtype(DType::f16); }, {"set_dtype", rule});
  expect_throw_with<InvalidArgument>([&] { t.set_dims({2}); }, {"set_dims", rule});
  expect_throw_with<InvalidArgument>([&] { t.set_strides({1}); }, {"set_strides", rule});
  expect_throw_with<InvalidArgument>([&] { t.set_output(true); }, {"set_output", rule});
  expect_throw_with<InvalidArgument>([&] { t.set_ragged_offset(none); },
                                     {"set_ragged_offset", rule});
  EXPECT_FALSE(none.defined());
  EXPECT_EQ(none.index(), -1);
  // As an argument of a defined tensor or of a builder.
  Graph g;
  Tensor q = in(g, {4, 2}, DType::f32, "q");
  expect_rejected(g, [&] { q.set_ragged_offset(none); },
                  {"set_ragged_offset", "'q'", "offsets is undefined"});
  EXPECT_FALSE(q.ragged_offset().defined());
  expect_rejected(g, [&] { g.matmul(none, q); }, {"matmul: input 'a' is an undefined Tensor"});
  expect_rejected(g,
                  [&] {
                    g.op("sdpa", {{"q", q}, {"k", none}, {"v", q}});
                  },
                  {"sdpa: input 'k' is an undefined Tensor"});
  // A moved-from handle is undefined too, and says so.
  Tensor moved = q;
  Tensor taken = std::move(moved);
  EXPECT_EQ(taken, q);
  expect_throw_with<InvalidArgument>([&] { (void)moved.dims(); }, {"op::Tensor::dims", rule});
}

TEST(OpGraphHostile, AMovedFromGraphStillRefersToItsGraph) {
  Graph g("kept");
  Tensor x = in(g, {4}, DType::f32, "x");
  Graph other = std::move(g);
  // A Graph is a handle: the move copies it, so neither side is a null handle.
  EXPECT_EQ(g.name(), "kept");
  EXPECT_EQ(other.tensors().size(), 1u);
  g.pointwise("exp", x);
  EXPECT_EQ(other.nodes().size(), 1u);
}

TEST(OpGraphHostile, UidsNearInt64MaxNeverOverflow) {
  Graph g;
  Tensor a = in(g, {4}, DType::f32, "a");
  a.set_uid(INT64_MAX);  // the next automatic uid used to be INT64_MAX + 1 (undefined)
  Tensor b = in(g, {4}, DType::f32, "b");
  Tensor c = g.pointwise("add", a, b);
  Tensor d = g.tensor({"d", {4}});
  g.pointwise("exp", d);
  EXPECT_EQ(a.uid(), INT64_MAX);
  for (const Tensor& t : {b, c, d}) {
    EXPECT_GE(t.uid(), 1);
    EXPECT_LT(t.uid(), INT64_MAX);
  }
  EXPECT_EQ(uids(g).size(), g.tensors().size());
  EXPECT_NO_THROW(g.validate());
  // A user uid taking an automatic holder's number renumbers it safely too.
  const int64_t held = b.uid();
  d.set_uid(held);
  EXPECT_EQ(d.uid(), held);
  EXPECT_NE(b.uid(), held);
  EXPECT_GE(b.uid(), 1);
  EXPECT_EQ(uids(g).size(), g.tensors().size());
  // Just below: INT64_MAX - 1 gives the next automatic uid INT64_MAX, and the one after that
  // still fits.
  Graph h;
  Tensor p = h.tensor({"p", {2}, DType::f32, {}, INT64_MAX - 1});
  Tensor q = in(h, {2});
  Tensor r = in(h, {2});
  EXPECT_EQ(q.uid(), INT64_MAX);
  EXPECT_GE(r.uid(), 1);
  EXPECT_NE(r.uid(), p.uid());
}

// Every real attribute of every op, each refused at build when NaN or infinite, and when outside
// its range; a new real attribute makes this test fail until it is covered here.
TEST(OpGraphHostile, EveryRealAttributeIsFiniteAndInRangeAtBuild) {
  std::set<std::string> covered = {"layer_norm.epsilon", "rms_norm.epsilon",
                                   "cross_entropy.label_smoothing",
                                   "cross_entropy_bwd.label_smoothing"};
  for (const char* op :
       {"sdpa", "sdpa_bwd", "gdn", "gdn_bwd", "kda", "kda_bwd", "gdn2", "gdn2_bwd"})
    covered.insert(std::string(op) + ".scale");
  for (const OpSchema* s : all_ops()) {
    for (const AttrSpec& a : s->attrs) {
      if (a.type == AttrType::real) {
        EXPECT_TRUE(covered.count(s->name + "." + a.name)) << s->name << "." << a.name;
      }
    }
  }

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Graph g;
  Tensor x = in(g, {6, 32}, DType::f32, "x");
  for (const char* op : {"layer_norm", "rms_norm"}) {
    SCOPED_TRACE(op);
    for (double bad : {nan, inf, -inf})
      expect_rejected(g,
                      [&] {
                        g.op(op, {{"x", x}}, {{"epsilon", bad}});
                      },
                      {op, "attribute 'epsilon' must be a finite number"});
    expect_rejected(g,
                    [&] {
                      g.op(op, {{"x", x}}, {{"epsilon", -1e-9}});
                    },
                    {op, "epsilon must be >= 0"});
    EXPECT_NO_THROW(g.op(op, {{"x", x}}, {{"epsilon", 0.0}}));
  }
  Tensor targets = in(g, {6}, DType::i64, "targets");
  const Ports loss_ports = {{"logits", x}, {"targets", targets}};
  Ports loss_bwd_ports = loss_ports;
  loss_bwd_ports.emplace_back("dloss", in(g, {}, DType::f32, "dloss"));
  for (const auto& [op, ports] :
       {std::pair<std::string, Ports>{"cross_entropy", loss_ports},
        std::pair<std::string, Ports>{"cross_entropy_bwd", loss_bwd_ports}}) {
    SCOPED_TRACE(op);
    for (double bad : {nan, inf, -inf})
      expect_op_rejected(g, op, ports, {{"label_smoothing", bad}},
                         {op, "attribute 'label_smoothing' must be a finite number"});
    for (double bad : {-0.1, 1.5})
      expect_op_rejected(g, op, ports, {{"label_smoothing", bad}},
                         {op, "label_smoothing must be in [0, 1]"});
    EXPECT_NO_THROW(g.op(op, ports, {{"label_smoothing", 1.0}}));
  }

  const SdpaThd s = sdpa_thd(g);
  Ports bwd = s.ports();
  bwd.emplace_back("o", in(g, {12, 8, 32}, DType::f32, "o"));
  bwd.emplace_back("d_o", in(g, {12, 8, 32}, DType::f32, "d_o"));
  bwd.emplace_back("stats", in(g, {12, 8}, DType::f32, "stats"));
  std::vector<std::pair<std::string, Ports>> scaled = {{"sdpa", s.ports()}, {"sdpa_bwd", bwd}};
  for (const std::string rule : {"gdn", "kda", "gdn2"}) {
    scaled.emplace_back(rule, delta_ports(g, rule, false));
    scaled.emplace_back(rule + "_bwd", delta_ports(g, rule, true));
  }
  for (const auto& [op, ports] : scaled) {
    SCOPED_TRACE(op);
    for (double bad : {nan, inf, -inf})
      expect_op_rejected(g, op, ports, {{"scale", bad}},
                         {op, "attribute 'scale' must be a finite number"});
    for (double bad : {0.0, -2.0})
      expect_op_rejected(g, op, ports, {{"scale", bad}}, {op, "scale must be > 0"});
    EXPECT_NO_THROW(g.op(op, ports, {{"scale", 1e-3}}));
  }
}

TEST(OpGraphHostile, OutputStridesMustNotOverlap) {
  Graph g;
  Tensor x = in(g, {2, 3}, DType::f32, "x");
  Tensor y = g.pointwise("exp", x).set_output(true).set_name("y");
  const Dims before = y.strides();
  expect_rejected(g,
                  [&] {
                    y.set_strides({0, 1});
                  },
                  {"set_strides", "'y'", "strides [0,1]", "share memory",
                   "only inputs may broadcast with stride 0"});
  expect_rejected(g, [&] { y.set_strides({1, 1}); }, {"set_strides", "'y'", "share memory"});
  EXPECT_EQ(y.strides(), before);
  // Virtual outputs too: an engine may honour their strides.
  Tensor v = g.pointwise("neg", x);
  expect_rejected(g, [&] { v.set_strides({3, 0}); }, {"set_strides", "share memory"});
  // Layouts that give each element its own address are fine, as is stride 0 on a size-1 dim.
  y.set_strides({1, 2});
  EXPECT_EQ(y.strides(), Dims({1, 2}));
  Tensor row = g.pointwise("exp", in(g, {1, 3}, DType::f32, "row"));
  row.set_strides({0, 1});
  // Inputs may broadcast with stride 0.
  Tensor b = g.tensor({"b", {2, 3}, DType::f32, {0, 1}});
  g.pointwise("add", b, x).set_output(true);
  EXPECT_NO_THROW(g.validate());
}

TEST(OpGraphHostile, DimsWhoseCountsOverflowAreRefused) {
  Graph g;
  const int64_t big = int64_t{1} << 32;
  expect_rejected(g,
                  [&] {
                    g.tensor({"t", {big, big}});
                  },
                  {"Graph::tensor 't'", "[4294967296,4294967296]", "int64"});
  // Countable elements, but 2^62 f32 take 2^64 bytes.
  expect_rejected(g,
                  [&] {
                    g.tensor({"f", {int64_t{1} << 62}, DType::f32});
                  },
                  {"Graph::tensor 'f'", "more than fit in int64"});
  expect_rejected(g,
                  [&] {
                    g.tensor({"s", {2, 2}, DType::f32, {int64_t{1} << 61, 1}});
                  },
                  {"Graph::tensor 's'", "do not fit in int64"});
  Tensor a = in(g, {2}, DType::u8, "a");
  expect_rejected(g, [&] { a.set_dims({big, big}); }, {"set_dims", "'a'", "int64"});
  Tensor w = in(g, {int64_t{1} << 61}, DType::u8, "w");
  expect_rejected(g, [&] { w.set_dtype(DType::f64); }, {"set_dtype", "'w'", "int64"});
  EXPECT_EQ(w.dtype(), DType::u8);
  // Each input fits, the output does not: embedding appends the row width.
  Tensor table = in(g, {4, big}, DType::f32, "table");
  Tensor ids = in(g, {big}, DType::i32, "ids");
  expect_rejected(g,
                  [&] {
                    g.op("embedding", {{"table", table}, {"ids", ids}});
                  },
                  {"embedding: output 'y'", "int64"});
}

TEST(OpGraphHostile, ValidateRefusesAnInputNoNodeReads) {
  Graph g;
  Tensor x = in(g, {4}, DType::f32, "x");
  Tensor stray = in(g, {4}, DType::f32, "stray");
  g.pointwise("exp", x).set_output(true);
  expect_throw_with<InvalidArgument>(
      [&] { g.validate(); }, {"Graph::validate", "input 'stray'",
                              "(uid " + std::to_string(stray.uid()) + ")", "read by no node"});
  EXPECT_FALSE(g.frozen());
  g.pointwise("neg", stray);
  EXPECT_NO_THROW(g.validate());
  // A ragged offset is read through the tensor it places: not a stray input.
  Graph r;
  Tensor q = in(r, {6, 2, 4}, DType::f32, "q");
  Tensor k = in(r, {6, 2, 4}, DType::f32, "k");
  Tensor cu = in(r, {3}, DType::i32, "cu");
  Tensor off = in(r, {3}, DType::i32, "off");
  q.set_ragged_offset(off);
  r.op("sdpa", {{"q", q}, {"k", k}, {"v", k}, {"cu_seqlens_q", cu}, {"cu_seqlens_kv", cu}});
  EXPECT_NO_THROW(r.validate());
}

}  // namespace
}  // namespace eagle::op
