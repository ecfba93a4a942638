// The ragged kernels on the CPU and on cuda:0, eagerly and inside a recorded graph whose
// cu_seqlens is bound anew between replays.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "eagle/ragged/capacity.hpp"
#include "eagle/ragged/kernels.hpp"
#include "eagle/ragged/validate.hpp"
#include "test_util.hpp"

namespace eagle::test {
namespace {

Array cu_array(const std::vector<int32_t>& cu, Device d) {
  return Array::from(cu, {static_cast<int64_t>(cu.size())}, d);
}

// The host version of every rule: clamped boundaries, chunk offsets, the active end.
std::vector<int64_t> clamped(const std::vector<int32_t>& cu, int64_t tokens) {
  std::vector<int64_t> b(cu.size(), 0);
  for (std::size_t s = 1; s < cu.size(); ++s)
    b[s] = std::min<int64_t>(std::max<int64_t>(cu[s], b[s - 1]), tokens);
  return b;
}
std::vector<int32_t> want_offsets(const std::vector<int32_t>& cu, int64_t tokens, int64_t c) {
  const std::vector<int64_t> b = clamped(cu, tokens);
  std::vector<int32_t> out(cu.size(), 0);
  for (std::size_t s = 1; s < cu.size(); ++s)
    out[s] = static_cast<int32_t>(out[s - 1] + (b[s] - b[s - 1] + c - 1) / c);
  return out;
}

class Ragged : public OnDeviceWithStream {};

TEST_P(Ragged, ValidationNamesTheFirstBrokenRule) {
  struct Case {
    std::vector<int32_t> cu;
    uint32_t rule, index;
    const char* message;
  };
  const int64_t tokens = 10;
  const std::vector<Case> cases = {
      {{0, 3, 3, 7, 10}, 0, 0, ""},
      {{0, 0, 0}, 0, 0, ""},
      {{0}, 0, 0, ""},
      {{1, 3, 7}, 1, 0, "the first entry must be 0"},
      {{0, 4, 2, 9}, 2, 2, "entry 2 is less than the one before"},
      {{0, 4, 5, 11}, 3, 3, "the last entry must be <= T"},
      {{0, 4, 3, 11}, 2, 2, "must not decrease"},  // the first rule broken wins
  };
  for (const Case& c : cases) {
    const Array error = launch(ragged::validate_cu_seqlens(), {cu_array(c.cu, device())},
                               {int64_t{tokens}}, stream(), team_)[0];
    stream().synchronize();
    const std::vector<uint32_t> e = error.to_vector<uint32_t>();
    EXPECT_EQ(e[0], c.rule);
    EXPECT_EQ(e[1], c.index);
    if (c.rule == 0) {
      EXPECT_NO_THROW(ragged::throw_if_invalid(error));
    } else {
      expect_invalid([&] { ragged::throw_if_invalid(error, "batch cu_seqlens"); },
                     {"batch cu_seqlens", c.message, "(index " + std::to_string(c.index) + ")"});
    }
  }
}

TEST_P(Ragged, ChunkOffsetsScanTheClampedLengths) {
  const int64_t tokens = 40;
  const std::vector<std::vector<int32_t>> batches = {
      {0, 1, 4, 4, 5, 9, 40},           // lengths 0, 1, C - 1, C, C + 1, long (C = 4)
      {0, 40, 40, 40},                  // one sequence fills T, a repeated tail
      {0, 0, 0, 0},                     // nothing active
      {0, 7, 3, 55, -5},                // bad: decreasing, past T, negative: clamped
      {0, 1, 2, 3, 4, 5, 6, 7, 8, 40},  // M_max - 1 single tokens and one long: the bound
  };
  for (int64_t c : {1, 4, 16}) {
    for (const auto& cu : batches) {
      const Array out = launch(ragged::chunk_offsets(), {cu_array(cu, device())},
                               {int64_t{tokens}, c}, stream(), team_)[0];
      stream().synchronize();
      const std::vector<int32_t> got = out.to_vector<int32_t>();
      EXPECT_EQ(got, want_offsets(cu, tokens, c)) << "C " << c;
      const int64_t slots = static_cast<int64_t>(cu.size()) - 1;
      EXPECT_LE(got.back(), ragged::chunk_capacity(tokens, slots, c));
    }
  }
}

// Thousands of slots: the GPU scans them a block-wide tile at a time (1024 entries), so the
// boundaries carried across tiles, a broken entry deep in a later tile and the first of two
// broken entries (in different tiles) are checked against the host rules.
TEST_P(Ragged, ScansOverManyTilesMatchTheHostRules) {
  Rng& r = rng();
  const int64_t slots = 3001, tokens = 50000;
  std::vector<int32_t> cu(slots + 1, 0);
  std::uniform_int_distribution<int32_t> len(0, 30);
  for (int64_t s = 1; s <= slots; ++s) cu[s] = cu[s - 1] + len(r);
  ASSERT_LE(cu[slots], tokens);
  for (int64_t c : {1, 7, 64}) {
    const Array out = launch(ragged::chunk_offsets(), {cu_array(cu, device())},
                             {int64_t{tokens}, c}, stream(), team_)[0];
    stream().synchronize();
    EXPECT_EQ(out.to_vector<int32_t>(), want_offsets(cu, tokens, c)) << "C " << c;
  }
  // Bad metadata: a drop at 2500 and another at 1500 (the first wins), a jump past T at 2900.
  std::vector<int32_t> bad = cu;
  bad[2500] = bad[2499] - 5;
  bad[2900] = static_cast<int32_t>(tokens + 7);
  const auto check = [&](const std::vector<int32_t>& c, uint32_t rule, uint32_t index) {
    const Array error = launch(ragged::validate_cu_seqlens(), {cu_array(c, device())},
                               {int64_t{tokens}}, stream(), team_)[0];
    const Array off = launch(ragged::chunk_offsets(), {cu_array(c, device())},
                             {int64_t{tokens}, int64_t{16}}, stream(), team_)[0];
    stream().synchronize();
    EXPECT_EQ(error.to_vector<uint32_t>(), (std::vector<uint32_t>{rule, index}));
    EXPECT_EQ(off.to_vector<int32_t>(), want_offsets(c, tokens, 16));
  };
  check(cu, 0, 0);
  check(bad, 2, 2500);
  bad[1500] = bad[1499] - 1;
  check(bad, 2, 1500);
  std::vector<int32_t> past = cu;
  past[slots] = static_cast<int32_t>(tokens + 1);
  check(past, 3, static_cast<uint32_t>(slots));
}

TEST_P(Ragged, MasksFollowTheActiveEnd) {
  const int64_t tokens = 37, width = 5;
  const std::vector<int32_t> cu = {0, 11, 11, 23, 23};  // L = 23, the tail repeats it
  const int64_t active = 23;
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(d));
    // Padding rows hold NaN: they must not leak into the masked output.
    std::vector<double> hx = random_values(static_cast<std::size_t>(tokens * width), -2.0, 2.0);
    for (int64_t i = active * width; i < tokens * width; ++i) hx[i] = NAN;
    const Array x = from_doubles(hx, {tokens, width}, d, device());
    const Array y = poisoned({tokens, width}, d, device());
    launch_into(ragged::mask_rows(), {x, cu_array(cu, device())}, {}, {y}, stream(), team_);
    const Array z = poisoned({tokens, width}, d, device());
    launch_into(ragged::gradient_barrier(), {x, cu_array(cu, device())}, {}, {z}, stream(), team_);
    stream().synchronize();
    const std::vector<double> gx = x.to_vector<double>(), gy = y.to_vector<double>(),
                              gz = z.to_vector<double>();
    for (int64_t i = 0; i < tokens * width; ++i) {
      if (i < active * width)
        EXPECT_EQ(gy[i], gx[i]) << i;
      else
        EXPECT_EQ(gy[i], 0.0) << i;
      EXPECT_TRUE(gz[i] == gx[i] || (std::isnan(gz[i]) && std::isnan(gx[i]))) << i;
    }
  }
  const Array mask =
      launch(ragged::active_rows(), {cu_array(cu, device())}, {tokens}, stream(), team_)[0];
  stream().synchronize();
  const std::vector<uint8_t> m = mask.to_vector<uint8_t>();
  ASSERT_EQ(m.size(), static_cast<std::size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i) EXPECT_EQ(m[i], i < active ? 1 : 0) << i;
}

