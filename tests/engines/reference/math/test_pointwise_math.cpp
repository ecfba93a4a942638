// Reference pointwise semantics: every op name's function at spot values, NaN and overflow
// behaviour, numpy broadcasting, and the maps checked against explicit loops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <numbers>
#include <string>

#include "dense.hpp"
#include "eagle/op/schema.hpp"
#include "engines/reference/math/pointwise.hpp"
#include "test_util.hpp"

namespace eagle::reference {
namespace {

using test::expect_throw_with;
using test::make_dense;
using test::random_dense;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const double kLn3 = std::log(3.0);

double unary(std::string_view op, double x) {
  return unary_fn(op)(x);
}
double binary(std::string_view op, double a, double b) {
  return binary_fn(op)(a, b);
}

TEST(PointwiseOps, EveryUnaryNameHasAFunctionAndASpotValue) {
  // name -> {input, expected}, expected values worked independently of the implementation.
  const std::map<std::string_view, std::pair<double, double>> spot = {
      {"identity", {1.5, 1.5}},
      {"neg", {2, -2}},
      {"abs", {-3, 3}},
      {"exp", {1, std::numbers::e}},
      {"log", {std::numbers::e, 1}},
      {"sqrt", {4, 2}},
      {"rsqrt", {4, 0.5}},
      {"reciprocal", {4, 0.25}},
      {"square", {-3, 9}},
      {"tanh", {0.5, (std::numbers::e - 1) / (std::numbers::e + 1)}},
      {"sigmoid", {kLn3, 0.75}},  // 1 / (1 + 1/3)
      {"relu", {-2, 0}},
      {"gelu", {1, 0.8413447460685429}},       // Phi(1)
      {"gelu_tanh", {1, 0.8411919906082768}},  // published tanh-approximation value
      {"silu", {kLn3, kLn3 * 0.75}},
      {"softplus", {kLn3, std::log(4.0)}},
      {"erf", {0.5, 0.5204998778130465}},
      {"sin", {std::numbers::pi / 6, 0.5}},
      {"cos", {std::numbers::pi / 3, 0.5}},
      {"floor", {-1.5, -2}},
      {"ceil", {-1.5, -1}},
      {"logical_not", {0, 1}},
      {"cast", {2.5, 2.5}},
  };
  EXPECT_EQ(unary_op_names().size(), spot.size());
  for (std::string_view name : unary_op_names()) {
    ASSERT_NE(unary_fn(name), nullptr) << name;
    const auto it = spot.find(name);
    ASSERT_NE(it, spot.end()) << "no spot value for unary op " << name;
    EXPECT_NEAR(unary(name, it->second.first), it->second.second, 1e-15) << name;
  }
}

TEST(PointwiseOps, EveryBinaryNameHasAFunctionAndASpotValue) {
  struct Spot {
    double a, b, want;
  };
  const std::map<std::string_view, Spot> spot = {
      {"add", {2, 3, 5}},
      {"sub", {2, 3, -1}},
      {"mul", {2, 3, 6}},
      {"div", {3, 4, 0.75}},
      {"max", {2, 3, 3}},
      {"min", {2, 3, 2}},
      {"pow", {2, 10, 1024}},
      {"mod", {-7, 3, -1}},  // fmod keeps the dividend's sign
      {"cmp_eq", {2, 2, 1}},
      {"cmp_neq", {2, 2, 0}},
      {"cmp_lt", {2, 3, 1}},
      {"cmp_le", {3, 3, 1}},
      {"cmp_gt", {2, 3, 0}},
      {"cmp_ge", {3, 3, 1}},
      {"logical_and", {2, 0, 0}},
      {"logical_or", {0, -1, 1}},
      // a f'(b): gelu'(0) = silu'(0) = 1/2 (their values elsewhere: OpBackward's finite
      // differences of gelu and silu)
      {"gelu_backward", {2, 0, 1}},
      {"silu_backward", {4, 0, 2}},
  };
  EXPECT_EQ(binary_op_names().size(), spot.size());
  for (std::string_view name : binary_op_names()) {
    ASSERT_NE(binary_fn(name), nullptr) << name;
    const auto it = spot.find(name);
    ASSERT_NE(it, spot.end()) << "no spot value for binary op " << name;
    EXPECT_EQ(binary(name, it->second.a, it->second.b), it->second.want) << name;
  }
}

TEST(PointwiseOps, UnknownNamesHaveNoFunction) {
  EXPECT_EQ(unary_fn("add"), nullptr);
  EXPECT_EQ(unary_fn(""), nullptr);
  EXPECT_EQ(binary_fn("exp"), nullptr);
  EXPECT_EQ(binary_fn("Add"), nullptr);
}

TEST(PointwiseOps, ComparisonsAndLogicGiveOneOrZero) {
  const double pairs[][2] = {{1, 2}, {2, 2}, {3, 2}};
  for (const auto& p : pairs) {
    const double a = p[0], b = p[1];
    EXPECT_EQ(binary("cmp_eq", a, b), a == b ? 1.0 : 0.0);
    EXPECT_EQ(binary("cmp_neq", a, b), a != b ? 1.0 : 0.0);
    EXPECT_EQ(binary("cmp_lt", a, b), a < b ? 1.0 : 0.0);
    EXPECT_EQ(binary("cmp_le", a, b), a <= b ? 1.0 : 0.0);
    EXPECT_EQ(binary("cmp_gt", a, b), a > b ? 1.0 : 0.0);
    EXPECT_EQ(binary("cmp_ge", a, b), a >= b ? 1.0 : 0.0);
  }
  for (double a : {0.0, -0.5}) {
    for (double b : {0.0, 3.0}) {
      EXPECT_EQ(binary("logical_and", a, b), (a != 0 && b != 0) ? 1.0 : 0.0);
      EXPECT_EQ(binary("logical_or", a, b), (a != 0 || b != 0) ? 1.0 : 0.0);
    }
    EXPECT_EQ(unary("logical_not", a), a == 0 ? 1.0 : 0.0);
  }
  // NaN is nonzero, so logically true.
  EXPECT_EQ(unary("logical_not", kNaN), 0.0);
  EXPECT_EQ(binary("logical_and", kNaN, 1), 1.0);
  EXPECT_EQ(binary("cmp_eq", kNaN, kNaN), 0.0);
  EXPECT_EQ(binary("cmp_neq", kNaN, kNaN), 1.0);
}

TEST(PointwiseOps, NaNPropagatesThroughArithmetic) {
  for (std::string_view name : unary_op_names()) {
    if (name == "logical_not") continue;
    EXPECT_TRUE(std::isnan(unary(name, kNaN))) << name;
  }
  for (std::string_view name : binary_op_names()) {
    if (name.starts_with("cmp_") || name.starts_with("logical_")) continue;
    EXPECT_TRUE(std::isnan(binary(name, kNaN, 2))) << name;
    EXPECT_TRUE(std::isnan(binary(name, 2, kNaN))) << name;
  }
}

TEST(PointwiseOps, ActivationsStayFiniteAtLargeInputs) {
  EXPECT_EQ(unary("sigmoid", 1000), 1.0);
  EXPECT_EQ(unary("sigmoid", -1000), 0.0);
  EXPECT_EQ(unary("softplus", 1000), 1000.0);
  EXPECT_EQ(unary("softplus", -1000), 0.0);
  EXPECT_NEAR(unary("softplus", -40), std::exp(-40.0), 1e-30);
  EXPECT_EQ(unary("silu", -1000), 0.0);
  EXPECT_EQ(unary("gelu", 100), 100.0);
  EXPECT_EQ(unary("gelu_tanh", -100), 0.0);
  EXPECT_EQ(unary("relu", kInf), kInf);
  EXPECT_EQ(unary("sigmoid", -kInf), 0.0);
}

TEST(PointwiseOps, ActivationsMatchIndependentFormulas) {
  for (double x : test::random_values(200, -6, 6)) {
    EXPECT_NEAR(unary("sigmoid", x), 1 / (1 + std::exp(-x)), 1e-15);
    EXPECT_NEAR(unary("softplus", x), std::log(1 + std::exp(x)), 1e-14);
    EXPECT_NEAR(unary("silu", x), x / (1 + std::exp(-x)), 1e-14);
    EXPECT_NEAR(unary("tanh", x), 2 / (1 + std::exp(-2 * x)) - 1, 1e-14);
    EXPECT_NEAR(unary("gelu_tanh", x), unary("gelu", x), 1e-3);  // the approximation's error
    EXPECT_DOUBLE_EQ(unary("rsqrt", x * x), 1 / std::fabs(x));
  }
}

TEST(Broadcast, FollowsNumpyRules) {
  EXPECT_EQ(broadcast_dims({2, 1, 3}, {4, 1}), (Dims{2, 4, 3}));
  EXPECT_EQ(broadcast_dims({}, {3}), (Dims{3}));
  EXPECT_EQ(broadcast_dims({5, 4}, {}), (Dims{5, 4}));
  EXPECT_EQ(broadcast_dims({1, 0}, {3, 1}), (Dims{3, 0}));
  EXPECT_EQ(broadcast_dims({2, 3}, {2, 3}), (Dims{2, 3}));
}

TEST(Broadcast, MismatchNamesBothDims) {
  expect_throw_with<InvalidArgument>(
      [] {
        broadcast_dims({2, 3}, {4});
      },
      {"broadcast_dims", "a dims [2,3]", "b dims [4]", "3 and 4"});
  expect_throw_with<InvalidArgument>(
      [] {
        broadcast_dims({2, 1}, {3, 1});
      },
      {"a dims [2,1]", "b dims [3,1]", "axis -2"});
}

TEST(Broadcast, IndexMapsEachTargetElementToItsSource) {
  // from [3,1] onto [2,3,2]: the source row follows the middle axis and repeats.
  EXPECT_EQ(broadcast_index({3, 1}, {2, 3, 2}),
            (std::vector<int64_t>{0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(broadcast_index({}, {2}), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(broadcast_index({2}, {3, 2}), (std::vector<int64_t>{0, 1, 0, 1, 0, 1}));
  EXPECT_TRUE(broadcast_index({1}, {0}).empty());
}

TEST(Broadcast, IndexRefusesWhatDoesNotBroadcast) {
  expect_throw_with<InvalidArgument>(
      [] {
        broadcast_index({2, 3}, {3});
      },
      {"broadcast_index", "from dims [2,3]", "to dims [3]"});
  expect_throw_with<InvalidArgument>(
      [] {
        broadcast_index({3}, {2, 4});
      },
      {"from dims [3]", "dims [2,4]"});
  // [3] and [1] broadcast together, but [3] cannot be stretched onto [1].
  expect_throw_with<InvalidArgument>([] { broadcast_index({3}, {1}); }, {"from dims [3]"});
}

TEST(Maps, UnaryAppliesElementwiseAndKeepsDims) {
  const Dense x = random_dense({2, 3, 4});
  const Dense y = map_unary(unary_fn("exp"), x);
  EXPECT_EQ(y.dims, x.dims);
  for (std::size_t i = 0; i < x.data.size(); ++i) EXPECT_EQ(y.data[i], std::exp(x.data[i]));
  const Dense s = map_unary(unary_fn("neg"), make_dense({}, {4}));
  EXPECT_EQ(s.dims, Dims{});
  EXPECT_EQ(s.data, std::vector<double>{-4});
}

TEST(Maps, BinaryBroadcastMatchesExplicitLoop) {
  const Dense a = random_dense({2, 1, 4}), b = random_dense({3, 1});
  const Dense y = map_binary(binary_fn("sub"), a, b);
  ASSERT_EQ(y.dims, (Dims{2, 3, 4}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(y.data[(i * 3 + j) * 4 + k], a.data[i * 4 + k] - b.data[j]);
}

TEST(Maps, BinaryWithAScalar) {
  const Dense y =
      map_binary(binary_fn("div"), make_dense({}, {1}), make_dense({2, 2}, {1, 2, 4, 8}));
  EXPECT_EQ(y.dims, (Dims{2, 2}));
  EXPECT_EQ(y.data, (std::vector<double>{1, 0.5, 0.25, 0.125}));
}

TEST(Maps, BinaryMismatchNamesOperands) {
  expect_throw_with<InvalidArgument>(
      [] {
        map_binary(binary_fn("add"), Dense({2, 3}), Dense({2}));
      },
      {"map_binary", "a dims [2,3]", "b dims [2]"});
}

TEST(Maps, WhereBroadcastsAllThree) {
  // cond [2,1] picks per row; a [1,3] per column; b a scalar.
  const Dense y =
      where(make_dense({2, 1}, {0, 7}), make_dense({1, 3}, {1, 2, 3}), make_dense({}, {-1}));
  EXPECT_EQ(y.dims, (Dims{2, 3}));
  EXPECT_EQ(y.data, (std::vector<double>{-1, -1, -1, 1, 2, 3}));
  // NaN is a nonzero condition.
  EXPECT_EQ(where(make_dense({1}, {kNaN}), make_dense({1}, {5}), make_dense({1}, {6})).data,
            std::vector<double>{5});
}

TEST(Maps, WhereMatchesExplicitLoopOnRandomInputs) {
  const Dense cond = map_unary(unary_fn("relu"), random_dense({3, 1, 5}));  // about half zeros
  const Dense a = random_dense({4, 1}), b = random_dense({5});
  const Dense y = where(cond, a, b);
  ASSERT_EQ(y.dims, (Dims{3, 4, 5}));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k)
        EXPECT_EQ(y.data[(i * 4 + j) * 5 + k], cond.data[i * 5 + k] != 0 ? a.data[j] : b.data[k]);
}

TEST(Maps, WhereMismatchNamesOperands) {
  expect_throw_with<InvalidArgument>([] { where(Dense({2}), Dense({3}), Dense({2})); },
                                     {"where", "cond dims [2]", "a dims [3]"});
  expect_throw_with<InvalidArgument>([] { where(Dense({2}), Dense({2}), Dense({4})); },
                                     {"where", "b dims [4]"});
}

// ---- exact integer forms ----

// Every pointwise op that accepts integers has an exact integer form, so no integer input goes
// through float64 (where INT64_MAX + 0 came back as INT64_MIN).
TEST(IntegerOps, EveryOpThatAcceptsIntegersHasAnExactForm) {
  int checked = 0;
  for (const op::OpSchema* s : op::all_ops()) {
    if (s->kind != op::OpKind::pointwise || s->name == "where") continue;
    bool takes_ints = true;
    for (const op::InputPort& p : s->inputs) takes_ints &= p.dtypes != op::DTypeClass::floating;
    if (!takes_ints) continue;
    SCOPED_TRACE(s->name);
    EXPECT_TRUE(s->inputs.size() == 1 ? int_unary_fn(s->name) != nullptr
                                      : int_binary_fn(s->name) != nullptr);
    ++checked;
  }
  EXPECT_GE(checked, 20);
  EXPECT_EQ(int_unary_fn("exp"), nullptr);
  EXPECT_EQ(int_binary_fn("pow"), nullptr);
}

TEST(IntegerOps, MapsAreExactAndRefuseDivisionByZero) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const Dense a = Dense::of_ints({3}, {kMax, kMax - 1, -9});
  const Dense b = Dense::of_ints({1}, {1});
  EXPECT_EQ(map_binary_int("add", int_binary_fn("add"), a, b).ints,
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), kMax, -8}));
  const Dense y = map_unary_int(int_unary_fn("neg"), a);
  EXPECT_TRUE(y.integer);
  EXPECT_EQ(y.ints, (std::vector<int64_t>{-kMax, -(kMax - 1), 9}));
  EXPECT_EQ(y.data.size(), 3u);  // the rounded doubles travel along
  expect_throw_with<InvalidArgument>(
      [&] {
        map_binary_int("mod", int_binary_fn("mod"), a, Dense::of_ints({3}, {1, 0, 2}));
      },
      {"mod: b is 0 at element 1 (a = 9223372036854775806)", "by zero has no value"});
  // where keeps exact values when both branches are integers.
  const Dense w = where(Dense::of_ints({3}, {1, 0, 1}), a, Dense::of_ints({3}, {0, 0, 0}));
  EXPECT_TRUE(w.integer);
  EXPECT_EQ(w.ints, (std::vector<int64_t>{kMax, 0, -9}));
}

}  // namespace
}  // namespace eagle::reference
