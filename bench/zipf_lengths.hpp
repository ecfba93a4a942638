// The varlen benchmarks' batch shapes, shared bit for bit with the torch peer
// (bench/peers/torch_varlen.py, whose zipf_lengths is eagle::data::zipf_lengths's twin): the
// peer writes `shape NAME c0 ... cN` into its table, so eagle_bench can check it timed the same
// batch. The generator itself is the library's (eagle/data/zipf.hpp).
#pragma once

#include <cstdint>

#include "eagle/data/zipf.hpp"

namespace eagle::bench {

using data::cu_seqlens;
using data::splitmix64;
using data::zipf_lengths;

// Seeds of the varlen benchmarks' zipf batches (the torch peer uses the same rules):
// the exact-shape cases (T tokens in N sequences) and the over-capture points (M active
// sequences of L active tokens in a graph of T rows).
inline uint64_t exact_seed(int64_t t, int64_t n) {
  return static_cast<uint64_t>(t * 1000 + n);
}
inline uint64_t overcapture_seed(int64_t t, int64_t m, int64_t l) {
  return static_cast<uint64_t>(t * 1000 + m * 10 + l % 997);
}

}  // namespace eagle::bench
