// measure_packing's statistics and advise_packing's recommendation.
#include <gtest/gtest.h>

#include "compare.hpp"
#include "eagle/data/documents.hpp"
#include "eagle/data/packing_report.hpp"
#include "eagle/data/zipf.hpp"

namespace eagle::data {
namespace {

TEST(MeasurePacking, CountsFillPaddingAndSequencesOfSteadyStateBatches) {
  // Lengths 6, 4 repeated, T = 10, B = 2: every full-buffer batch is {6, 4}: fill 1, M = 2.
  std::vector<int64_t> lengths;
  for (int i = 0; i < 50; ++i) lengths.insert(lengths.end(), {6, 4});
  const PackingStats s = measure_packing(lengths, 10, 2);
  EXPECT_EQ(s.batches, 50);
  EXPECT_DOUBLE_EQ(s.mean_fill, 1.0);
  EXPECT_DOUBLE_EQ(s.mean_padding, 0.0);
  EXPECT_EQ(s.median_m, 2);
  EXPECT_EQ(s.p99_m, 2);
  EXPECT_EQ(s.max_m, 2);
}

TEST(MeasurePacking, ALargerBufferFillsAtLeastAsWellOnZipfData) {
  const std::vector<int64_t> lengths = split_lengths(zipf_lengths(400'000, 2000, 7), 4096);
  const PackingStats b1 = measure_packing(lengths, 8192, 1);
  const PackingStats b32 = measure_packing(lengths, 8192, 32);
  EXPECT_EQ(b1.max_m, 1);
  EXPECT_LE(b32.max_m, 32);
  EXPECT_GT(b32.mean_fill, b1.mean_fill);
  EXPECT_NEAR(b32.mean_padding, 8192 * (1 - b32.mean_fill), 1e-6);
}

TEST(MeasurePacking, RefusesLengthsPastT) {
  test::expect_invalid([] { measure_packing({5, 20}, 10, 4); }, {"length 20", "T = 10"});
  test::expect_invalid([] { measure_packing({5}, 10, 0); }, {"B >= 1"});
}

TEST(AdvisePacking, OneGraphWhenFullElseBucketsAtTheQuantiles) {
  PackingStats full;
  full.tokens = 8192;
  full.lookahead = 32;
  full.batches = 4;
  full.mean_fill = 0.995;
  full.max_m = 13;
  full.active_tokens = {8192, 8100, 8150, 8192};
  PackingStats worse = full;
  worse.lookahead = 8;
  worse.mean_fill = 0.95;
  PackingStats sparse;
  sparse.tokens = 4096;
  sparse.lookahead = 16;
  sparse.batches = 4;
  sparse.mean_fill = 0.5;
  sparse.max_m = 3;
  sparse.active_tokens = {1000, 2000, 3000, 4000};
  const std::vector<PackingAdvice> a = advise_packing({worse, full, sparse});
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].tokens, 4096);
  EXPECT_EQ(a[0].slots, 4);
  EXPECT_EQ(a[0].buckets,
            (std::vector<int64_t>{2048, 4096}));  // 50%: 2000 -> 2048; 90%: 4000 -> 4096 = T
  EXPECT_NE(a[0].reason.find("buckets"), std::string::npos);
  EXPECT_EQ(a[1].tokens, 8192);
  EXPECT_EQ(a[1].lookahead, 32);
  EXPECT_EQ(a[1].slots, 16);
  EXPECT_EQ(a[1].buckets, (std::vector<int64_t>{8192}));
  EXPECT_NE(a[1].reason.find("one graph"), std::string::npos);
}

}  // namespace
}  // namespace eagle::data
