#include "random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <stdexcept>

namespace eagle::test {

namespace {

// splitmix64: spreads nearby inputs (seed, seed + 1) over unrelated streams.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// FNV-1a: a stable hash of a name (std::hash may differ between library versions).
uint64_t hash_name(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

Rng seeded(uint64_t seed, std::string_view name) {
  const uint64_t s = mix(seed ^ mix(hash_name(name)));
  std::seed_seq seq{static_cast<uint32_t>(s), static_cast<uint32_t>(s >> 32)};
  return Rng(seq);
}

uint64_t base_seed() {
  static const uint64_t seed = [] {
    try {
      if (auto s = seed_from_environment()) return *s;
    } catch (const std::invalid_argument& e) {
      // A typo must not silently turn into a fresh seed.
      std::cerr << e.what() << "\n";
      std::abort();
    }
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }();
  return seed;
}

// The state the listener keeps current: the iteration and the running test's name.
struct State {
  std::mutex mutex;
  int iteration = 0;
  std::string test;  // "Suite.Name" of the running test, "" outside tests
  Rng rng = seeded(base_seed(), "");
};
State& state() {
  static State s;
  return s;
}

std::string full_name(const ::testing::TestInfo& info) {
  return std::string(info.test_suite_name()) + "." + info.name();
}

// Restarts the stream at every test and prints the seed after a failed one.
class SeedListener : public ::testing::EmptyTestEventListener {
  void OnTestIterationStart(const ::testing::UnitTest&, int iteration) override {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().iteration = iteration;
  }
  void OnTestStart(const ::testing::TestInfo& info) override {
    const std::string name = full_name(info);
    const uint64_t s = seed();
    std::lock_guard<std::mutex> lock(state().mutex);
    state().test = name;
    state().rng = seeded(s, name);
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::cout << reproduce_line() << " (--gtest_filter=" << full_name(info) << ")" << std::endl;
    std::lock_guard<std::mutex> lock(state().mutex);
    state().test.clear();
  }
};

// Registered before main (gtest_main runs the tests); gtest owns and deletes the listener.
const bool kRegistered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new SeedListener);
  return true;
}();

double draw_nonzero(Rng& rng, double lo, double hi) {
  if (!(lo < hi)) return lo;  // an empty range: its one value, zero or not
  std::uniform_real_distribution<double> dist(lo, hi);
  for (;;) {
    const double x = dist(rng);
    if (x != 0.0) return x;
  }
}

// Whether x, stored as `dtype`, reads back as zero.
bool rounds_to_zero(double x, DType dtype) {
  switch (dtype) {
    case DType::f32:
      return static_cast<float>(x) == 0.0f;
    case DType::f16:
      return static_cast<float>(half(static_cast<float>(x))) == 0.0f;
    case DType::bf16:
      return static_cast<float>(bfloat16(static_cast<float>(x))) == 0.0f;
    default:
      return x == 0.0;
  }
}

}  // namespace

std::optional<uint64_t> parse_seed(std::string_view text) {
  if (text.empty()) return std::nullopt;
  const std::string s(text);
  if (s.find_first_of("-+ \t") != std::string::npos) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 0);
  if (errno != 0 || end != s.c_str() + s.size()) return std::nullopt;
  return static_cast<uint64_t>(v);
}

std::optional<uint64_t> seed_from_environment() {
  const char* text = std::getenv(kSeedVariable);
  if (!text) return std::nullopt;
  if (auto s = parse_seed(text)) return s;
  throw std::invalid_argument(std::string(kSeedVariable) + "='" + text +
                              "' is not a seed (an unsigned decimal or 0x-hex number)");
}

uint64_t seed() {
  const uint64_t base = base_seed();
  int iteration;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    iteration = state().iteration;
  }
  return iteration == 0 ? base : mix(base + static_cast<uint64_t>(iteration));
}

std::string reproduce_line() {
  return std::string(kSeedVariable) + "=" + std::to_string(seed()) + " reproduces this run";
}

Rng& rng() {
  return state().rng;
}

Rng stream(std::string_view name) {
  std::string test;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    test = state().test;
  }
  return seeded(seed(), test + "/" + std::string(name));
}

Rng stream(uint64_t seed, std::string_view name) {
  return seeded(seed, name);
}

std::vector<double> random_values(Rng& rng, std::size_t n, double lo, double hi) {
  std::vector<double> v(n);
  for (double& x : v) x = draw_nonzero(rng, lo, hi);
  return v;
}

