// Synthetic ragged batches: the seed's zipf lengths (shared/seeds/ragged-cuda-graphs.txt,
// get_zipf_tokens) made deterministic across languages, and cu_seqlens with the unused tail.
// bench/peers/torch_varlen.py has zipf_lengths's twin, so a benchmark can time the same batch in
// torch.
//
// zipf_lengths(L, M, seed): M lengths >= 1 summing to L:
//   1. ranks = 1..M shuffled by Fisher-Yates (i = M-1 down to 1, j = next() % (i + 1), swap)
//      driven by splitmix64 seeded with `seed` (state += 0x9E3779B97F4A7C15 before each draw);
//   2. w[i] = pow(ranks[i], -1.2) in double; s = w[0] + w[1] + ... in index order;
//   3. scaled[i] = w[i] * ((L - M) / s); extra[i] = floor(scaled[i]);
//   4. the remainder L - M - sum(extra) goes +1 to the largest fractional parts
//      scaled[i] - extra[i], ties to the lower index;
//   5. lengths[i] = extra[i] + 1.
// Only integer ops, pow, floor, one division and products/sums in a fixed order: no FMA-able
// expression, so the result matches Python's math.pow / math.floor on the same libm.
#pragma once

#include <cstdint>
#include <vector>

namespace eagle::data {

// The next draw of a splitmix64 stream (Steele, Lea, Flood 2014), advancing `state`.
uint64_t splitmix64(uint64_t& state);

// M = n zipf(1.2) lengths >= 1 summing to total (1 <= n <= total); throws InvalidArgument
// otherwise.
std::vector<int64_t> zipf_lengths(int64_t total, int64_t n, uint64_t seed);

// cu_seqlens of `slots` sequence slots: 0, then the running sums of lengths, then the end
// repeated up to slots + 1 entries (the unused tail). Throws InvalidArgument when lengths
// has more than `slots` entries.
std::vector<int32_t> cu_seqlens(const std::vector<int64_t>& lengths, int64_t slots);

}  // namespace eagle::data
