#include "eagle/data/zipf.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "eagle/core/error.hpp"

namespace eagle::data {

uint64_t splitmix64(uint64_t& state) {
  state += 0x9E3779B97F4A7C15ull;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<int64_t> zipf_lengths(int64_t total, int64_t n, uint64_t seed) {
  if (n < 1 || total < n)
    throw InvalidArgument("zipf_lengths: need 1 <= n <= total, got n " + std::to_string(n) +
                          ", total " + std::to_string(total));
  const auto count = static_cast<std::size_t>(n);
  std::vector<int64_t> ranks(count);
  std::iota(ranks.begin(), ranks.end(), int64_t{1});
  uint64_t state = seed;
  for (std::size_t i = count - 1; i >= 1; --i) {
    const auto j = static_cast<std::size_t>(splitmix64(state) % (i + 1));
    std::swap(ranks[i], ranks[j]);
  }
  std::vector<double> w(count);
  double sum = 0;
  for (std::size_t i = 0; i < count; ++i) {
    w[i] = std::pow(static_cast<double>(ranks[i]), -1.2);
    sum += w[i];
  }
  const double factor = static_cast<double>(total - n) / sum;
  std::vector<int64_t> extra(count);
  std::vector<double> frac(count);
  int64_t used = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double scaled = w[i] * factor;
    const double whole = std::floor(scaled);
    extra[i] = static_cast<int64_t>(whole);
    frac[i] = scaled - whole;
    used += extra[i];
  }
  const int64_t remainder = total - n - used;
  if (remainder < 0 || remainder > n)
    throw std::logic_error("zipf_lengths: remainder " + std::to_string(remainder) +
                           " out of [0, n]");
  std::vector<std::size_t> order(count);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return frac[a] != frac[b] ? frac[a] > frac[b] : a < b;
  });
  for (int64_t r = 0; r < remainder; ++r) extra[order[static_cast<std::size_t>(r)]] += 1;
  for (int64_t& e : extra) e += 1;
  return extra;
}

std::vector<int32_t> cu_seqlens(const std::vector<int64_t>& lengths, int64_t slots) {
  if (static_cast<int64_t>(lengths.size()) > slots)
    throw InvalidArgument("cu_seqlens: " + std::to_string(lengths.size()) + " sequences in " +
                          std::to_string(slots) + " slots");
  std::vector<int32_t> cu(static_cast<std::size_t>(slots + 1));
  int64_t end = 0;
  cu[0] = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i)
    cu[i + 1] = static_cast<int32_t>(end += lengths[i]);
  for (std::size_t i = lengths.size() + 1; i < cu.size(); ++i) cu[i] = static_cast<int32_t>(end);
  return cu;
}

}  // namespace eagle::data
