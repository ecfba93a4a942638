// Tests of the test support library itself.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numbers>
#include <set>
#include <stdexcept>

#include "dense.hpp"
#include "eagle/eagle.hpp"
#include "engine_sweep.hpp"
#include "engines/reference/reference_engine.hpp"
#include "oracles/attention.hpp"
#include "oracles/gradient.hpp"
#include "oracles/pointwise.hpp"
#include "oracles/structured.hpp"
#include "stand_in_manifest.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using test::EnvGuard;

const DType kAllDTypes[] = {DType::f64, DType::f32, DType::f16, DType::bf16,   DType::i64,
                            DType::i32, DType::u32, DType::u8,  DType::boolean};

std::vector<uint64_t> draw(test::Rng rng, int n = 8) {
  std::vector<uint64_t> v;
  for (int i = 0; i < n; ++i) v.push_back(rng());
  return v;
}

// ---- the seed ----

TEST(TestSupportSeed, ParsesDecimalAndHexAndRefusesTheRest) {
  EXPECT_EQ(test::parse_seed("42"), 42u);
  EXPECT_EQ(test::parse_seed("0x2a"), 42u);
  EXPECT_EQ(test::parse_seed("18446744073709551615"), 18446744073709551615ull);
  for (const char* bad : {"", "abc", "-1", "12x", " 7", "18446744073709551616"})
    EXPECT_EQ(test::parse_seed(bad), std::nullopt) << "'" << bad << "'";
}

TEST(TestSupportSeed, TheEnvironmentVariableIsHonoured) {
  // The run's own seed is what the variable said when the process started, if it was set.
  const std::optional<uint64_t> at_start = test::seed_from_environment();
  if (at_start && GTEST_FLAG_GET(repeat) == 1) {
    EXPECT_EQ(test::seed(), *at_start);
  }
  EnvGuard env(test::kSeedVariable);
  EXPECT_EQ(test::seed_from_environment(), std::nullopt);
  env.set("12345");
  EXPECT_EQ(test::seed_from_environment(), 12345u);
  env.set("0xfeed");
  EXPECT_EQ(test::seed_from_environment(), 0xfeedu);
  env.set("twelve");
  EXPECT_THROW(test::seed_from_environment(), std::invalid_argument);
}

TEST(TestSupportSeed, TheFailureLineNamesTheSeed) {
  EXPECT_EQ(test::reproduce_line(),
            "EAGLE_TEST_SEED=" + std::to_string(test::seed()) + " reproduces this run");
}

// Run by ctest (support_seed_printed_on_failure) with EAGLE_TEST_SEED and the variable below:
// it fails, and ctest expects the failure to print the seed.
TEST(TestSupportProbe, FailsOnPurposeWhenAsked) {
  if (!std::getenv("EAGLE_TEST_SUPPORT_FAIL_ON_PURPOSE"))
    GTEST_SKIP() << "a probe for ctest's support_seed_printed_on_failure";
  ADD_FAILURE() << "failing on purpose, so the listener prints the seed";
}

// ---- streams ----

TEST(TestSupportStreams, TheSameSeedAndNameGiveTheSameStream) {
  EXPECT_EQ(draw(test::stream(7, "x")), draw(test::stream(7, "x")));
  EXPECT_NE(draw(test::stream(7, "x")), draw(test::stream(8, "x")));
  EXPECT_NE(draw(test::stream(7, "x")), draw(test::stream(7, "y")));
  EXPECT_EQ(draw(test::stream("named")), draw(test::stream("named")));
  EXPECT_NE(draw(test::stream("named")), draw(test::stream("other")));
  // Seeds next to each other give unrelated streams.
  const auto a = draw(test::stream(1, "")), b = draw(test::stream(2, ""));
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NE(a[i], b[i]);
}

