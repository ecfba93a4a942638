// Reference structured semantics: reductions, softmax, norms, matmul, embedding and cross entropy,
// on hand-worked cases and against independent float64 formulas on fresh random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <string>

#include "dense.hpp"
#include "engines/reference/math/pointwise.hpp"
#include "engines/reference/math/structured.hpp"
#include "oracles/structured.hpp"
#include "test_util.hpp"

namespace eagle::reference {
namespace {

using test::expect_all_near;
using test::expect_throw_with;
using test::make_dense;
using test::random_dense;
namespace oracle = test::oracle;
using Values = std::vector<double>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTol = 1e-12;
const double kLn2 = std::log(2.0), kLn3 = std::log(3.0);

// ---- reduce ----

TEST(Reduce, EveryModeOnAHandCase) {
  const Dense x = make_dense({2, 3}, {1, -2, 3, 4, 5, -6});
  struct Case {
    std::string_view mode;
    Values rows;  // reduced over axis 1
  };
  const Case cases[] = {
      {"sum", {2, 3}},   {"mean", {2.0 / 3, 1}}, {"max", {3, 5}},
      {"min", {-2, -6}}, {"prod", {-6, -120}},   {"l2", {std::sqrt(14.0), std::sqrt(77.0)}},
      {"amax", {3, 6}},
  };
  for (const auto& c : cases) {
    const Dense y = reduce(x, c.mode, {1}, false);
    EXPECT_EQ(y.dims, Dims{2}) << c.mode;
    EXPECT_CLOSE(y.data, c.rows, kTol);
  }
  EXPECT_EQ(reduce(x, "sum", {0}, false).data, (Values{5, 3, -3}));
  EXPECT_EQ(reduce(x, "max", {-2}, false).data, (Values{4, 5, 3}));
}

TEST(Reduce, KeepdimAndEmptyAxes) {
  const Dense x = make_dense({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(reduce(x, "sum", {1}, true).dims, (Dims{2, 1}));
  const Dense all = reduce(x, "sum", {}, false);
  EXPECT_EQ(all.dims, Dims{});
  EXPECT_EQ(all.data, Values{21});
  const Dense kept = reduce(x, "mean", {}, true);
  EXPECT_EQ(kept.dims, (Dims{1, 1}));
  EXPECT_EQ(kept.data, Values{3.5});
  EXPECT_EQ(reduce(x, "prod", {0, 1}, false).data, Values{720});
}

TEST(Reduce, AllAxesEqualsEachAxisInTurn) {
  const Dense x = random_dense({3, 4, 5});
  Dense stepwise = x;
  for (int k = 0; k < 3; ++k) stepwise = reduce(stepwise, "sum", {0}, false);
  EXPECT_CLOSE(reduce(x, "sum", {}, false).data, stepwise.data, kTol);

  // mean over two axes = sum / count; l2 = sqrt(sum of squares).
  const Dense sum02 = reduce(x, "sum", {0, -1}, false);
  Values mean_want;
  for (double s : sum02.data) mean_want.push_back(s / 15);
  EXPECT_CLOSE(reduce(x, "mean", {2, 0}, false).data, mean_want, kTol);
  const Dense sq = reduce(map_unary(unary_fn("square"), x), "sum", {1}, false);
  EXPECT_CLOSE(reduce(x, "l2", {1}, false).data, map_unary(unary_fn("sqrt"), sq).data, kTol);
}

TEST(Reduce, MaxMinAmaxMatchBruteForce) {
  const Dense x = random_dense({3, 4, 5});
  const Dense mx = reduce(x, "max", {0, 2}, true), mn = reduce(x, "min", {0, 2}, false),
              am = reduce(x, "amax", {0, 2}, false);
  ASSERT_EQ(mx.dims, (Dims{1, 4, 1}));
  EXPECT_EQ(mx.data, oracle::reduce(x, "max", {0, 2}, true).data);
  EXPECT_EQ(mn.data, oracle::reduce(x, "min", {0, 2}, false).data);
  EXPECT_EQ(am.data, oracle::reduce(x, "amax", {0, 2}, false).data);
}

TEST(Reduce, OverNoElements) {
  const Dense x(Dims{2, 0});
  const std::pair<std::string_view, double> want[] = {{"sum", 0},    {"prod", 1}, {"max", -kInf},
                                                      {"min", kInf}, {"l2", 0},   {"amax", 0}};
  for (auto [mode, v] : want) EXPECT_EQ(reduce(x, mode, {1}, false).data, (Values{v, v})) << mode;
  const Dense mean = reduce(x, "mean", {1}, false);
  EXPECT_TRUE(std::isnan(mean.data[0]) && std::isnan(mean.data[1]));
  EXPECT_TRUE(reduce(x, "sum", {0}, false).data.empty());
}

TEST(Reduce, NaNPropagatesThroughEveryMode) {
  // NaN first in row 0 and last in row 1, so no mode drops it by position; row 2 is clean.
  const Dense x = make_dense({3, 3}, {kNaN, 1, 2, 3, -4, kNaN, 1, 2, 3});
  for (std::string_view mode : {"sum", "mean", "max", "min", "prod", "l2", "amax"}) {
    const Dense y = reduce(x, mode, {1}, false);
    EXPECT_TRUE(std::isnan(y.data[0]) && std::isnan(y.data[1])) << mode;
    EXPECT_FALSE(std::isnan(y.data[2])) << mode;
  }
}

TEST(Reduce, RefusesBadModeAndAxes) {
  const Dense x(Dims{2, 3, 4});
  expect_throw_with<InvalidArgument>([&] { reduce(x, "avg", {0}, false); },
                                     {"reduce", "mode 'avg'", "sum"});
  expect_throw_with<InvalidArgument>([&] { reduce(x, "sum", {3}, false); },
                                     {"reduce", "axes entry 3", "[2,3,4]", "[-3, 3)"});
  expect_throw_with<InvalidArgument>([&] { reduce(x, "sum", {-4}, false); }, {"axes entry -4"});
  expect_throw_with<InvalidArgument>(
      [&] {
        reduce(x, "sum", {1, -2}, false);
      },
      {"axes [1,-2]", "axis 1 more than once"});
}

// ---- softmax ----

TEST(Softmax, HandCase) {
  EXPECT_CLOSE(softmax(make_dense({2}, {0, kLn2}), 0, false).data, (Values{1.0 / 3, 2.0 / 3}),
               kTol);
  EXPECT_CLOSE(softmax(make_dense({2}, {0, kLn2}), -1, true).data,
               (Values{std::log(1.0 / 3), std::log(2.0 / 3)}), kTol);
  // Shifted far past exp's range: the max subtraction keeps it exact.
  EXPECT_CLOSE(softmax(make_dense({2}, {1000, 1000 + kLn2}), 0, false).data,
               (Values{1.0 / 3, 2.0 / 3}), kTol);
  EXPECT_CLOSE(softmax(make_dense({2}, {-1000, -1000 + kLn2}), 0, true).data,
               (Values{std::log(1.0 / 3), std::log(2.0 / 3)}), kTol);
}

TEST(Softmax, LogSoftmaxIsXMinusLogSumExpAlongAMiddleAxis) {
  const Dense x = random_dense({3, 4, 5});
  const Dense ls = softmax(x, 1, true), sm = softmax(x, -2, false);
  // Inputs lie in [-1, 1): the oracle's unshifted sum cannot overflow.
  expect_all_near(ls, oracle::softmax(x, 1, true), kTol);
  expect_all_near(sm, oracle::softmax(x, 1, false), kTol);
  for (double total : oracle::reduce(sm, "sum", {1}, false).data) EXPECT_NEAR(total, 1.0, kTol);
}

TEST(Softmax, InfiniteLanes) {
  // All -inf: 0/0, NaN. A +inf takes everything it can; inf - inf is NaN.
  const Dense all_neg = softmax(make_dense({2}, {-kInf, -kInf}), 0, false);
  EXPECT_TRUE(std::isnan(all_neg.data[0]) && std::isnan(all_neg.data[1]));
  const Dense pos = softmax(make_dense({2}, {kInf, 1}), 0, false);
  EXPECT_TRUE(std::isnan(pos.data[0]));
  EXPECT_EQ(pos.data[1], 0.0);
  // One -inf among finite values is a clean zero.
  EXPECT_CLOSE(softmax(make_dense({3}, {-kInf, 0, 0}), 0, false).data, (Values{0, 0.5, 0.5}), kTol);
  const Dense nan = softmax(make_dense({2, 2}, {kNaN, 0, 1, 1}), 1, false);
  EXPECT_TRUE(std::isnan(nan.data[0]) && std::isnan(nan.data[1]));
  EXPECT_DOUBLE_EQ(nan.data[2], 0.5);
}

TEST(Softmax, RefusesBadAxis) {
  expect_throw_with<InvalidArgument>(
      [] {
        softmax(Dense({2, 3}), 2, false);
      },
      {"softmax", "axis 2", "[2,3]", "[-2, 2)"});
  expect_throw_with<InvalidArgument>([] { softmax(Dense({2, 3}), -3, true); }, {"axis -3"});
}

// ---- layer_norm and rms_norm ----

TEST(LayerNorm, HandCase) {
  // [1,2,3]: mean 2, biased variance 2/3.
  const Dense x = make_dense({1, 3}, {1, 2, 3});
  const NormOut n = layer_norm(x, nullptr, nullptr, 1, 0);
  const double r = std::sqrt(1.5);
  EXPECT_CLOSE(n.y.data, (Values{-r, 0, r}), kTol);
  EXPECT_EQ(n.mean.dims, Dims{1});
  EXPECT_EQ(n.mean.data, Values{2});
  EXPECT_CLOSE(n.inv_std.data, Values{r}, kTol);

  const double eps = 1e-3, inv = 1 / std::sqrt(2.0 / 3 + eps);
  const Dense scale = make_dense({3}, {1, 2, 3}), bias = make_dense({3}, {0.5, 0.5, 0.5});
  const NormOut a = layer_norm(x, &scale, &bias, 1, eps);
  EXPECT_CLOSE(a.y.data, (Values{0.5 - inv, 0.5, 0.5 + 3 * inv}), kTol);
  EXPECT_CLOSE(a.inv_std.data, Values{inv}, kTol);
}

TEST(LayerNorm, RowsHaveZeroMeanAndUnitVariance) {
  const Dense x = random_dense({2, 3, 4});
  const NormOut n = layer_norm(x, nullptr, nullptr, 2, 0);
  ASSERT_EQ(n.mean.dims, Dims{2});
  ASSERT_EQ(n.inv_std.dims, Dims{2});
  for (int r = 0; r < 2; ++r) {
    double s = 0, s2 = 0, ys = 0, ys2 = 0;
    for (int i = 0; i < 12; ++i) {
      s += x.data[r * 12 + i], s2 += x.data[r * 12 + i] * x.data[r * 12 + i];
      ys += n.y.data[r * 12 + i], ys2 += n.y.data[r * 12 + i] * n.y.data[r * 12 + i];
    }
    // The one-pass variance E[x^2] - E[x]^2, independent of the two-pass one under test.
    const double mean = s / 12, var = s2 / 12 - mean * mean;
    EXPECT_NEAR(n.mean.data[r], mean, kTol);
    EXPECT_NEAR(n.inv_std.data[r], 1 / std::sqrt(var), 1e-10);
    EXPECT_NEAR(ys / 12, 0, kTol);
    EXPECT_NEAR(ys2 / 12, 1, 1e-10);
  }
}

TEST(LayerNorm, WholeTensorGivesScalarStatistics) {
  const NormOut n = layer_norm(make_dense({2, 2}, {1, 3, 1, 3}), nullptr, nullptr, 2, 0);
  EXPECT_EQ(n.mean.dims, Dims{});
  EXPECT_EQ(n.mean.data, Values{2});
  EXPECT_EQ(n.y.data, (Values{-1, 1, -1, 1}));
}

TEST(RmsNorm, HandCase) {
  // [3,4]: mean square 12.5.
  const Dense x = make_dense({2}, {3, 4});
  const double inv = 1 / std::sqrt(12.5);
  const RmsOut n = rms_norm(x, nullptr, nullptr, 1, 0);
  EXPECT_EQ(n.inv_rms.dims, Dims{});
  EXPECT_CLOSE(n.inv_rms.data, Values{inv}, kTol);
  EXPECT_CLOSE(n.y.data, (Values{3 * inv, 4 * inv}), kTol);
  const Dense scale = make_dense({2}, {2, -1}), bias = make_dense({2}, {1, 1});
  const double inv_eps = 1 / std::sqrt(12.5 + 0.5);
  EXPECT_CLOSE(rms_norm(x, &scale, &bias, 1, 0.5).y.data,
               (Values{6 * inv_eps + 1, 1 - 4 * inv_eps}), kTol);
}

TEST(RmsNorm, RowsHaveUnitMeanSquare) {
  const Dense x = random_dense({3, 5});
  const Dense scale = random_dense({5});
  const RmsOut n = rms_norm(x, &scale, nullptr, 1, 0);
  ASSERT_EQ(n.inv_rms.dims, Dims{3});
  const oracle::Norm want = oracle::rms_norm(x, &scale, nullptr, 1, 0);
  expect_all_near(n.inv_rms, want.inv, 1e-10);
  expect_all_near(n.y, want.y, 1e-10);
}

TEST(Norms, RefuseBadArguments) {
  const Dense x(Dims{2, 3, 4});
  const Dense good(Dims{3, 4}), bad(Dims{4});
  for (auto* norm : {+[](const Dense&x, const Dense*s, const Dense*b, int nd, double eps) {
                       layer_norm(x, s, b, nd, eps);
                     },
                     +[](const Dense&x, const Dense*s, const Dense*b, int nd, double eps) {
                       rms_norm(x, s, b, nd, eps);
                     }}) {
    expect_throw_with<InvalidArgument>([&] { norm(x, nullptr, nullptr, 0, 0); },
                                       {"normalized_ndim 0", "[1, 3]", "[2,3,4]"});
    expect_throw_with<InvalidArgument>([&] { norm(x, nullptr, nullptr, 4, 0); },
                                       {"normalized_ndim 4"});
    expect_throw_with<InvalidArgument>([&] { norm(x, &bad, nullptr, 2, 0); },
                                       {"scale dims [4]", "[3,4]"});
    expect_throw_with<InvalidArgument>([&] { norm(x, &good, &bad, 2, 0); },
                                       {"bias dims [4]", "[3,4]"});
    expect_throw_with<InvalidArgument>([&] { norm(x, nullptr, nullptr, 1, -1e-5); },
                                       {"epsilon -1e-05", ">= 0"});
    expect_throw_with<InvalidArgument>([&] { norm(x, nullptr, nullptr, 1, kNaN); },
                                       {"epsilon nan"});
  }
  expect_throw_with<InvalidArgument>([&] { layer_norm(x, nullptr, nullptr, 0, 0); },
                                     {"layer_norm"});
  expect_throw_with<InvalidArgument>([&] { rms_norm(x, nullptr, nullptr, 0, 0); }, {"rms_norm"});
}

// ---- matmul ----

TEST(Matmul, HandCases) {
  const Dense a = make_dense({2, 2}, {1, 2, 3, 4}), b = make_dense({2, 2}, {5, 6, 7, 8});
  EXPECT_EQ(matmul(a, b, nullptr).data, (Values{19, 22, 43, 50}));
  const Dense bias = make_dense({2}, {10, 20});
  EXPECT_EQ(matmul(a, b, &bias).data, (Values{29, 42, 53, 70}));
  const Dense c =
      matmul(make_dense({2, 3}, {1, 0, -1, 2, 1, 0}), make_dense({3, 1}, {3, 4, 5}), nullptr);
  EXPECT_EQ(c.dims, (Dims{2, 1}));
  EXPECT_EQ(c.data, (Values{-2, 10}));
  // K = 0: a sum over nothing, so only the bias.
  const Dense col_bias = make_dense({2, 1}, {1, 2});
  EXPECT_EQ(matmul(Dense({2, 0}), Dense({0, 3}), &col_bias).data, (Values{1, 1, 1, 2, 2, 2}));
}

TEST(Matmul, BatchBroadcastEqualsPerBatchLoop) {
  const Dense a = random_dense({2, 1, 3, 4}), b = random_dense({3, 4, 5}), bias = random_dense({5});
  const Dense c = matmul(a, b, &bias);
  ASSERT_EQ(c.dims, (Dims{2, 3, 3, 5}));
  expect_all_near(c, oracle::matmul(a, b, &bias), kTol);
}

TEST(Matmul, NaNPropagatesAlongItsRowAndColumn) {
  Dense a = random_dense({2, 2});
  a.data[0] = kNaN;  // row 0 of the result
  const Dense c = matmul(a, random_dense({2, 2}), nullptr);
  EXPECT_TRUE(std::isnan(c.data[0]) && std::isnan(c.data[1]));
  EXPECT_FALSE(std::isnan(c.data[2]) || std::isnan(c.data[3]));
}

TEST(Matmul, RefusesBadShapes) {
  expect_throw_with<InvalidArgument>(
      [] {
        matmul(Dense({3}), Dense({3, 2}), nullptr);
      },
      {"matmul", "a dims [3]", "at least 2-D"});
  expect_throw_with<InvalidArgument>(
      [] {
        matmul(Dense({2, 3}), Dense({3}), nullptr);
      },
      {"b dims [3]", "at least 2-D"});
  expect_throw_with<InvalidArgument>(
      [] {
        matmul(Dense({2, 5}), Dense({3, 4}), nullptr);
      },
      {"matmul: b dims [3,4]: inner dimension 3 must equal a's last dimension 5"});
  expect_throw_with<InvalidArgument>(
      [] {
        matmul(Dense({2, 3, 4}), Dense({3, 4, 5}), nullptr);
      },
      {"matmul", "batch dims", "[2,3,4]", "[3,4,5]"});
  const Dense bias(Dims{3});
  expect_throw_with<InvalidArgument>(
      [&] {
        matmul(Dense({2, 4}), Dense({4, 2}), &bias);
      },
      {"matmul", "bias dims [3]", "result dims [2,2]"});
}

// ---- embedding ----

TEST(Embedding, PicksRowsAndRefusesBadIds) {
  const Dense table = make_dense({3, 2}, {0, 1, 10, 11, 20, 21});
  const Dense y = embedding(table, {2, 0, 2, 1}, {2, 2});
  EXPECT_EQ(y.dims, (Dims{2, 2, 2}));
  EXPECT_EQ(y.data, (Values{20, 21, 0, 1, 20, 21, 10, 11}));
  // Like torch: an id naming no row is refused, the first one named with the range.
  expect_throw_with<InvalidArgument>(
      [&] {
        embedding(table, {1, 3, -1}, {3});
      },
      {"embedding", "ids element 1 = 3", "outside [0, 3)", "table dims [3,2]"});
  expect_throw_with<InvalidArgument>(
      [&] {
        embedding(table, {0, -1}, {2});
      },
      {"ids element 1 = -1", "outside [0, 3)"});
  expect_throw_with<InvalidArgument>([&] { embedding(table, {INT64_MAX}, {1}); },
                                     {"ids element 0 = 9223372036854775807"});
}

TEST(Embedding, RefusesBadShapes) {
  expect_throw_with<InvalidArgument>([] { embedding(Dense({6}), {0}, {1}); },
                                     {"embedding", "table dims [6]", "2-D"});
  expect_throw_with<InvalidArgument>(
      [] {
        embedding(Dense({3, 2}), {0, 1, 2}, {2, 2});
      },
      {"embedding", "ids holds 3", "ids_dims [2,2]", "need 4"});
}

// ---- cross_entropy ----

TEST(CrossEntropy, HandCaseWithIgnoreAndSmoothing) {
  // Row 0: lse = ln 4, target logit ln 3, mean logit ln3 / 2.
  // Row 1: lse = ln 3, target logit ln 2, mean logit ln2 / 2.
  // Row 2: ignored; its lse is still 5 + ln 2.
  const Dense logits = make_dense({3, 2}, {0, kLn3, kLn2, 0, 5, 5});
  const std::vector<int64_t> targets = {1, 0, -100};
  const double ls = 0.1, ln4 = std::log(4.0);
  const double loss0 = 0.9 * (ln4 - kLn3) + 0.1 * (ln4 - kLn3 / 2);
  const double loss1 = 0.9 * (kLn3 - kLn2) + 0.1 * (kLn3 - kLn2 / 2);

  const CrossEntropyOut none = cross_entropy(logits, targets, -100, ls, "none");
  EXPECT_EQ(none.loss.dims, Dims{3});
  EXPECT_CLOSE(none.loss.data, (Values{loss0, loss1, 0}), kTol);
  EXPECT_EQ(none.lse.dims, Dims{3});
  EXPECT_CLOSE(none.lse.data, (Values{ln4, kLn3, 5 + kLn2}), kTol);

  const CrossEntropyOut sum = cross_entropy(logits, targets, -100, ls, "sum");
  EXPECT_EQ(sum.loss.dims, Dims{});
  EXPECT_CLOSE(sum.loss.data, Values{loss0 + loss1}, kTol);
  EXPECT_EQ(sum.lse.dims, Dims{3});
  const CrossEntropyOut mean = cross_entropy(logits, targets, -100, ls, "mean");
  EXPECT_EQ(mean.loss.dims, Dims{});
  EXPECT_CLOSE(mean.loss.data, Values{(loss0 + loss1) / 2}, kTol);
}

TEST(CrossEntropy, MatchesNegativeLogProbabilityOnRandomInputs) {
  const Dense x = random_dense({6, 5});
  const std::vector<int64_t> targets = test::random_indices(6, 5);
  const CrossEntropyOut plain = cross_entropy(x, targets, -1, 0, "none");
  const CrossEntropyOut smooth = cross_entropy(x, targets, -1, 1, "none");
  const oracle::CrossEntropy want_plain = oracle::cross_entropy(x, targets, -1, 0, "none");
  expect_all_near(plain.loss, want_plain.loss, kTol);
  expect_all_near(plain.lse, want_plain.lse, kTol);
  expect_all_near(smooth.loss, oracle::cross_entropy(x, targets, -1, 1, "none").loss, kTol);
}

TEST(CrossEntropy, BadTargetsAreRefusedAndEmptyMeanIsNaN) {
  const Dense logits = make_dense({3, 2}, {0, 1, 2, 3, 4, 5});
  // Like torch: 2 is past C, -1 is negative and not the ignore index (-100). The first bad
  // position is named, with its value and the range.
  for (const char* reduction : {"none", "sum", "mean"})
    expect_throw_with<InvalidArgument>(
        [&] {
          cross_entropy(logits, {0, 2, -1}, -100, 0, reduction);
        },
        {"cross_entropy", "targets element 1 = 2", "outside [0, 2)", "logits dims [3,2]",
         "only ignore_index = -100 may lie outside"});
  expect_throw_with<InvalidArgument>(
      [&] {
        cross_entropy(logits, {0, 1, -1}, -100, 0, "none");
      },
      {"targets element 2 = -1"});
  expect_throw_with<InvalidArgument>(
      [&] {
        cross_entropy(logits, {INT64_MIN, 0, 1}, -100, 0, "none");
      },
      {"targets element 0 = -9223372036854775808"});
  // The ignore index may be any value, inside the range or not.
  EXPECT_EQ(cross_entropy(logits, {-5, 1, -5}, -5, 0, "none").loss.data[0], 0);

  const std::vector<int64_t> ignored = {7, 7, 7};
  EXPECT_TRUE(std::isnan(cross_entropy(logits, ignored, 7, 0, "mean").loss.data[0]));
  EXPECT_EQ(cross_entropy(logits, ignored, 7, 0, "sum").loss.data, Values{0});
}

TEST(CrossEntropy, UnsmoothedLossIgnoresAnInfiniteOtherLogit) {
  // Without smoothing the -inf logit only enters through lse, where it adds nothing.
  const Dense logits = make_dense({1, 3}, {-kInf, 0, 0});
  EXPECT_CLOSE(cross_entropy(logits, {1}, -100, 0, "none").loss.data, Values{kLn2}, kTol);
  EXPECT_EQ(cross_entropy(logits, {1}, -100, 0.5, "none").loss.data, Values{kInf});
}

TEST(CrossEntropy, RefusesBadArguments) {
  const Dense logits(Dims{2, 3});
  expect_throw_with<InvalidArgument>(
      [] {
        cross_entropy(Dense({3}), {0, 1, 2}, -100, 0, "mean");
      },
      {"cross_entropy", "logits dims [3]", "2-D"});
  expect_throw_with<InvalidArgument>([&] { cross_entropy(logits, {0}, -100, 0, "mean"); },
                                     {"targets holds 1", "[2,3]", "2 rows"});
  expect_throw_with<InvalidArgument>(
      [&] {
        cross_entropy(logits, {0, 1}, -100, -0.1, "mean");
      },
      {"label_smoothing -0.1", "[0, 1]"});
  expect_throw_with<InvalidArgument>(
      [&] {
        cross_entropy(logits, {0, 1}, -100, 1.5, "mean");
      },
      {"label_smoothing 1.5"});
  expect_throw_with<InvalidArgument>(
      [&] {
        cross_entropy(logits, {0, 1}, -100, 0, "avg");
      },
      {"reduction 'avg'", "none, sum, mean"});
}

// ---- exact integer reductions ----

TEST(Reduce, IntegersReduceExactly) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  // Rows: [INT64_MAX, 1, 1] and [INT64_MIN, -1, 5].
  const Dense x = Dense::of_ints({2, 3}, {kMax, 1, 1, kMin, -1, 5});
  EXPECT_EQ(reduce(x, "sum", {1}, false).ints, (std::vector<int64_t>{kMin + 1, kMin + 4}));
  EXPECT_EQ(reduce(x, "max", {1}, false).ints, (std::vector<int64_t>{kMax, 5}));
  EXPECT_EQ(reduce(x, "min", {1}, false).ints, (std::vector<int64_t>{1, kMin}));
  EXPECT_EQ(reduce(x, "prod", {1}, false).ints, (std::vector<int64_t>{kMax, kMin}));
  EXPECT_EQ(reduce(x, "amax", {1}, false).ints, (std::vector<int64_t>{kMax, kMin}));
  // (INT64_MAX + 2) / 3 and (INT64_MIN + 4) / 3, exactly, toward zero.
  EXPECT_EQ(reduce(x, "mean", {1}, false).ints,
            (std::vector<int64_t>{3074457345618258603, -3074457345618258601}));
  const Dense kept = reduce(x, "sum", {0}, true);
  EXPECT_TRUE(kept.integer);
  EXPECT_EQ(kept.dims, (Dims{1, 3}));
  // l2 is real.
  EXPECT_FALSE(reduce(x, "l2", {1}, false).integer);
  // Over no elements max, min and mean take the real path (-inf, +inf, NaN).
  const Dense none = Dense::of_ints({2, 0}, {});
  EXPECT_EQ(reduce(none, "max", {1}, false).data, (Values{-kInf, -kInf}));
  EXPECT_TRUE(std::isnan(reduce(none, "mean", {1}, false).data[0]));
  EXPECT_EQ(reduce(none, "sum", {1}, false).ints, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(reduce(none, "prod", {1}, false).ints, (std::vector<int64_t>{1, 1}));
}

}  // namespace
}  // namespace eagle::reference