// Captured once for the capacity; each replay reads the batch bound to cu_seqlens.
TEST_P(Ragged, AGraphReadsTheBatchBoundAtEachReplay) {
  const int64_t tokens = 24, chunk = 4;
  const std::vector<int32_t> first = {0, 5, 5, 12}, second = {0, 24, 24, 24},
                             broken = {0, 9, 4, 30};
  const Array cu0 = cu_array(first, device());
  Graph g = Graph::record([&](Recorder& r) {
    const Value cu = r.param("cu_seqlens", cu0);
    const Value error = r.call(ragged::validate_cu_seqlens(), {cu, int64_t{tokens}});
    const Value offsets = r.call(ragged::chunk_offsets(), {cu, int64_t{tokens}, chunk});
    const Value mask = r.call(ragged::active_rows(), {cu, int64_t{tokens}});
    r.result({error, offsets, mask});
  });
  g.build(device());
  for (const auto& cu : {first, second, broken}) {
    g.bind("cu_seqlens", cu_array(cu, device()));
    const std::vector<Array>& out = g();
    EXPECT_EQ(out[1].to_vector<int32_t>(), want_offsets(cu, tokens, chunk));
    const std::vector<uint8_t> m = out[2].to_vector<uint8_t>();
    const int64_t active = std::clamp<int64_t>(cu.back(), 0, tokens);
    for (int64_t i = 0; i < tokens; ++i) EXPECT_EQ(m[i], i < active ? 1 : 0) << i;
    if (cu == broken)
      expect_invalid([&] { ragged::throw_if_invalid(out[0]); }, "entry 2 is less than");
    else
      EXPECT_NO_THROW(ragged::throw_if_invalid(out[0]));
  }
  EXPECT_EQ(g.rebuild_count(), 0);
}