// A test's values depend only on (seed, its name): rerun alone, it sees the same inputs.
TEST(TestSupportStreams, EachTestStartsFromItsOwnName) {
  const test::Rng expected =
      test::stream(test::seed(), "TestSupportStreams.EachTestStartsFromItsOwnName");
  EXPECT_EQ(draw(test::rng()), draw(expected));  // copies: neither stream advances
  // random_values draws from that stream.
  test::Rng again = expected;
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const double want = dist(again);
  EXPECT_EQ(test::random_values(1)[0], want);
}

// ---- random data ----

TEST(TestSupportRandom, FloatsAreNeverZeroAndStayInRange) {
  for (double v : test::random_values(1000, 0.0, 1e-300)) EXPECT_NE(v, 0.0);
  for (double v : test::random_values(1000, 2.0, 3.0)) EXPECT_TRUE(v >= 2.0 && v < 3.0) << v;
  for (double v : test::random_signed(1000, 0.1, 0.5)) EXPECT_TRUE(std::fabs(v) >= 0.1) << v;
  // Values that would round to zero in 16 bits are drawn again.
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
    const Array a = test::random_array({4096}, d, Device::cpu(), -1e-7, 1e-7);
    for (double v : test::values(a)) ASSERT_NE(v, 0.0) << dtype_name(d);
  }
}

TEST(TestSupportRandom, IntegerIndexAndBooleanData) {
  for (int64_t v : test::random_ints(500, -3, 4)) EXPECT_TRUE(v >= -3 && v <= 4) << v;
  const auto ids = test::random_indices(500, 7);
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), 7u);  // every index, by now
  const auto bools = test::random_bools(500, 0.5);
  EXPECT_TRUE(std::count(bools.begin(), bools.end(), 1) > 0 &&
              std::count(bools.begin(), bools.end(), 0) > 0);
  const auto targets = test::random_targets(1000, 5, -100, 0.2);
  int ignored = 0;
  for (int64_t t : targets) {
    EXPECT_TRUE(t == -100 || (t >= 0 && t < 5)) << t;
    ignored += t == -100;
  }
  EXPECT_GT(ignored, 0);
  EXPECT_LT(ignored, 1000);
}

TEST(TestSupportRandom, CuSeqlensStartAtZeroNeverDecreaseAndHoldAnEmptySequence) {
  for (int rep = 0; rep < 20; ++rep) {
    const auto cu = test::random_cu_seqlens(4, 6);
    ASSERT_EQ(cu.size(), 5u);
    EXPECT_EQ(cu[0], 0);
    bool empty = false;
    for (std::size_t b = 0; b + 1 < cu.size(); ++b) {
      EXPECT_LE(cu[b], cu[b + 1]);
      EXPECT_LE(cu[b + 1] - cu[b], 6);
      empty |= cu[b] == cu[b + 1];
    }
    EXPECT_TRUE(empty);
    const auto full = test::random_cu_seqlens(4, 6, false);
    for (std::size_t b = 0; b + 1 < full.size(); ++b) EXPECT_LT(full[b], full[b + 1]);
  }
}

TEST(TestSupportRandom, RaggedPlacementLeavesPaddingBetweenDisjointSequences) {
  const test::RaggedRows r = test::random_placement({3, 0, 2}, 2);
  ASSERT_EQ(r.start.size(), 3u);
  int64_t padding = 0, covered = 0;
  for (int64_t row = 0; row < r.rows; ++row) padding += r.is_padding(row);
  for (int64_t len : r.len) covered += len;
  EXPECT_EQ(covered + padding, r.rows);  // disjoint, inside the buffer
  EXPECT_GT(padding, 0);
  for (std::size_t b = 0; b + 1 < r.start.size(); ++b)
    EXPECT_LE(r.start[b] + r.len[b], r.start[b + 1]);
  EXPECT_EQ(r.offsets(4).back(), r.rows * 4);
  const test::RaggedRows packed = test::rows_of({0, 2, 2, 5});
  EXPECT_EQ(packed.start, (std::vector<int64_t>{0, 2, 2}));
  EXPECT_EQ(packed.len, (std::vector<int64_t>{2, 0, 3}));
  EXPECT_EQ(packed.rows, 5);
}

