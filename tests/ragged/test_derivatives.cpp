// Reverse mode through the ragged kernels (src/ragged/row_derivative.cpp) on the CPU: mask_rows
// and gradient_barrier against float64 central finite differences of the forward graph itself,
// fresh random inputs whose padding rows are NaN (the gradient's active rows finite and right,
// its padding rows exactly 0), over batches with an empty sequence, a full batch (L = T) and an
// all-padding one; the integer kernels (validate, chunk_offsets, chunk_tasks, active_rows)
// declare no_gradient and are accepted upstream of a differentiated path. (The refusal of a
// kernel without a derivative on the path: DiffReverse.AKernelWithoutADerivativeOnThePathIsRefused,
// tests/diff/test_diff_reverse.cpp; every library kernel now has a rule or no_gradient.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "eagle/eagle.hpp"
#include "eagle/ragged/kernels.hpp"
#include "eagle/ragged/validate.hpp"
#include "graph_gradients.hpp"
#include "random.hpp"

namespace eagle {
namespace {

const Device cpu = Device::cpu();
constexpr DType f64 = DType::f64;
constexpr int64_t kCols = 3;

// A batch: its cu_seqlens, T rows, and the active end L = cu_seqlens[N].
struct Batch {
  std::string what;
  std::vector<int32_t> cu;
  int64_t tokens;
  int64_t active_end() const { return cu.back(); }
  Array cu_array() const { return Array::from(cu, {static_cast<int64_t>(cu.size())}, cpu); }
  Shape shape() const { return {tokens, kCols}; }  // the inputs' shape, but where noted
};

std::vector<Batch> batches() {
  return {{"an empty sequence, 2 padding rows", {0, 2, 2, 5}, 7},
          {"full (L = T), an empty last sequence", {0, 2, 6, 6}, 6},
          {"only padding (L = 0)", {0, 0, 0}, 2}};
}

// Elements per row of an array [T, ...].
int64_t per_row(const Shape& shape) {
  int64_t n = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

// Random values of `shape` ([T, ...]), never zero, with the padding rows (>= L) NaN.
Array nan_padded(const Batch& b, const Shape& shape) {
  std::vector<double> v = test::random_values(static_cast<std::size_t>(b.tokens * per_row(shape)));
  for (auto i = static_cast<std::size_t>(b.active_end() * per_row(shape)); i < v.size(); ++i)
    v[i] = std::numeric_limits<double>::quiet_NaN();
  return Array::from(v, shape, cpu);
}

// The active rows of `grad` finite and equal to `want`, its padding rows exactly 0.
void expect_active_right_padding_zero(const Batch& b, const Array& grad,
                                      const std::vector<double>& want) {
  ASSERT_EQ(grad.shape()[0], b.tokens);
  const std::vector<double> got = grad.to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  const auto active = static_cast<std::size_t>(b.active_end() * per_row(grad.shape()));
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (i < active) {
      EXPECT_TRUE(std::isfinite(got[i])) << "active element " << i;
      EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "active element " << i;
    } else {
      EXPECT_EQ(got[i], 0.0) << "padding element " << i;
    }
  }
}

// loss = sum(mask_rows(x)^2 * w): dx = 2 x w on the active rows, dw = x^2 there.
TEST(RaggedDerivatives, MaskRowsAgainstFiniteDifferences) {
  for (const Batch& b : batches()) {
    SCOPED_TRACE(b.what);
    const Array x0 = nan_padded(b, b.shape());
    const Array w0 = test::random_array(b.shape(), f64, cpu);  // finite in every row
    Graph g = Graph::record(
        [&](Recorder& r) {
          Value x = r.param("x", x0), w = r.param("w", w0);
          Value m = r.call(ragged::mask_rows(), {x, r.param("cu", b.cu_array())});
          r.result(r.call(kernels::sum(),
                          {r.call(kernels::mul(), {r.call(kernels::mul(), {m, m}), w})}));
        },
        RecordOptions{.record = true});
    g.build(cpu);
    // The differences first: they rerun the forward, and the reverse reads the last forward.
    const std::vector<double> want_dx = test::graph_finite_difference(g, "x", x0);
    const std::vector<double> want_dw = test::graph_finite_difference(g, "w", w0);
    ASSERT_TRUE(std::isfinite(g()[0].to_vector<double>()[0]));
    Graph back = diff::reverse(g, {"result"}, {"x", "w"});
    const std::vector<Array>& grads = back();
    expect_active_right_padding_zero(b, grads[0], want_dx);
    expect_active_right_padding_zero(b, grads[1], want_dw);
  }
}

// An ordinary producer (a = x v) feeds gradient_barrier, whose output b a ragged consumer reads;
// that consumer's gradient may hold anything in the padding rows: here the cotangent c of b,
// NaN there. One graph records forward and reverse: results {loss, dx} with loss =
// sum(mask_rows(b) mask_rows(c)), whose derivative in x is the gradient seeded at b with c.
// With copy in place of the barrier, the NaN reaches dx's padding rows.
Graph barrier_step(const Batch& b, const Array& x0, const Array& v0, const Array& c0,
                   const Kernel& between) {
  return Graph::record(
      [&](Recorder& r) {
        Value x = r.param("x", x0), c = r.param("c", c0), cu = r.param("cu", b.cu_array());
        Value a = r.call(kernels::mul(), {x, r.param("v", v0)});
        Value out = r.empty(b.shape(), f64, "b");
        if (between == kernels::copy())
          r.call(between, {a}, buffer(out));
        else
          r.call(between, {a, cu}, buffer(out));
        Value loss = r.call(kernels::sum(),
                            {r.call(kernels::mul(), {r.call(ragged::mask_rows(), {out, cu}),
                                                     r.call(ragged::mask_rows(), {c, cu})})});
        r.result({loss, diff::gradients(r, {out}, {x}, {c})[0]});
      },
      RecordOptions{.record = true});
}

TEST(RaggedDerivatives, GradientBarrierZeroesThePaddingRowsOfTheGradient) {
  for (const Batch& b : batches()) {
    SCOPED_TRACE(b.what);
    const Array x0 = nan_padded(b, b.shape()), c0 = nan_padded(b, b.shape());
    const Array v0 = test::random_array(b.shape(), f64, cpu);
    Graph g = barrier_step(b, x0, v0, c0, ragged::gradient_barrier());
    g.build(cpu);
    const std::vector<double> want = test::graph_finite_difference(g, "x", x0);
    const std::vector<Array>& out = g();
    ASSERT_TRUE(std::isfinite(out[0].to_vector<double>()[0]));
    expect_active_right_padding_zero(b, out[1], want);
    // The reverse of the built forward, seeded at the loss, agrees.
    Graph back = diff::reverse(g, {"result.0"}, {"x"});
    expect_active_right_padding_zero(b, back()[0], want);

    if (b.active_end() == b.tokens) continue;  // no padding rows: nothing to contrast
    Graph plain = barrier_step(b, x0, v0, c0, kernels::copy());
    plain.build(cpu);
    const std::vector<double> leaked = plain()[1].to_vector<double>();
    EXPECT_TRUE(std::isnan(leaked.back())) << "without the barrier the NaN flows back";
  }
}

// mask_rows' derivative reads cu_seqlens: overwritten after the forward call, it is saved.
TEST(RaggedDerivatives, ACuSeqlensOverwrittenLaterIsSavedForTheDerivative) {
  const Batch b = batches()[0];
  const Array x0 = nan_padded(b, b.shape());
  Graph g = Graph::record(
      [&](Recorder& r) {
        Value x = r.param("x", x0);
        Value cu = r.empty({static_cast<int64_t>(b.cu.size())}, DType::i32, "cu");
        r.call(kernels::copy(), {r.param("cu_in", b.cu_array())}, buffer(cu));
        Value m = r.call(ragged::mask_rows(), {x, cu});
        Value loss = r.call(kernels::sum(), {r.call(kernels::mul(), {m, m})});
        r.call(kernels::fill(), {0.0}, buffer(cu));  // every row padding from here on
        r.result(loss);
      },
      RecordOptions{.record = true});
  EXPECT_GT(g.saved_bytes(), 0u);
  g.build(cpu);
  const std::vector<double> want = test::graph_finite_difference(g, "x", x0);
  g();
  Graph back = diff::reverse(g, {"result"}, {"x"});
  expect_active_right_padding_zero(b, back()[0], want);
}

// The batch's metadata checked and scheduled (validate, chunk_offsets, chunk_tasks) and its
// active-row mask feeding a where on the differentiated path: the reverse pass accepts the graph
// and treats what those kernels write as constants. loss = sum(where(mask, m^2, m) w), over
// x [T] (where takes the mask's shape).
TEST(RaggedDerivatives, IntegerKernelsUpstreamOfADifferentiatedPathAreAccepted) {
  for (const Batch& b : batches()) {
    SCOPED_TRACE(b.what);
    const int64_t chunk = 2, tasks = 4;
    const Array x0 = nan_padded(b, {b.tokens});
    const Array w0 = test::random_array({b.tokens}, f64, cpu);
    Graph g = Graph::record(
        [&](Recorder& r) {
          Value x = r.param("x", x0), w = r.param("w", w0), cu = r.param("cu", b.cu_array());
          ragged::validate(r, cu, b.tokens, "cu");
          Value offsets = r.call(ragged::chunk_offsets(), {cu, b.tokens, chunk});
          Value task_list = r.call(ragged::chunk_tasks(), {cu, offsets, b.tokens, chunk, tasks});
          Value mask = r.call(ragged::active_rows(), {cu, b.tokens});  // [T] u8
          Value m = r.call(ragged::mask_rows(), {x, cu});
          Value z = r.call(kernels::where(), {mask, r.call(kernels::mul(), {m, m}), m});
          r.result({r.call(kernels::sum(), {r.call(kernels::mul(), {z, w})}), task_list});
        },
        RecordOptions{.record = true});
    g.build(cpu);
    const std::vector<double> want = test::graph_finite_difference(g, "x", x0);
    g();
    Graph back = diff::reverse(g, {"result.0"}, {"x"});
    expect_active_right_padding_zero(b, back()[0], want);
  }
}

TEST(RaggedDerivatives, EveryRaggedKernelHasARuleOrDeclaresNoGradient) {
  for (const Kernel* k : {&ragged::mask_rows(), &ragged::gradient_barrier()}) {
    SCOPED_TRACE(k->name());
    const VjpRule* rule = derivative_of(*k);
    ASSERT_NE(rule, nullptr);
    EXPECT_FALSE(k->def().no_gradient);
    EXPECT_FALSE(rule->reads(0));  // x: dx depends on the cotangent only
    EXPECT_TRUE(rule->reads(1));   // cu_seqlens
  }
  for (const Kernel* k : {&ragged::validate_cu_seqlens(), &ragged::chunk_offsets(),
                          &ragged::chunk_tasks(), &ragged::active_rows()}) {
    SCOPED_TRACE(k->name());
    EXPECT_TRUE(k->def().no_gradient);
    EXPECT_EQ(derivative_of(*k), nullptr);
  }
}

}  // namespace
}  // namespace eagle
