// The look-ahead packer: the selection policy, batch layout (labels, loss mask, cu_seqlens tail),
// the loader over a stream, and the errors.
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "compare.hpp"
#include "eagle/data/packing.hpp"
#include "random.hpp"

namespace eagle::data {
namespace {

Segment segment(int64_t n, int32_t first = 1, std::string name = "s") {
  Segment s;
  for (int64_t i = 0; i < n; ++i) s.tokens.push_back(first + static_cast<int32_t>(i % 200));
  s.source = std::move(name);
  return s;
}

TEST(SelectCandidates, TakesTheOldestThenTheLongestThatFit) {
  // T = 10: the oldest (3) first, then 6 (longest fitting), then 1; 5 and 4 no longer fit.
  const std::vector<std::size_t> got = select_candidates({3, 5, 6, 4, 1}, {10, 8});
  EXPECT_EQ(got, (std::vector<std::size_t>{0, 2, 4}));
}

TEST(SelectCandidates, StopsAtNSequences) {
  const std::vector<std::size_t> got = select_candidates({1, 1, 1, 1, 1}, {100, 3});
  EXPECT_EQ(got.size(), 3u);
}

TEST(SelectCandidates, NeverExceedsTheCapacityOnRandomBuffers) {
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t t = test::random_ints(1, 16, 512)[0], n = test::random_ints(1, 1, 16)[0];
    const std::vector<int64_t> lens =
        test::random_ints(static_cast<std::size_t>(test::random_ints(1, 1, 40)[0]), 1, t);
    const std::deque<int64_t> buffer(lens.begin(), lens.end());
    const std::vector<std::size_t> got = select_candidates(buffer, {t, n});
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(got[0], 0u);
    EXPECT_LE(static_cast<int64_t>(got.size()), n);
    int64_t l = 0;
    for (std::size_t i : got) l += buffer[i];
    EXPECT_LE(l, t);
    EXPECT_EQ(std::set<std::size_t>(got.begin(), got.end()).size(), got.size());
    // Greedy is maximal: no candidate left out would still fit while a slot is free.
    if (static_cast<int64_t>(got.size()) < n) {
      for (std::size_t i = 0; i < buffer.size(); ++i) {
        if (std::find(got.begin(), got.end(), i) == got.end()) {
          EXPECT_GT(buffer[i], t - l);
        }
      }
    }
  }
}

TEST(SelectCandidates, RefusesBadInput) {
  test::expect_invalid(
      [] {
        select_candidates({3, 11}, {10, 4});
      },
      {"candidate 1", "length 11", "T = 10"});
  test::expect_invalid([] { select_candidates({0}, {10, 4}); }, {"candidate 0", "length 0"});
  test::expect_invalid([] { select_candidates({1}, {0, 4}); }, {"T >= 1", "T = 0"});
  test::expect_invalid([] { select_candidates({1}, {8, 0}); }, {"N >= 1", "N = 0"});
}

TEST(PackBatch, LaysOutLabelsMaskAndTheUnusedTail) {
  const Segment a = segment(4, 10, "a"), b = segment(3, 20, "b");
  const PackedBatch p = pack_batch({&a, &b}, {10, 4});
  EXPECT_EQ(p.active_tokens, 7);
  EXPECT_EQ(p.active_sequences, 2);
  EXPECT_EQ(p.max_seqlen, 4);
  EXPECT_EQ(p.cu_seqlens, (std::vector<int32_t>{0, 4, 7, 7, 7}));
  EXPECT_EQ(p.input_ids, (std::vector<int32_t>{10, 11, 12, 13, 20, 21, 22, 0, 0, 0}));
  const int32_t x = kIgnoreLabel;
  EXPECT_EQ(p.labels, (std::vector<int32_t>{11, 12, 13, x, 21, 22, x, x, x, x}));
  // The second half of each sequence (rows n/2 .. n-2: the last row has no label).
  EXPECT_EQ(p.loss_mask, (std::vector<float>{0, 0, 1, 0, 0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(p.sources, (std::vector<std::string>{"a", "b"}));
}

TEST(PackBatch, RefusesTooMuch) {
  const Segment a = segment(6), b = segment(5), e;
  test::expect_invalid([&] { pack_batch({&a, &b}, {10, 4}); }, {"more than T = 10"});
  test::expect_invalid([&] { pack_batch({&a, &a, &a}, {100, 2}); }, {"3 sequences", "N = 2"});
  test::expect_invalid([&] { pack_batch({&e}, {10, 2}); }, {"segment 0", "empty"});
}

TEST(PackBatch, WithCapacityPadsTheNewRowsAsPackBatchDoes) {
  const Segment a = segment(4, 10, "a"), b = segment(3, 20, "b");
  const PackedBatch small = pack_batch({&a, &b}, {8, 4});
  const PackedBatch wide = with_capacity(small, 12);
  const PackedBatch direct = pack_batch({&a, &b}, {12, 4});
  EXPECT_EQ(wide.capacity.tokens, 12);
  EXPECT_EQ(wide.capacity.slots, 4);
  EXPECT_EQ(wide.input_ids, direct.input_ids);
  EXPECT_EQ(wide.labels, direct.labels);
  EXPECT_EQ(wide.loss_mask, direct.loss_mask);
  EXPECT_EQ(wide.cu_seqlens, direct.cu_seqlens);
  EXPECT_EQ(wide.active_tokens, 7);
  EXPECT_EQ(wide.sources, direct.sources);
  EXPECT_EQ(with_capacity(small, 8).input_ids, small.input_ids);
  test::expect_invalid([&] { with_capacity(small, 7); }, {"with_capacity", "7", "T = 8"});
}

TEST(PackedLoader, PacksEverySegmentOnceAndKeepsTheirOrderWithinABatch) {
  std::vector<Segment> all;
  const std::vector<int64_t> lens = test::random_ints(200, 1, 64);
  for (std::size_t i = 0; i < lens.size(); ++i)
    all.push_back(segment(lens[i], 1, "doc" + std::to_string(i)));
  std::size_t at = 0;
  PackedLoader loader(
      [&]() -> std::optional<Segment> {
        if (at == all.size()) return std::nullopt;
        return all[at++];
      },
      {128, 8}, 16);
  std::multiset<std::string> seen;
  int64_t tokens = 0, batches = 0;
  while (std::optional<PackedBatch> b = loader.next()) {
    ++batches;
    EXPECT_LE(b->active_tokens, 128);
    EXPECT_LE(b->active_sequences, 8);
    EXPECT_EQ(b->cu_seqlens.back(), b->active_tokens);
    tokens += b->active_tokens;
    for (const std::string& s : b->sources) seen.insert(s);
  }
  EXPECT_EQ(tokens, std::accumulate(lens.begin(), lens.end(), int64_t{0}));
  EXPECT_EQ(seen.size(), all.size());
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), all.size());
  EXPECT_FALSE(loader.next().has_value());
  EXPECT_GT(batches, 0);
}

TEST(PackedLoader, ASegmentLongerThanTIsRefusedWithItsName) {
  std::vector<Segment> all{segment(5, 1, "short"), segment(40, 1, "long.txt")};
  PackedLoader loader(cycle_segments(&all), {32, 4}, 4);
  test::expect_invalid([&] { loader.next(); }, {"long.txt", "40 tokens", "T = 32", "segment cap"});
}

TEST(PackedLoader, RefusesBadSettings) {
  std::vector<Segment> all{segment(5)};
  test::expect_invalid(
      [&] {
        PackedLoader(cycle_segments(&all), {32, 4}, 0);
      },
      {"lookahead", ">= 1", "got 0"});
  test::expect_invalid([&] { PackedLoader(cycle_segments(&all), {0, 4}, 2); }, {"T >= 1"});
  test::expect_invalid([&] { PackedLoader({}, {8, 4}, 2); }, {"source"});
  std::vector<Segment> none;
  test::expect_invalid([&] { cycle_segments(&none); }, {"no segments"});
}

TEST(PackedLoader, CyclesForever) {
  std::vector<Segment> all{segment(7, 1, "a"), segment(9, 1, "b"), segment(3, 1, "c")};
  PackedLoader loader(cycle_segments(&all), {16, 2}, 3);
  for (int i = 0; i < 20; ++i) {
    std::optional<PackedBatch> b = loader.next();
    ASSERT_TRUE(b.has_value());
    EXPECT_GE(b->active_tokens, 9);  // the oldest plus the best fit never leave 16 half empty
  }
}

}  // namespace
}  // namespace eagle::data