// ---- poison ----

TEST(TestSupportPoison, EveryDTypeHasAVisiblePoison) {
  for (DType d : kAllDTypes) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    Array a = test::random_array({64}, d, Device::cpu());
    EXPECT_EQ(a.dtype(), d);
    test::poison(a);
    const auto* bytes = static_cast<const uint8_t*>(a.data());
    for (double v : test::values(a)) {
      if (d == DType::boolean) break;
      ASSERT_TRUE(test::is_poison(v, d)) << v;
      EXPECT_NE(v, 0.0);
      EXPECT_NE(v, 1.0);
    }
    if (d == DType::u8 || d == DType::boolean) {
      for (int i = 0; i < 64; ++i) ASSERT_EQ(bytes[i], 0xAB) << i;
    }
    const Array b = test::poisoned({2, 3}, d);
    EXPECT_EQ(b.shape(), (Shape{2, 3}));
    EXPECT_EQ(std::memcmp(b.data(), a.data(), b.nbytes()), 0);  // the same poison
  }
}

TEST(TestSupportPoison, PaddingRowsOfARaggedBuffer) {
  // Sequences at rows 1-2 and 4 of 6: rows 0, 3 and 5 are padding.
  const test::RaggedRows rows{{1, 4}, {2, 1}, 6};
  for (DType d : {DType::f32, DType::bf16, DType::i32}) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    const Array a = test::from_doubles(std::vector<double>(18, 5.0), {6, 3}, d, Device::cpu());
    test::poison_padding(a, rows);
    const auto v = test::values(a);
    for (int64_t r = 0; r < 6; ++r)
      for (int c = 0; c < 3; ++c) {
        const bool pad = r == 0 || r == 3 || r == 5;
        EXPECT_EQ(test::is_poison(v[r * 3 + c], d), pad) << r << "," << c;
        if (!pad) {
          EXPECT_EQ(v[r * 3 + c], 5.0);
        }
      }
  }
  const Array wrong = test::poisoned({5, 3}, DType::f32);
  EXPECT_THROW(test::poison_padding(wrong, rows), std::invalid_argument);
}

// ---- comparisons ----

TEST(TestSupportCompare, NaNNeverPasses) {
  EXPECT_TRUE(std::isnan(test::rel_error({1, std::nan("")}, {1, 2})));
  EXPECT_TRUE(std::isnan(test::rel_error({1}, {1, 2})));
  EXPECT_DOUBLE_EQ(test::rel_error({3, 4}, {0, 0}), 5.0);
  EXPECT_LT(test::tolerance(DType::f32), 1e-5);
  EXPECT_NONFATAL_FAILURE(test::expect_all_near({std::nan("")}, {1.0}, 1.0), "want 1");
  EXPECT_NONFATAL_FAILURE(test::expect_all_near({1.0}, {std::nan("")}, 1.0), "want NaN");
  test::expect_all_near({std::nan(""), -INFINITY, 1.5}, {std::nan(""), -INFINITY, 1.5}, 0);
}

// ---- oracles, on hand-worked cases ----

