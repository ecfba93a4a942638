// What packing a length distribution into capacity T with look-ahead B gives (`eagle pack`):
// the seed's packing-efficiency table (mean fill, mean padding, median and p99 M), and a
// recommendation for T, N and the bucket list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace eagle::data {

struct PackingStats {
  int64_t tokens = 0;       // T
  int64_t lookahead = 0;    // B
  int64_t batches = 0;      // batches measured (the steady state: while the buffer is full)
  double mean_fill = 0;     // mean L / T
  double mean_padding = 0;  // mean T - L, tokens
  int64_t median_m = 0, p99_m = 0, max_m = 0;  // sequences per batch
  std::vector<int64_t> active_tokens;          // L of every measured batch
};

// Packs `lengths` (in order, each already at most T: split them first) with select_candidates
// at N = B (the policy bounds M by B, so N = B never limits it) and measures every batch made
// while the candidate buffer is full; the drain at the end of the data is left out. Throws
// InvalidArgument when a length exceeds T or is not positive, or T, B < 1.
PackingStats measure_packing(const std::vector<int64_t>& lengths, int64_t tokens,
                             int64_t lookahead);

struct PackingAdvice {
  int64_t tokens = 0;            // T
  int64_t lookahead = 0;         // B: the smallest whose fill is within 0.5% of the best B for T
  int64_t slots = 0;             // N: the smallest power of two >= the largest M seen at (T, B)
  std::vector<int64_t> buckets;  // capacities: {T} when one graph suffices (fill >= 97%), else
                                 // the 50% and 90% quantiles of L rounded up to 128, then T
  std::string reason;
};

// One piece of advice per T of `stats` (which holds every (T, B) measured).
std::vector<PackingAdvice> advise_packing(const std::vector<PackingStats>& stats);

}  // namespace eagle::data