// ragged::validate makes g() itself throw for a broken batch; the graph stays usable.
TEST_P(Ragged, GThrowsTheRuleABrokenBatchBreaks) {
  if (!ragged::checks_enabled()) GTEST_SKIP() << "built with EAGLE_RAGGED_CHECKS=OFF";
  const int64_t tokens = 16;
  const Array cu0 = cu_array({0, 4, 9}, device());
  Graph g = Graph::record([&](Recorder& r) {
    const Value cu = r.param("cu_seqlens", cu0);
    ragged::validate(r, cu, tokens, "batch 7 cu_seqlens");
    r.result(r.call(ragged::active_rows(), {cu, tokens}));
  });
  g.build(device());
  EXPECT_EQ(g()[0].to_vector<uint8_t>()[8], 1);
  g.bind("cu_seqlens", cu_array({0, 4, 17}, device()));
  expect_invalid([&] { g(); }, {"batch 7 cu_seqlens", "the last entry must be <= T", "index 2"});
  g.bind("cu_seqlens", cu_array({1, 4, 9}, device()));
  expect_invalid([&] { g(3); }, "the first entry must be 0");
  g.bind("cu_seqlens", cu_array({0, 2, 3}, device()));
  const std::vector<uint8_t> m = g()[0].to_vector<uint8_t>();
  EXPECT_EQ(m[2], 1);
  EXPECT_EQ(m[3], 0);
  EXPECT_EQ(g.rebuild_count(), 0);
}

// The build option: with the checks on, validate records one node and returns its error word;
// with EAGLE_RAGGED_CHECKS=OFF it records nothing and returns an undefined Value.
// The host rule: the first bound of seqlen_buckets(T, S0) the longest clamped length fits.
uint32_t want_bucket(const std::vector<int32_t>& cu, int64_t tokens, int64_t smallest) {
  int64_t longest = 0;
  for (std::size_t s = 0; s + 1 < cu.size(); ++s) {
    const int64_t begin = std::clamp<int64_t>(cu[s], 0, tokens);
    const int64_t end = std::clamp<int64_t>(cu[s + 1], 0, tokens);
    longest = std::max(longest, end - begin);
  }
  const std::vector<int64_t> bounds = ragged::seqlen_buckets(tokens, smallest);
  const auto fits =
      std::find_if(bounds.begin(), bounds.end(), [&](int64_t b) { return longest <= b; });
  return static_cast<uint32_t>(fits - bounds.begin());
}