TEST(TestSupportOracles, StructuredHandCases) {
  using test::make_dense;
  EXPECT_EQ(
      test::oracle::matmul(make_dense({2, 2}, {1, 2, 3, 4}), make_dense({2, 2}, {5, 6, 7, 8})).data,
      (std::vector<double>{19, 22, 43, 50}));
  // Batch broadcast [2, 1, 1, 2] @ [3, 2, 1] -> [2, 3, 1, 1], plus a bias of one element.
  const test::Dense bias = make_dense({1}, {0.5});
  const test::Dense c = test::oracle::matmul(make_dense({2, 1, 1, 2}, {1, 2, 3, 4}),
                                             make_dense({3, 2, 1}, {1, 0, 0, 1, 1, 1}), &bias);
  EXPECT_EQ(c.dims, (test::Dims{2, 3, 1, 1}));
  EXPECT_EQ(c.data, (std::vector<double>{1.5, 2.5, 3.5, 3.5, 4.5, 7.5}));
  test::expect_all_near(test::oracle::softmax(make_dense({2}, {0, std::log(3.0)}), 0, false).data,
                        {0.25, 0.75}, 1e-15);
  EXPECT_EQ(test::oracle::reduce(make_dense({2, 3}, {1, -2, 3, 4, 5, -6}), "amax", {1}, true).data,
            (std::vector<double>{3, 6}));
  const auto ln = test::oracle::layer_norm(make_dense({1, 3}, {1, 2, 3}), nullptr, nullptr, 1, 0);
  test::expect_all_near(ln.y.data, {-std::sqrt(1.5), 0, std::sqrt(1.5)}, 1e-15);
  const auto ce = test::oracle::cross_entropy(make_dense({2, 2}, {0, std::log(3.0), 0, 0}),
                                              {1, -100}, -100, 0, "mean");
  test::expect_all_near(ce.loss.data, {std::log(4.0) - std::log(3.0)}, 1e-15);
}

TEST(TestSupportOracles, AttentionHandCase) {
  // One head, D = 1, q = 1, keys (0, ln 2), values (3, 6), scale 1, causal: query 1's weights
  // are (1/3, 2/3), so o = 5; query 0 sees key 0 only. The third row is padding.
  using test::make_dense;
  const auto a = test::oracle::sdpa(
      make_dense({3, 1, 1}, {1, 1, 1}), make_dense({2, 1, 1}, {0, std::log(2.0)}),
      make_dense({2, 1, 1}, {3, 6}), test::oracle::Sequences::from_cu({0, 2}, {0, 2}), 1.0, true);
  test::expect_all_near(a.o.data, {3, 5, std::nan("")}, 1e-15);
  test::expect_all_near(a.lse.data, {0, std::log(3.0), std::nan("")}, 1e-15);
}

TEST(TestSupportOracles, CentralDifferenceOfASquare) {
  std::vector<double> x = {0.5, -2.0};
  const auto grad = test::oracle::central_difference(x, [&] { return x[0] * x[0] + 3 * x[1]; });
  test::expect_all_near(grad, {1.0, 3.0}, 1e-8);
  EXPECT_EQ(x, (std::vector<double>{0.5, -2.0}));  // restored
}

// ---- the engine sweep's plumbing, on a CPU engine: the reference against itself ----

TEST(TestSupportSweep, RunsTheReferenceEngineAgainstItself) {
  const plan::Manifest& m = engines::builtin_manifest();
  const int64_t ref = test::sweep::engine_id(m, "pointwise", "reference");
  EXPECT_EQ(test::sweep::unavailable(m, ref), "");
  const auto cases = test::sweep::cases(m, ref, {"add", "rsqrt", "where"});
  ASSERT_EQ(cases.size(), 3u * 4u);  // f64, f32, f16, bf16; no knobs
  EXPECT_EQ(cases[0].name(), "add_f64");
  for (const auto& c : cases) test::sweep::run(c, m, {{{3, 5}, {37, 11}}});
}

TEST(TestSupportSweep, KnobPointsAreTheProductOfTheDomains) {
  const plan::Manifest& m = engines::builtin_manifest();
  const int64_t native = test::sweep::engine_id(m, "pointwise", "native_pointwise");
  const auto cases = test::sweep::cases(m, native, {"neg"});
  ASSERT_EQ(cases.size(), 9u);
  EXPECT_EQ(cases[0].name(), "neg_f32_block256");
  EXPECT_EQ(cases[0].knobs, (plan::Knobs{{"block", 256}}));
  EXPECT_THROW(test::sweep::engine_id(m, "pointwise", "nowhere"), std::invalid_argument);
}

// ---- the sweep catches a wrong engine ----

