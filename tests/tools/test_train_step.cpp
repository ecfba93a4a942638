// The training job's step (tools/train): one recorded graph of forward, reverse and AdamW on
// the CPU. Replays with batches of different L and M give the loss a freshly recorded graph
// gives for that batch; padding rows change nothing (neither the loss nor the update); the loss
// goes down over 30 steps on real text.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "test_util.hpp"
#include "train/trainer.hpp"
#include "train_fixtures.hpp"

namespace eagle {
namespace {

using namespace test_train;  // NOLINT(google-build-using-namespace): the fixtures

// A batch of random byte sequences of the given lengths.
data::PackedBatch random_batch(const std::vector<int64_t>& lengths, data::BatchCapacity cap) {
  std::vector<data::Segment> segs;
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t n : lengths) {
    data::Segment s;
    for (int64_t i = 0; i < n; ++i) s.tokens.push_back(byte(test::rng()));
    s.source = "random";
    segs.push_back(std::move(s));
  }
  std::vector<const data::Segment*> ptrs;
  for (const auto& s : segs) ptrs.push_back(&s);
  return data::pack_batch(ptrs, cap);
}

// The loss of a forward graph recorded fresh for `batch` over `state`'s current params.
double fresh_loss(Model& model, TrainState& state, const data::PackedBatch& batch) {
  const BatchArrays arrays = BatchArrays::allocate(batch.capacity, cpu);
  BatchStaging staging = BatchStaging::allocate(batch.capacity);
  train::load_batch(batch, staging, arrays, nullptr);
  const StepInputs in{&model.config(), &state, &arrays, {}};
  Graph g =
      Graph::record([&](Recorder& r) { r.result(model.record_loss(r, in, batch.capacity.tokens)); },
                    RecordOptions{.record = true});
  g.build(cpu);
  return g()[0].to_vector<double>()[0];
}

TEST(TrainStep, ReplaysWithOtherBatchesGiveTheLossOfAFreshGraph) {
  const data::BatchCapacity cap{64, 6};
  Model model(tiny());
  TrainState state = TrainState::init(model.config(), test::rng()(), cpu);
  const BatchArrays arrays = BatchArrays::allocate(cap, cpu);
  BatchStaging staging = BatchStaging::allocate(cap);
  // L, M: 60, 3; 17, 1; 64, 6; 33, 5; 2, 1.
  const std::vector<std::vector<int64_t>> shapes = {
      {30, 20, 10}, {17}, {20, 10, 10, 10, 8, 6}, {3, 20, 5, 2, 3}, {2}};
  train::load_batch(random_batch(shapes[0], cap), staging, arrays, nullptr);
  const StepInputs in{&model.config(), &state, &arrays, {}};
  Graph step = Graph::record([&](Recorder& r) { r.result(model.record_step(r, in, cap.tokens)); },
                             RecordOptions{.record = true});
  step.build(cpu);
  for (std::size_t b = 0; b < shapes.size(); ++b) {
    SCOPED_TRACE("batch " + std::to_string(b));
    const data::PackedBatch batch = random_batch(shapes[b], cap);
    const double want = fresh_loss(model, state, batch);  // before this step's update
    train::load_batch(batch, staging, arrays, nullptr);
    const double got = step()[0].to_vector<double>()[0];
    EXPECT_TRUE(std::isfinite(got));
    EXPECT_NEAR(got, want, 1e-6 * (1 + std::abs(want)));
  }
  EXPECT_EQ(state.count.to_vector<int64_t>()[0], static_cast<int64_t>(shapes.size()));
}

TEST(TrainStep, ASmallerCapacityReadsThePrefixAndGivesTheSameStep) {
  // A bucket's view: arrays sized for T = 64, steps recorded for T = 64 and for T = 24 (the
  // prefix rows), fed one batch of L = 21 <= 24: the same loss and the same update.
  const data::BatchCapacity cap{64, 4};
  const uint64_t seed = test::rng()();
  const data::PackedBatch batch = random_batch({8, 6, 7}, cap);
  std::vector<double> losses;
  std::vector<std::vector<float>> params;
  for (int64_t t : {int64_t{64}, int64_t{24}}) {
    Model model(tiny());
    TrainState state = TrainState::init(model.config(), seed, cpu);
    const BatchArrays arrays = BatchArrays::allocate(cap, cpu);
    BatchStaging staging = BatchStaging::allocate(cap);
    train::load_batch(batch, staging, arrays, nullptr);
    const StepInputs in{&model.config(), &state, &arrays, {}};
    Graph step = Graph::record([&](Recorder& r) { r.result(model.record_step(r, in, t)); },
                               RecordOptions{.record = true});
    step.build(cpu);
    losses.push_back(step()[0].to_vector<double>()[0]);
    std::vector<float> all;
    for (const Array& p : state.params) {
      const std::vector<float> v = p.to_vector<float>();
      all.insert(all.end(), v.begin(), v.end());
    }
    params.push_back(all);
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-6 * (1 + std::abs(losses[0])));
  ASSERT_EQ(params[0].size(), params[1].size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < params[0].size(); ++i)
    differ += !(std::abs(params[0][i] - params[1][i]) <= 1e-5f * (1 + std::abs(params[0][i])));
  EXPECT_EQ(differ, 0u) << "params after one step differ between capacities 64 and 24";
}

TEST(TrainStep, PaddingRowsChangeNeitherTheLossNorTheUpdate) {
  const data::BatchCapacity cap{48, 4};
  const uint64_t seed = test::rng()();
  const data::PackedBatch batch = random_batch({11, 7, 9}, cap);  // L = 27 of 48
  // The same batch with random tokens and labels in the padding rows (mask still 0).
  data::PackedBatch noisy = batch;
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t i = batch.active_tokens; i < cap.tokens; ++i) {
    noisy.input_ids[static_cast<std::size_t>(i)] = byte(test::rng());
    noisy.labels[static_cast<std::size_t>(i)] = byte(test::rng());
  }
  std::vector<double> losses;
  std::vector<std::vector<float>> params;
  for (const data::PackedBatch* b : {&batch, static_cast<const data::PackedBatch*>(&noisy)}) {
    Model model(tiny());
    TrainState state = TrainState::init(model.config(), seed, cpu);
    const BatchArrays arrays = BatchArrays::allocate(cap, cpu);
    BatchStaging staging = BatchStaging::allocate(cap);
    train::load_batch(*b, staging, arrays, nullptr);
    const StepInputs in{&model.config(), &state, &arrays, {}};
    Graph step = Graph::record([&](Recorder& r) { r.result(model.record_step(r, in, cap.tokens)); },
                               RecordOptions{.record = true});
    step.build(cpu);
    losses.push_back(step()[0].to_vector<double>()[0]);
    std::vector<float> all;
    for (const Array& p : state.params) {
      const std::vector<float> v = p.to_vector<float>();
      all.insert(all.end(), v.begin(), v.end());
    }
    params.push_back(all);
  }
  EXPECT_TRUE(std::isfinite(losses[0]));
  EXPECT_EQ(losses[0], losses[1]);
  ASSERT_EQ(params[0].size(), params[1].size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < params[0].size(); ++i) differ += !(params[0][i] == params[1][i]);
  EXPECT_EQ(differ, 0u) << "params after one step differ with other padding rows";
}