TEST_P(Ragged, TheSeqlenBucketIsTheFirstBoundTheLongestSequenceFits) {
  const int64_t tokens = 100, smallest = 8;  // bounds 8, 16, 32, 64, 100
  const std::vector<std::pair<std::vector<int32_t>, uint32_t>> batches = {
      {{0, 0, 0}, 0},           // nothing active
      {{0, 8, 16, 24}, 0},      // exactly the smallest bound
      {{0, 9, 10}, 1},          // one past it
      {{0, 3, 35, 40}, 2},      // 32 rows: a bound met exactly
      {{0, 1, 66}, 4},          // 65 rows, past 64: the last bound, T
      {{0, 100}, 4},            // one sequence fills T
      {{0, 7, 3, 150, -5}, 4},  // bad: decreasing, past T, negative (clamped: 97 rows)
  };
  for (const auto& [cu, expected] : batches) {
    const Array out = launch(ragged::seqlen_bucket(), {cu_array(cu, device())}, {tokens, smallest},
                             stream(), team_)[0];
    stream().synchronize();
    EXPECT_EQ(want_bucket(cu, tokens, smallest), expected);
    EXPECT_EQ(out.to_vector<uint32_t>(), std::vector<uint32_t>{expected});
  }
  // Thousands of sequences (the GPU's block strides over them), the longest deep in the list.
  Rng& r = rng();
  std::vector<int32_t> cu(3001, 0);
  std::uniform_int_distribution<int32_t> len(0, 20);
  for (std::size_t s = 1; s < cu.size(); ++s) cu[s] = cu[s - 1] + len(r);
  cu[2700] = cu[2699] + 150;
  for (std::size_t s = 2701; s < cu.size(); ++s) cu[s] = cu[s - 1] + len(r);
  const int64_t big = cu.back();
  for (int64_t s0 : {1, 16, 200, 100000}) {
    const Array out =
        launch(ragged::seqlen_bucket(), {cu_array(cu, device())}, {big, s0}, stream(), team_)[0];
    stream().synchronize();
    EXPECT_EQ(out.to_vector<uint32_t>(), std::vector<uint32_t>{want_bucket(cu, big, s0)})
        << "S0 " << s0;
  }
}

TEST(RaggedKernels, ValidateRecordsItsCheckOnlyWhenTheBuildKeepsIt) {
  Value error;
  Graph g = Graph::record([&](Recorder& r) {
    const Value cu = r.param("cu_seqlens", cu_array({0, 4, 9}, Device::cpu()));
    error = ragged::validate(r, cu, 16);
    r.result(r.call(ragged::active_rows(), {cu, int64_t{16}}));
  });
  EXPECT_EQ(g.nodes().size(), ragged::checks_enabled() ? 2u : 1u);
}

TEST(RaggedKernels, BadArgumentsAreRefusedByName) {
  const Stream cpu(Device::cpu());
  const ThreadTeam team(1);
  const Array cu = Array::from(std::vector<int32_t>{0, 2}, {2}, Device::cpu());
  const Array cu64 = Array::from(std::vector<int64_t>{0, 2}, {2}, Device::cpu());
  expect_invalid(
      [&] {
        launch(ragged::chunk_offsets(), {cu}, {int64_t{4}, int64_t{0}}, cpu, team);
      },
      "chunk (C) must be >= 1, got 0");
  expect_invalid([&] { launch(ragged::active_rows(), {cu}, {int64_t{-1}}, cpu, team); },
                 "tokens (T) must be >= 0, got -1");
  expect_invalid([&] { launch(ragged::validate_cu_seqlens(), {cu64}, {int64_t{4}}, cpu, team); },
                 "cu_seqlens must be a 1-D i32 array");
  expect_invalid([&] { ragged::throw_if_invalid(cu); }, "must be the u32 [2]");
  expect_invalid(
      [&] {
        launch(ragged::seqlen_bucket(), {cu}, {int64_t{4}, int64_t{0}}, cpu, team);
      },
      "smallest (S0) must be >= 1, got 0");
  expect_invalid(
      [&] {
        launch(ragged::seqlen_bucket(), {cu}, {int64_t{0}, int64_t{2}}, cpu, team);
      },
      "tokens (T) must be >= 1, got 0");
}

EAGLE_ON_EVERY_DEVICE(Ragged);

}  // namespace
}  // namespace eagle::test