// Stand-in CPU engines beside the reference: "lazy" writes nothing; "tail" is the reference
// except that the last element of the output is 5% off (a wrong tail block).
class StandInPlan : public plan::CompiledPlan {
 public:
  StandInPlan(std::shared_ptr<const plan::CompiledPlan> inner, int out)
      : inner_(std::move(inner)), out_(out) {}
  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!inner_) return true;
    if (!inner_->run(ops, ctx)) return false;
    const plan::OperandBuffer& o = ops[out_];
    const int64_t last = o.numel() - 1;
    if (o.dtype == DType::f32) static_cast<float*>(o.data)[last] *= 1.05f;
    if (o.dtype == DType::bf16) {
      auto* p = static_cast<bfloat16*>(o.data) + last;
      *p = bfloat16(static_cast<float>(*p) * 1.05f);
    }
    return true;
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    if (inner_) inner_->explain(ops, ctx);
  }

 private:
  std::shared_ptr<const plan::CompiledPlan> inner_;
  int out_;
};

class StandInEngine : public plan::Engine {
 public:
  StandInEngine(int64_t id, const std::string& name)
      : Engine(id, name), reference_(reference::make_reference_engine(id, "inner reference")) {
    caps_.device = DeviceKind::cpu;
    caps_.dtypes = {DType::f32, DType::bf16};
  }
  const plan::Capabilities& capabilities() const override { return caps_; }
  void check_support(const op::Graph&, const plan::Facts&, const DeviceProperties&) const override {
  }
  std::shared_ptr<const plan::CompiledPlan> build_plan(
      const op::Graph& graph, const plan::Facts& facts, const plan::PlanConfig& config,
      const plan::BuildContext& ctx) const override {
    auto inner = name() == "lazy" ? nullptr : reference_->build_plan(graph, facts, config, ctx);
    return std::make_shared<StandInPlan>(std::move(inner),
                                         ctx.layout->index_of(graph.nodes()[0].output("out")));
  }

 private:
  plan::Capabilities caps_;
  std::unique_ptr<plan::Engine> reference_;
};

std::unique_ptr<plan::Engine> make_stand_in(int64_t id, const std::string& name) {
  return std::make_unique<StandInEngine>(id, name);
}

const plan::Manifest& stand_in_manifest() {
  static const plan::Manifest m(test::pointwise_beside_reference(
      {{"lazy", &make_stand_in, false}, {"tail", &make_stand_in, false}}));
  return m;
}

// The messages of the failures `fn` reports (intercepted: they do not fail this test).
std::string failures_of(const std::function<void()>& fn) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    fn();
  }
  std::string all;
  for (int i = 0; i < results.size(); ++i) all += results.GetTestPartResult(i).message();
  return all;
}

TEST(TestSupportSweep, CatchesAnEngineThatWritesNothing) {
  const plan::Manifest& m = stand_in_manifest();
  for (const auto& c :
       test::sweep::cases(m, test::sweep::engine_id(m, "pointwise", "lazy"), {"exp", "add"})) {
    SCOPED_TRACE(c.name());
    const std::string failures = failures_of([&] { test::sweep::run(c, m, {{{37, 11}}}); });
    EXPECT_NE(failures.find("relative error nan"), std::string::npos) << failures;
  }
}

// A wrong last element hides in the norm of a bf16 output (5% of one element in 407 is under
// 1e-2), and the elementwise gate catches it.
TEST(TestSupportSweep, CatchesAWrongTailTheNormWouldDilute) {
  const plan::Manifest& m = stand_in_manifest();
  for (const auto& c :
       test::sweep::cases(m, test::sweep::engine_id(m, "pointwise", "tail"), {"exp"})) {
    SCOPED_TRACE(c.name());
    const std::string failures = failures_of([&] { test::sweep::run(c, m, {{{37, 11}}}); });
    EXPECT_NE(failures.find("1 of 407 elements outside their bound; the worst, element 406"),
              std::string::npos)
        << failures;
    EXPECT_EQ(failures.find("relative error") == std::string::npos, c.dtype == DType::bf16)
        << failures;
  }
}

}  // namespace
}  // namespace eagle