TEST(TrainStep, GradientsMatchFiniteDifferencesOfTheLoss) {
  // The whole model's reverse (masks, reshaped views, segments) against central differences of
  // its own forward, at random elements of every kind of param, on a batch with padding rows.
  const data::BatchCapacity cap{24, 4};
  Model model(tiny());
  TrainState state = TrainState::init(model.config(), test::rng()(), cpu);
  const BatchArrays arrays = BatchArrays::allocate(cap, cpu);
  BatchStaging staging = BatchStaging::allocate(cap);
  train::load_batch(random_batch({9, 6, 4}, cap), staging, arrays, nullptr);  // L = 19 of 24
  const StepInputs in{&model.config(), &state, &arrays, {}};
  Graph forward =
      Graph::record([&](Recorder& r) { r.result(model.record_loss(r, in, cap.tokens)); },
                    RecordOptions{.record = true});
  forward.build(cpu);
  Graph grads = Graph::record(
      [&](Recorder& r) {
        std::vector<Value> p;
        const Value loss = model.record_loss(r, in, cap.tokens, &p);
        r.result(diff::gradients(r, {loss}, p));
      },
      RecordOptions{.record = true});
  grads.build(cpu);
  std::vector<std::vector<double>> g;
  for (const Array& a : grads()) g.push_back(a.to_vector<double>());
  ASSERT_EQ(g.size(), state.params.size());
  auto loss = [&] { return forward()[0].to_vector<double>()[0]; };
  std::size_t checked = 0;
  for (std::size_t k = 0; k < state.params.size(); ++k) {
    float* p = static_cast<float*>(state.params[k].data());
    const int64_t n = state.params[k].numel();
    for (int e = 0; e < 3; ++e) {
      const int64_t i = std::uniform_int_distribution<int64_t>(0, n - 1)(test::rng());
      const float x = p[i];
      const float h = 1e-2f * std::max(1.0f, std::abs(x));
      p[i] = x + h;
      const double up = loss();
      p[i] = x - h;
      const double down = loss();
      p[i] = x;
      const double want = (up - down) / (static_cast<double>(x + h) - static_cast<double>(x - h));
      const double got = g[k][static_cast<std::size_t>(i)];
      EXPECT_NEAR(got, want, 2e-3 + 0.05 * std::abs(want)) << state.names[k] << " element " << i;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 * state.params.size());
}

TEST(TrainParagraphs, SplitAfterBlankLinesAndAtTheCap) {
  data::Segment doc;
  doc.source = "d";
  for (char c : std::string("ab\n\ncdefg\nh\n\n\nij")) doc.tokens.push_back(c);
  const std::vector<data::Segment> parts = train::paragraphs({doc}, 4);
  std::vector<std::string> got;
  for (const auto& p : parts) got.emplace_back(p.tokens.begin(), p.tokens.end());
  EXPECT_EQ(got, (std::vector<std::string>{"ab\n\n", "cdef", "g\nh\n", "\n\n", "ij"}));
  EXPECT_EQ(parts[1].source, "d#1");
  test::expect_invalid([&] { train::paragraphs({doc}, 0); }, "segment cap must be >= 1");
}

TEST(TrainStep, LossGoesDownOverThirtyStepsOnRealText) {
  train::TrainOptions o;
  o.docs = std::filesystem::path(EAGLE_SOURCE_DIR) / "src";
  o.steps = 30;
  o.capacity = {128, 8};
  o.lookahead = 16;
  o.model = tiny();
  o.model.dim = 32;
  o.max_tokens = 300'000;
  o.seed = test::rng()();
  o.adamw.lr = 1e-2;
  const train::TrainReport r = train::run_training(o, {}, {});
  ASSERT_EQ(r.steps.size(), 30u);
  // Byte-level text starts near log(256) = 5.55 and drops fast (byte frequencies alone).
  expect_loss_falls(r);
  // Each step but the last packs the next batch while it runs; the last has none to pack.
  for (std::size_t i = 0; i + 1 < r.steps.size(); ++i) EXPECT_GT(r.steps[i].pack_seconds, 0) << i;
  EXPECT_EQ(r.steps.back().pack_seconds, 0);
}

// --fill F: batches of at most F tokens. With buckets, each runs the smallest bucket holding it;
// without, the worst-case graph of T runs the same batches, with the same losses (the padding rows
// change nothing); the set's arena is reported against the largest bucket built alone.
TEST(TrainStep, APartialFillRunsTheSmallestBucketAndGivesTheWorstCaseGraphsLosses) {
  train::TrainOptions o;
  o.docs = std::filesystem::path(EAGLE_SOURCE_DIR) / "src";
  o.steps = 4;
  o.capacity = {128, 8};
  o.fill = 32;
  o.lookahead = 16;
  o.model = tiny();
  o.max_tokens = 100'000;
  o.seed = test::rng()();
  const train::TrainReport worst = train::run_training(o, {}, {});
  o.buckets = {32, 64};
  const train::TrainReport bucketed = train::run_training(o, {}, {});
  ASSERT_EQ(worst.steps.size(), 4u);
  ASSERT_EQ(bucketed.steps.size(), 4u);
  EXPECT_EQ(bucketed.capacities, (std::vector<int64_t>{32, 64, 128}));
  EXPECT_GT(bucketed.alone_bytes, 0u);
  EXPECT_LE(static_cast<double>(bucketed.set_bytes),
            1.1 * static_cast<double>(bucketed.alone_bytes));
  for (std::size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE("step " + std::to_string(i + 1));
    EXPECT_LE(worst.steps[i].active_tokens, 32);
    EXPECT_EQ(worst.steps[i].active_tokens, bucketed.steps[i].active_tokens);
    EXPECT_EQ(worst.steps[i].capacity, 128);
    EXPECT_EQ(bucketed.steps[i].capacity, 32);
    EXPECT_NEAR(bucketed.steps[i].loss, worst.steps[i].loss, 1e-4 * std::abs(worst.steps[i].loss));
  }
}

TEST(TrainStep, AFillAboveTheCapacityOrBelowTheSegmentCapIsRefused) {
  train::TrainOptions o;
  o.docs = std::filesystem::path(EAGLE_SOURCE_DIR) / "src";
  o.capacity = {128, 8};
  o.model = tiny();
  o.fill = 129;
  test::expect_invalid([&] { train::run_training(o, {}, {}); }, {"--fill", "1..128", "129"});
  o.fill = 16;
  o.segment_cap = 32;
  test::expect_invalid([&] { train::run_training(o, {}, {}); },
                       {"segment cap (32)", "--fill (16)"});
}

}  // namespace
}  // namespace eagle
