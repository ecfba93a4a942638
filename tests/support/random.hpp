// The one random source of the test suite.
//
// The process seed comes from EAGLE_TEST_SEED when it is set (decimal or 0x-hex), else from
// std::random_device, so every run sees fresh inputs. Each test draws from its own stream,
// seeded from (seed, the test's full name) when the test starts: a failing test reruns alone
// with the same inputs (`EAGLE_TEST_SEED=<n> eagle_tests --gtest_filter=<its name>`), whatever
// ran before it. After a failed test a listener prints "EAGLE_TEST_SEED=<n> reproduces this
// run". Under --gtest_repeat, iteration k > 0 runs under a seed derived from (seed, k), and that
// derived seed is the one printed.
//
// Floats drawn here are never zero by accident: an exact zero is drawn again, and random arrays
// redraw values that round to zero in their dtype.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "arrays.hpp"
#include "eagle/eagle.hpp"

namespace eagle::test {

using Rng = std::mt19937_64;

// The variable that sets the seed.
inline constexpr const char* kSeedVariable = "EAGLE_TEST_SEED";

// The seed of this run (of this --gtest_repeat iteration).
uint64_t seed();
// The seed a value of EAGLE_TEST_SEED names, or none when it is not an unsigned number.
std::optional<uint64_t> parse_seed(std::string_view text);
// The seed the environment asks for: EAGLE_TEST_SEED parsed, none when unset. Throws
// std::invalid_argument when it is set to something that is not a seed.
std::optional<uint64_t> seed_from_environment();
// What the failure listener prints.
std::string reproduce_line();

// The current test's stream (restarted from (seed, the test's name) when each test starts).
// Use it from the test's own thread.
Rng& rng();
// An independent stream: the same (seed, test, name) always gives the same values.
Rng stream(std::string_view name);
// A stream from an explicit seed and name, independent of the run's seed.
Rng stream(uint64_t seed, std::string_view name);

// n values uniform in [lo, hi), never exactly zero.
std::vector<double> random_values(std::size_t n, double lo = -1.0, double hi = 1.0);
std::vector<double> random_values(Rng& rng, std::size_t n, double lo = -1.0, double hi = 1.0);
// n values of random sign with magnitudes uniform in [min_abs, max_abs): bounded away from 0.
std::vector<double> random_signed(std::size_t n, double min_abs, double max_abs);

// A random array of `dtype` on `device`: floats in [lo, hi), none rounding to zero; integers
// 100x that, truncated; u32 in [0, 2000); u8 and bool 0 or 1.
Array random_array(const Shape& shape, DType dtype, Device device, double lo = -1.0,
                   double hi = 1.0);

// ---- integer, boolean and index data ----

// n integers uniform in [lo, hi] (both ends included).
std::vector<int64_t> random_ints(std::size_t n, int64_t lo, int64_t hi);
// n indices into a dimension of `size`: uniform in [0, size).
std::vector<int64_t> random_indices(std::size_t n, int64_t size);
// n booleans (0 or 1), each 1 with probability p.
std::vector<uint8_t> random_bools(std::size_t n, double p = 0.5);
// n class targets in [0, classes); each is `ignore_index` instead with probability
// `ignore_fraction` (a loss must skip those rows).
std::vector<int64_t> random_targets(std::size_t n, int64_t classes, int64_t ignore_index = -100,
                                    double ignore_fraction = 0.0);
// Cumulative sequence lengths [batch + 1] starting at 0, each length in [0, max_len] (in
// [1, max_len] unless `allow_empty`). With allow_empty and batch >= 2 one sequence is always
// empty, so the empty case is never left to chance.
std::vector<int64_t> random_cu_seqlens(int64_t batch, int64_t max_len, bool allow_empty = true);

// Where the sequences of a ragged [rows, ...] buffer sit: sequence b owns rows
// [start[b], start[b] + len[b]); rows outside every sequence are padding.
struct RaggedRows {
  std::vector<int64_t> start, len;
  int64_t rows = 0;  // the buffer's extent along dim 0
  bool is_padding(int64_t row) const;
  // start as element offsets (the ragged_offset operand): start * row_elems, then the end.
  std::vector<int64_t> offsets(int64_t row_elems) const;
};
// The gap-free packing of cu_seqlens.
RaggedRows rows_of(const std::vector<int64_t>& cu_seqlens);
// Sequences of the given lengths placed in order with 0..max_gap padding rows before each and
// after the last (at least one padding row somewhere when max_gap > 0).
RaggedRows random_placement(const std::vector<int64_t>& lengths, int64_t max_gap);

}  // namespace eagle::test
