// The native pointwise engine, swept: every op of its own kernel table (EAGLE_POINTWISE_OPS) x
// every dtype of its capabilities x every block size of its knob domain, on cuda:0 against the
// reference engine on the CPU (tests/support/engine_sweep.hpp says how and within what). A new
// op in the table is swept without editing this file. Without a GPU the sweep skips; the
// decline tests plan for a stand-in device descriptor and run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "engine_sweep.hpp"
#include "engines/native/pointwise_kernels.hpp"
#include "oracles/pointwise.hpp"
#include "test_util.hpp"

namespace eagle::test {
namespace {

struct TableOp {
  std::string name;
  bool binary;
};

// The engine's own table, as its kernels are generated from it.
const std::vector<TableOp>& table() {
  static const std::vector<TableOp> ops = {
#define EAGLE_SWEEP_OP(name, binary) {#name, binary},
      EAGLE_POINTWISE_OPS(EAGLE_SWEEP_OP)
#undef EAGLE_SWEEP_OP
  };
  return ops;
}

std::vector<std::string> table_names() {
  std::vector<std::string> names;
  for (const TableOp& op : table()) names.push_back(op.name);
  return names;
}

const plan::Manifest& manifest() {
  return engines::builtin_manifest();
}
int64_t native_id() {
  return sweep::engine_id(manifest(), "pointwise", "native_pointwise");
}
const plan::Capabilities& caps() {
  return manifest().engine(native_id())->capabilities();
}

// ---- the sweep: one test per op x dtype x block ----

class NativePointwiseSweep : public sweep::EngineSweep {};

// The sweep's two shapes (tiny; large and odd: the one-element kernel) and a large one whose
// element count splits into 16-byte vectors of every dtype (the vector kernel).
TEST_P(NativePointwiseSweep, MatchesTheReference) {
  sweep::run(GetParam(), manifest(), {.shapes = {{3, 5}, {2113, 1031}, {129, 4104}}});
}

// A vector-sized call whose operands sit one element past a 16-byte boundary takes the
// one-element kernel (the plan holds both; the call's pointers choose), and computes the same.
TEST(NativePointwiseVector, UnalignedOperandsTakeTheOneElementKernel) {
  const std::string why = sweep::unavailable(manifest(), native_id());
  if (!why.empty()) GTEST_SKIP() << why;
  for (const char* op : {"gelu", "gelu_backward", "add"})
    for (DType d : {DType::f32, DType::bf16})
      for (int64_t offset : {0, 1}) {
        SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(d)) + " offset " +
                     std::to_string(offset));
        const op::Graph g = sweep::one_node_graph(op, {64, 136}, d);
        sweep::compare_with_reference(manifest(), native_id(), {{"block", 256}}, g,
                                      sweep::oracle_inputs(g), 1, offset);
      }
}

INSTANTIATE_TEST_SUITE_P(native_pointwise, NativePointwiseSweep,
                         ::testing::ValuesIn(sweep::cases(manifest(), native_id(), table_names())),
                         sweep::case_name);

// ---- what the sweep covers ----

TEST(NativePointwiseTable, EveryOpIsAnIrPointwiseOpOfTheSameArityWithAnInputRange) {
  ASSERT_FALSE(table().empty());
  std::set<std::string> seen;
  for (const TableOp& op : table()) {
    SCOPED_TRACE(op.name);
    EXPECT_TRUE(seen.insert(op.name).second) << "listed twice";
    const op::OpSchema* schema = op::find_op(op.name);
    ASSERT_NE(schema, nullptr);
    EXPECT_EQ(schema->kind, op::OpKind::pointwise);
    EXPECT_EQ(schema->inputs.size(), op.binary ? 2u : 1u);
    EXPECT_NE(oracle::pointwise(op.name), nullptr) << "tests/support/oracles/pointwise.cpp";
  }
}

TEST(NativePointwiseTable, TheSweepListsEveryOpDtypeAndBlock) {
  const std::vector<sweep::Case> cases = sweep::cases(manifest(), native_id(), table_names());
  ASSERT_EQ(caps().knobs.size(), 1u);
  const std::vector<int64_t>& blocks = caps().knobs.at("block");
  EXPECT_EQ(cases.size(), table().size() * caps().dtypes.size() * blocks.size());
  std::set<std::string> names;
  for (const sweep::Case& c : cases) names.insert(c.name());
  EXPECT_EQ(names.size(), cases.size()) << "two cases share a test name";
  for (const TableOp& op : table())
    for (DType d : caps().dtypes)
      for (int64_t b : blocks)
        EXPECT_EQ(
            names.count(op.name + "_" + std::string(dtype_name(d)) + "_block" + std::to_string(b)),
            1u);
}

// ---- the decline path: what the engine does not serve is declined with NotSupported ----

TEST(NativePointwiseDeclines, IrPointwiseOpsOutsideItsTable) {
  const DeviceProperties gpu = sweep::stand_in_device(caps());
  const std::vector<std::string> served = table_names();
  int declined = 0;
  for (const op::OpSchema* schema : op::all_ops()) {
    if (schema->kind != op::OpKind::pointwise) continue;
    if (std::find(served.begin(), served.end(), schema->name) != served.end()) continue;
    SCOPED_TRACE(schema->name);
    sweep::expect_declines(manifest(), native_id(),
                           sweep::one_node_graph(schema->name, {4, 8}, DType::f32), gpu,
                           {"no kernel for op " + schema->name});
    ++declined;
  }
  EXPECT_GT(declined, 0);
}

TEST(NativePointwiseDeclines, FloatingDtypesOutsideItsCapabilities) {
  const DeviceProperties gpu = sweep::stand_in_device(caps());
  for (DType d : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    if (std::find(caps().dtypes.begin(), caps().dtypes.end(), d) != caps().dtypes.end()) continue;
    for (const std::string& op : table_names()) {
      SCOPED_TRACE(op + " in " + std::string(dtype_name(d)));
      sweep::expect_declines(manifest(), native_id(), sweep::one_node_graph(op, {4, 8}, d), gpu,
                             {"does not serve io dtype " + std::string(dtype_name(d))});
    }
  }
}

// Integer operands: the kernels compute in float on float storage, so a graph of integers has
// no kernel. The IR accepts integers for the ops of class `any` (add, neg, relu, ...).
TEST(NativePointwiseDeclines, IntegerAndBooleanDtypes) {
  const DeviceProperties gpu = sweep::stand_in_device(caps());
  for (DType d : {DType::i64, DType::i32, DType::u32, DType::u8, DType::boolean}) {
    for (const std::string& op : table_names()) {
      const op::OpSchema* schema = op::find_op(op);
      if (schema->inputs[0].dtypes == op::DTypeClass::floating) continue;  // the IR refuses
      SCOPED_TRACE(op + " in " + std::string(dtype_name(d)));
      sweep::expect_declines(manifest(), native_id(), sweep::one_node_graph(op, {4, 8}, d), gpu,
                             {});
    }
  }
}

}  // namespace
}  // namespace eagle::test
