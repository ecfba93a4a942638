#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "eagle/ragged/capacity.hpp"
#include "test_util.hpp"

namespace eagle::test {
namespace {

int64_t chunks_of(const std::vector<int64_t>& lengths, int64_t chunk) {
  int64_t n = 0;
  for (int64_t len : lengths) n += (len + chunk - 1) / chunk;
  return n;
}

// Every batch of at most T tokens in N slots (lengths >= 0, empty slots included), up to the
// order of the lengths: the bound holds for each and the worst reaches it.
TEST(RaggedCapacity, TheChunkBoundIsNeverExceededAndIsReached) {
  for (int64_t tokens = 0; tokens <= 10; ++tokens)
    for (int64_t slots = 0; slots <= 5; ++slots)
      for (int64_t chunk = 1; chunk <= 4; ++chunk) {
        const int64_t cap = ragged::chunk_capacity(tokens, slots, chunk);
        int64_t worst = 0;
        std::vector<int64_t> lengths;
        std::function<void(int64_t, int64_t)> walk = [&](int64_t left, int64_t max_len) {
          worst = std::max(worst, chunks_of(lengths, chunk));
          if (static_cast<int64_t>(lengths.size()) == slots) return;
          for (int64_t len = std::min(left, max_len); len >= 1; --len) {
            lengths.push_back(len);
            walk(left - len, len);
            lengths.pop_back();
          }
        };
        walk(tokens, tokens);
        EXPECT_EQ(worst, cap) << "T " << tokens << " N " << slots << " C " << chunk;
        // The witness: M_max - 1 sequences of one token and one long one.
        const int64_t m = ragged::max_sequences(tokens, slots);
        if (m > 0) {
          std::vector<int64_t> witness(static_cast<std::size_t>(m - 1), 1);
          witness.push_back(tokens - m + 1);
          EXPECT_EQ(chunks_of(witness, chunk), cap);
        }
      }
}

TEST(RaggedCapacity, TheSeedsShapes) {
  // T = 16384 tokens in N = 64 slots, chunks of 64: 64 + (16384 - 64) / 64 = 319.
  EXPECT_EQ(ragged::chunk_capacity(16384, 64, 64), 319);
  EXPECT_EQ(ragged::chunk_capacity(8192, 256, 128), 256 + (8192 - 256) / 128);
  EXPECT_EQ(ragged::chunk_capacity(5, 100, 4), 5);  // more slots than tokens
  EXPECT_EQ(ragged::chunk_capacity(0, 3, 4), 0);
  EXPECT_EQ(ragged::max_sequences(7, 3), 3);
}

TEST(RaggedCapacity, SeqlenBucketsDoubleFromTheSmallestUpToT) {
  EXPECT_EQ(ragged::seqlen_buckets(4096, 256), (std::vector<int64_t>{256, 512, 1024, 2048, 4096}));
  EXPECT_EQ(ragged::seqlen_buckets(100, 8), (std::vector<int64_t>{8, 16, 32, 64, 100}));
  EXPECT_EQ(ragged::seqlen_buckets(100, 100), (std::vector<int64_t>{100}));
  EXPECT_EQ(ragged::seqlen_buckets(100, 500), (std::vector<int64_t>{100}));  // T caps it
  EXPECT_EQ(ragged::seqlen_buckets(1, 1), (std::vector<int64_t>{1}));
}

TEST(RaggedCapacity, BadArgumentsAreNamed) {
  expect_invalid([] { ragged::seqlen_buckets(0, 4); }, "tokens (T) must be >= 1, got 0");
  expect_invalid([] { ragged::seqlen_buckets(8, 0); }, "smallest (S0) must be >= 1, got 0");
  expect_invalid([] { ragged::chunk_capacity(-1, 4, 4); }, "tokens (T) must be >= 0, got -1");
  expect_invalid([] { ragged::chunk_capacity(4, -2, 4); }, "slots (N) must be >= 0, got -2");
  expect_invalid([] { ragged::chunk_capacity(4, 4, 0); }, "chunk (C) must be >= 1, got 0");
  expect_invalid([] { ragged::max_sequences(-3, 4); }, "tokens (T) must be >= 0");
}

}  // namespace
}  // namespace eagle::test
