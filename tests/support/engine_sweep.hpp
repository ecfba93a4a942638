// The engine sweep: every op x dtype x knob point of one engine against the reference engine.
//
// For an engine of a manifest, cases() lists one case per op of the engine's own table, per
// dtype of its Capabilities and per point of the product of its knob domains. run() builds a
// one-node graph of the case's op over fresh random inputs drawn inside the op's domain (the
// pointwise oracle's ranges), plans it pinned to the engine and knobs (create_for), runs it on
// the engine's device with the output poisoned with NaN, runs the same graph on the family's
// reference engine on the CPU (float64 math, rounded once to the output dtype), and compares.
//
// Tolerances are those of the OUTPUT dtype. The engines compute in f32 and round once to the
// output: for 16-bit outputs that rounding dominates (f32 math error is ~1e-7, a 16-bit unit in
// the last place is 1e-3 to 8e-3), for f32 outputs the f32 math itself (a few units in the last
// place). Two gates, both must pass:
//   * the method's relative error ||got - ref|| / ||ref|| <= tolerance(dtype) (f32 1e-6, f16
//     2e-3, bf16 1e-2); NaN never passes;
//   * every element within one unit in the last place of a 16-bit output (2^-10 |ref| for f16,
//     2^-7 |ref| for bf16, plus the smallest subnormal), or 1e-5 |ref| for f32, because a norm
//     over millions of elements dilutes an error confined to a few (a wrong tail block).
// Each case runs at two shapes: a tiny one (less than one block) and a large odd one (many
// blocks, with a partial last one, and more than one grid-stride pass of a grid capped at 32
// blocks per SM on a 132-SM H200 even at block 512).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "eagle/eagle.hpp"

namespace eagle::test::sweep {

struct Case {
  int64_t engine_id = -1;
  std::string engine;  // the engine's name
  std::string op;
  DType dtype = DType::f32;
  plan::Knobs knobs;
  // A GoogleTest-safe name: "<op>_<dtype>_<knob><value>...", e.g. "add_f32_block256".
  std::string name() const;
};
void PrintTo(const Case& c, std::ostream* os);

// The engine named `engine` in family `family` of `manifest`; throws std::invalid_argument
// when there is none.
int64_t engine_id(const plan::Manifest& manifest, const std::string& family,
                  const std::string& engine);

// Every (op, dtype, knob point) of `engine_id`: `ops` in their order (the engine's own table),
// each dtype of its Capabilities, each point of the cartesian product of its knob domains.
std::vector<Case> cases(const plan::Manifest& manifest, int64_t engine_id,
                        const std::vector<std::string>& ops);
// The parameter-name generator for INSTANTIATE_TEST_SUITE_P.
std::string case_name(const ::testing::TestParamInfo<Case>& info);

// A one-node graph of pointwise `op` over operands of `dims` in `dtype` (a `cond` port boolean;
// a required dtype attribute, cast's, set to `dtype`), the output marked an output.
op::Graph one_node_graph(const std::string& op, const op::Dims& dims, DType dtype);

// A descriptor of the device an engine with `caps` runs on, without querying one: planning
// declines need no device attached (CPU, or cuda:0 at the lowest sm the engine serves).
DeviceProperties stand_in_device(const plan::Capabilities& caps);

// Why the engine cannot run here (no device of its kind, a GPU outside its sm range), or "".
std::string unavailable(const plan::Manifest& manifest, int64_t engine_id);

struct Options {
  std::vector<op::Dims> shapes = {{3, 5}, {2113, 1031}};
};

// Runs `c` at every shape of `options` as described above, reporting through GoogleTest
// (failures name the shape, the worst element and its inputs). Call unavailable() first.
void run(const Case& c, const plan::Manifest& manifest = engines::builtin_manifest(),
         const Options& options = {});

// ---- any one-node graph (the structured ops) ----

// Host arrays for a graph's inputs, by tensor.
using HostInputs = std::vector<std::pair<op::Tensor, Array>>;

// Fresh host inputs of a one-node pointwise graph, each drawn inside its op's range in
// tests/support/oracles/pointwise.cpp (cond half true). Throws std::logic_error for an op the
// oracle table has no row for.
HostInputs oracle_inputs(const op::Graph& graph);

// Runs `graph` (its outputs marked) pinned to (engine_id, knobs) on the engine's device, with
// `inputs` copied there and every output poisoned with NaN; runs a clone on the family's
// reference engine on the CPU (float64, rounded once to each output's dtype); and compares every
// output the caller receives. Two gates per output, both must pass: the relative error of the
// method within tolerance(dtype) (1e-5 for f32: fast exps and long cancelling sums), and every
// element within one unit in the last place of its
// dtype (2^-10 f16, 2^-7 bf16, 1e-5 f32) of |ref| + the output's RMS (an absolute floor, so an
// element that cancels to near zero is judged on the scale of its neighbours), `ulps` such
// units where a case says why it needs more. Where the reference gives NaN or an infinity the
// engine must give the same (those elements are left out of the norms). `graph` itself is not
// planned (clones are). `offset` > 0 places every device operand that many elements into its
// storage (a pointer no longer 16-byte aligned: an engine's unaligned path).
void compare_with_reference(const plan::Manifest& manifest, int64_t engine_id,
                            const plan::Knobs& knobs, const op::Graph& graph,
                            const HostInputs& inputs, double ulps = 1, int64_t offset = 0);

// Expects `engine_id` to decline `graph` on `device` with NotSupported naming the engine and
// every one of `needles`.
void expect_declines(const plan::Manifest& manifest, int64_t engine_id, const op::Graph& graph,
                     const DeviceProperties& device, std::initializer_list<std::string> needles);

// The fixture of an engine sweep: skips when the engine cannot run here.
//   class MySweep : public test::sweep::EngineSweep {};
//   TEST_P(MySweep, MatchesTheReference) { test::sweep::run(GetParam()); }
//   INSTANTIATE_TEST_SUITE_P(my_engine, MySweep, ::testing::ValuesIn(cases(...)), case_name);
class EngineSweep : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const std::string why = unavailable(engines::builtin_manifest(), GetParam().engine_id);
    if (!why.empty()) GTEST_SKIP() << why;
  }
};

}  // namespace eagle::test::sweep