std::vector<double> random_values(std::size_t n, double lo, double hi) {
  return random_values(rng(), n, lo, hi);
}

std::vector<double> random_signed(std::size_t n, double min_abs, double max_abs) {
  std::uniform_real_distribution<double> mag(min_abs, max_abs);
  std::bernoulli_distribution negative(0.5);
  std::vector<double> v(n);
  for (double& x : v) {
    x = mag(rng());
    if (negative(rng())) x = -x;
  }
  return v;
}

Array random_array(const Shape& shape, DType dtype, Device device, double lo, double hi) {
  auto v = random_values(static_cast<std::size_t>(numel(shape)), lo, hi);
  for (double& x : v) {
    if (is_floating(dtype) && lo < hi)
      while (rounds_to_zero(x, dtype)) x = draw_nonzero(rng(), lo, hi);
    if (dtype == DType::i64 || dtype == DType::i32) x = std::trunc(x * 100);
    if (dtype == DType::u32) x = std::trunc((x + 1) * 1000);
    if (dtype == DType::u8 || dtype == DType::boolean) x = x > 0 ? 1 : 0;
  }
  return from_doubles(v, shape, dtype, device);
}

std::vector<int64_t> random_ints(std::size_t n, int64_t lo, int64_t hi) {
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  std::vector<int64_t> v(n);
  for (int64_t& x : v) x = dist(rng());
  return v;
}

std::vector<int64_t> random_indices(std::size_t n, int64_t size) {
  return random_ints(n, 0, size - 1);
}

std::vector<uint8_t> random_bools(std::size_t n, double p) {
  std::bernoulli_distribution dist(p);
  std::vector<uint8_t> v(n);
  for (uint8_t& x : v) x = dist(rng()) ? 1 : 0;
  return v;
}

std::vector<int64_t> random_targets(std::size_t n, int64_t classes, int64_t ignore_index,
                                    double ignore_fraction) {
  std::vector<int64_t> v = random_indices(n, classes);
  std::bernoulli_distribution ignore(ignore_fraction);
  for (int64_t& x : v)
    if (ignore(rng())) x = ignore_index;
  return v;
}

std::vector<int64_t> random_cu_seqlens(int64_t batch, int64_t max_len, bool allow_empty) {
  const std::vector<int64_t> lens =
      random_ints(static_cast<std::size_t>(batch), allow_empty ? 0 : 1, max_len);
  const int64_t empty = allow_empty && batch >= 2 ? random_indices(1, batch)[0] : -1;
  std::vector<int64_t> cu = {0};
  for (int64_t b = 0; b < batch; ++b) cu.push_back(cu.back() + (b == empty ? 0 : lens[b]));
  return cu;
}

bool RaggedRows::is_padding(int64_t row) const {
  for (std::size_t b = 0; b < start.size(); ++b)
    if (row >= start[b] && row < start[b] + len[b]) return false;
  return true;
}

std::vector<int64_t> RaggedRows::offsets(int64_t row_elems) const {
  std::vector<int64_t> out;
  for (int64_t s : start) out.push_back(s * row_elems);
  out.push_back(rows * row_elems);
  return out;
}

RaggedRows rows_of(const std::vector<int64_t>& cu_seqlens) {
  RaggedRows r;
  for (std::size_t b = 0; b + 1 < cu_seqlens.size(); ++b) {
    r.start.push_back(cu_seqlens[b]);
    r.len.push_back(cu_seqlens[b + 1] - cu_seqlens[b]);
  }
  r.rows = cu_seqlens.empty() ? 0 : cu_seqlens.back();
  return r;
}

RaggedRows random_placement(const std::vector<int64_t>& lengths, int64_t max_gap) {
  RaggedRows r;
  std::vector<int64_t> gaps = random_ints(lengths.size() + 1, 0, max_gap);
  if (max_gap > 0 && std::all_of(gaps.begin(), gaps.end(), [](int64_t g) { return g == 0; }))
    gaps[random_indices(1, static_cast<int64_t>(gaps.size()))[0]] = 1;
  int64_t row = 0;
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    row += gaps[b];
    r.start.push_back(row);
    r.len.push_back(lengths[b]);
    row += lengths[b];
  }
  r.rows = row + gaps.back();
  return r;
}

}  // namespace eagle::test
