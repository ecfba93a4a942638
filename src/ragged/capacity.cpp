#include "eagle/ragged/capacity.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "eagle/core/error.hpp"

namespace eagle::ragged {

namespace {
void need(bool ok, const char* who, const std::string& rule) {
  if (!ok) throw InvalidArgument(std::string(who) + ": " + rule);
}
}  // namespace

int64_t max_sequences(int64_t tokens, int64_t slots) {
  need(tokens >= 0, "max_sequences", "tokens (T) must be >= 0, got " + std::to_string(tokens));
  need(slots >= 0, "max_sequences", "slots (N) must be >= 0, got " + std::to_string(slots));
  return std::min(tokens, slots);
}

int64_t chunk_capacity(int64_t tokens, int64_t slots, int64_t chunk) {
  need(tokens >= 0, "chunk_capacity", "tokens (T) must be >= 0, got " + std::to_string(tokens));
  need(slots >= 0, "chunk_capacity", "slots (N) must be >= 0, got " + std::to_string(slots));
  need(chunk >= 1, "chunk_capacity", "chunk (C) must be >= 1, got " + std::to_string(chunk));
  // Each non-empty sequence of len tokens has ceil(len / C) = 1 + floor((len - 1) / C) chunks;
  // summed, at most M + floor((L - M) / C), which grows with M and L.
  const int64_t m = std::min(tokens, slots);
  return m == 0 ? 0 : m + (tokens - m) / chunk;  // no slot (or no token) holds no chunk
}

std::vector<int64_t> seqlen_buckets(int64_t tokens, int64_t smallest) {
  need(tokens >= 1, "seqlen_buckets", "tokens (T) must be >= 1, got " + std::to_string(tokens));
  need(smallest >= 1, "seqlen_buckets",
       "smallest (S0) must be >= 1, got " + std::to_string(smallest));
  std::vector<int64_t> bounds = {first_seqlen_bound(tokens, smallest)};
  while (bounds.back() < tokens) bounds.push_back(next_seqlen_bound(bounds.back(), tokens));
  return bounds;
}

}  // namespace eagle::ragged
