// The native reduction engine against the reference engine on fresh random inputs, every mode,
// trailing, leading, middle, scattered and all axes, keepdim or not, each path (rows by a warp
// or a block, split rows combined by a warp or a block, columns with packs or scalars, strided),
// NaN and empty reductions (GPU; skipped without one), and its declines, its plans' geometry
// and its place in the plan list (everywhere).
#include <gtest/gtest.h>

#include <cmath>

#include "cuda_build.hpp"
#include "native_structured.hpp"

namespace eagle::test::native {
namespace {

int64_t reduction_id() {
  return engine("pointwise", "native_reduction");
}

op::Graph reduction_graph(const op::Dims& dims, DType dtype, const std::string& mode,
                          const std::vector<int64_t>& axes, bool keepdim) {
  op::Graph g("reduction");
  const op::Tensor x = g.tensor({"x", dims, dtype});
  g.op("reduction", {{"x", x}}, {{"mode", mode}, {"axes", axes}, {"keepdim", keepdim}})
      .at("y")
      .set_output(true)
      .set_name("y");
  return g;
}

struct AxesCase {
  op::Dims dims;
  std::vector<int64_t> axes;
  bool keepdim;
};

const std::vector<AxesCase>& axes_cases() {
  static const std::vector<AxesCase> c = {
      {{3, 5}, {-1}, false},         {{1, 1}, {}, false},
      {{127, 4099}, {1}, true},      {{2113, 1031}, {0}, false},  // columns: strided
      {{7, 131072}, {}, false},       // all axes: split rows, combined partials
      {{3, 200000}, {1}, false},      // few long rows: split
      {{4, 6, 5, 3}, {0, 2}, false},  // scattered: strided, two reduced runs
      {{4, 6, 5, 3}, {1, 2}, true},   // middle run
      {{4, 6, 5, 3}, {2, 3}, false},  // trailing run: rows
      {{4, 1, 5, 1}, {1, 3}, false},  // only size-1 axes: a copy through the mode
      {{300, 4096}, {1}, false},      // rows, 16-byte packs: a warp a row (bf16), a block (f32)
      {{40, 65536}, {}, false},       // all axes, more splits than a warp combines: a block does
      {{64, 32768}, {0, 1}, false},   // all axes, 256 splits: a warp combines them
      {{3000, 256}, {0}, false},      // columns, 16-byte packs, count split into chunks
      {{3, 700, 64}, {1}, true},      // columns with an outer kept axis, packs
      {{4099, 24}, {0}, false},       // columns narrower than a warp of packs
      {{5, 37, 33}, {1}, false}};     // columns, odd inner: scalar loads
  return c;
}

// Inputs around 1 for prod: products of thousands stay in range, and products of 10^5 or more
// under- or overflow alike in the reference and the engine (the comparison wants the same 0 or
// infinity there).
std::pair<double, double> range_of(const std::string& mode) {
  if (mode == "prod") return {0.9, 1.1};
  return {-1.0, 1.0};
}

class NativeReduction : public ::testing::TestWithParam<DType> {};

TEST_P(NativeReduction, EveryModeAndAxesMatchTheReference) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(reduction_id());
  for (const char* mode : {"sum", "mean", "max", "min", "prod", "l2", "amax"})
    for (const AxesCase& c : axes_cases()) {
      std::string axes;
      for (int64_t a : c.axes) axes += std::to_string(a) + " ";
      SCOPED_TRACE(std::string(mode) + " of [" + dims_name(c.dims) + "] over axes { " + axes + "}" +
                   (c.keepdim ? " keepdim" : ""));
      const op::Graph g = reduction_graph(c.dims, GetParam(), mode, c.axes, c.keepdim);
      const auto [lo, hi] = range_of(mode);
      const op::Tensor x = g.nodes()[0].input("x");
      sweep::compare_with_reference(manifest(), reduction_id(), {}, g,
                                    {{x, random_array(c.dims, GetParam(), Device::cpu(), lo, hi)}});
    }
}

// x with NaN planted in one row (rows path), one column (columns path) and the flat array
// (all axes): max, min and amax must give NaN exactly where the reference does; sum too.
TEST_P(NativeReduction, NaNPropagatesOnEveryPath) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(reduction_id());
  const op::Dims dims = {257, 1024};
  std::vector<double> values = random_values(257 * 1024);
  values[5 * 1024 + 77] = std::nan("");     // row 5, column 77
  values[200 * 1024 + 901] = std::nan("");  // row 200, column 901
  for (const char* mode : {"max", "min", "amax", "sum"})
    for (const std::vector<int64_t>& axes : {std::vector<int64_t>{1}, {0}, {}}) {
      SCOPED_TRACE(std::string(mode) + " over " + std::to_string(axes.size()) + " axes" +
                   (axes.empty()   ? " (all)"
                    : axes[0] == 0 ? " (columns)"
                                   : " (rows)"));
      const op::Graph g = reduction_graph(dims, GetParam(), mode, axes, false);
      const op::Tensor x = g.nodes()[0].input("x");
      sweep::compare_with_reference(manifest(), reduction_id(), {}, g,
                                    {{x, from_doubles(values, dims, GetParam(), Device::cpu())}});
    }
}

// The mean of no elements is NaN, on the rows and the columns paths.
TEST_P(NativeReduction, MeanOfNothingIsNaN) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(reduction_id());
  for (const std::vector<int64_t>& axes : {std::vector<int64_t>{1}, {0}}) {
    const op::Dims dims = axes[0] == 1 ? op::Dims{6, 0} : op::Dims{0, 6};
    SCOPED_TRACE("mean of [" + dims_name(dims) + "] over axis " + std::to_string(axes[0]));
    const op::Graph g = reduction_graph(dims, GetParam(), "mean", axes, false);
    const op::Tensor x = g.nodes()[0].input("x");
    sweep::compare_with_reference(manifest(), reduction_id(), {}, g,
                                  {{x, from_doubles({}, dims, GetParam(), Device::cpu())}});
  }
}

INSTANTIATE_TEST_SUITE_P(native_reduction, NativeReduction, ::testing::ValuesIn(float_dtypes()),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return std::string(dtype_name(i.param));
                         });

TEST(NativeReductionPlanning, TheNativeEngineLeadsOnAGpuAndSplitsFewLongRows) {
  EAGLE_SKIP_WITHOUT_CUDA_BUILD();
  plan::ExecutionPlans plans = plan::ExecutionPlans::create(
      reduction_graph({16384, 4096}, DType::bf16, "sum", {}, false), manifest(), hopper());
  ASSERT_GE(plans.count(), 1);
  EXPECT_EQ(plans.at(0).engine_id, reduction_id()) << plans.describe();
  EXPECT_EQ(plans.build_plans(), 0);
  EXPECT_GT(plans.workspace_size(), 0u);  // one row of 2^26 elements, split
  plan::ExecutionPlans rows = plan::ExecutionPlans::create(
      reduction_graph({16384, 4096}, DType::bf16, "max", {-1}, false), manifest(), hopper());
  EXPECT_EQ(rows.build_plans(), 0);
  EXPECT_EQ(rows.workspace_size(), 0u);
  // Columns: 4096 outputs are fewer than a wave of threads, so each splits its 16384 rows.
  plan::ExecutionPlans columns = plan::ExecutionPlans::create(
      reduction_graph({16384, 4096}, DType::f32, "max", {0}, false), manifest(), hopper());
  EXPECT_EQ(columns.build_plans(), 0);
  EXPECT_GT(columns.workspace_size(), 0u);
}

TEST(NativeReductionPlanning, PointwiseGraphsDoNotListIt) {
  op::Graph g("add");
  const op::Tensor a = g.tensor({"a", {4, 8}, DType::f32});
  g.pointwise("add", a, a).set_output(true);
  const plan::ExecutionPlans plans = plan::ExecutionPlans::create(g, manifest(), hopper());
  for (int i = 0; i < plans.count(); ++i) EXPECT_NE(plans.at(i).engine_id, reduction_id());
}

TEST(NativeReductionDeclines, IntegerData) {
  sweep::expect_declines(manifest(), reduction_id(),
                         reduction_graph({4, 8}, DType::i32, "sum", {}, false), hopper(),
                         {"x must be f32, f16 or bf16, not i32"});
}

TEST(NativeReductionDeclines, StridedInput) {
  op::Graph g("strided");
  const op::Tensor x = g.tensor({"x", {4, 8}, DType::f32, {1, 4}});
  g.op("reduction", {{"x", x}}, {{"mode", "sum"}}).at("y").set_output(true);
  sweep::expect_declines(manifest(), reduction_id(), g, hopper(), {"'x' must be dense row-major"});
}

TEST(NativeReductionHarness, TheReferencePassesAgainstItself) {
  const op::Graph g = reduction_graph({4, 6, 5, 3}, DType::bf16, "l2", {0, 2}, true);
  const op::Tensor x = g.nodes()[0].input("x");
  sweep::compare_with_reference(manifest(), engine("pointwise", "reference"), {}, g,
                                {{x, random_array({4, 6, 5, 3}, DType::bf16, Device::cpu())}});
}

// The inputs of the NaN and empty cases are ones the harness and the reference take (CPU).
TEST(NativeReductionHarness, TheReferencePassesAgainstItselfOnNaNAndEmptyInputs) {
  std::vector<double> values = random_values(4 * 8);
  values[13] = std::nan("");
  const op::Graph nan_max = reduction_graph({4, 8}, DType::bf16, "max", {0}, false);
  sweep::compare_with_reference(
      manifest(), engine("pointwise", "reference"), {}, nan_max,
      {{nan_max.nodes()[0].input("x"), from_doubles(values, {4, 8}, DType::bf16, Device::cpu())}});
  const op::Graph empty = reduction_graph({6, 0}, DType::f32, "mean", {1}, false);
  sweep::compare_with_reference(
      manifest(), engine("pointwise", "reference"), {}, empty,
      {{empty.nodes()[0].input("x"), from_doubles({}, {6, 0}, DType::f32, Device::cpu())}});
}

}  // namespace
}  // namespace eagle::test::native
