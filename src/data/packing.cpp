#include "eagle/data/packing.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "eagle/core/error.hpp"

namespace eagle::data {

namespace {

void check_capacity(const char* where, BatchCapacity c) {
  if (c.tokens < 1 || c.slots < 1)
    throw InvalidArgument(std::string(where) + ": capacity needs T >= 1 and N >= 1, got T = " +
                          std::to_string(c.tokens) + ", N = " + std::to_string(c.slots));
  if (c.tokens > INT32_MAX)
    throw InvalidArgument(std::string(where) + ": T = " + std::to_string(c.tokens) +
                          " does not fit cu_seqlens' i32 entries");
}

}  // namespace

std::vector<std::size_t> select_candidates(const std::deque<int64_t>& candidates,
                                           BatchCapacity capacity) {
  check_capacity("select_candidates", capacity);
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i] < 1 || candidates[i] > capacity.tokens)
      throw InvalidArgument("select_candidates: candidate " + std::to_string(i) + " has length " +
                            std::to_string(candidates[i]) +
                            ", outside [1, T = " + std::to_string(capacity.tokens) + "]");
  std::vector<std::size_t> taken;
  if (candidates.empty()) return taken;
  taken.push_back(0);  // the oldest first: nothing waits forever
  int64_t left = capacity.tokens - candidates[0];
  std::vector<std::size_t> order(candidates.size() - 1);
  std::iota(order.begin(), order.end(), std::size_t{1});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return candidates[a] > candidates[b]; });
  for (std::size_t i : order) {
    if (static_cast<int64_t>(taken.size()) >= capacity.slots || left == 0) break;
    if (candidates[i] <= left) {
      taken.push_back(i);
      left -= candidates[i];
    }
  }
  return taken;
}

PackedBatch pack_batch(const std::vector<const Segment*>& segments, BatchCapacity capacity) {
  check_capacity("pack_batch", capacity);
  if (static_cast<int64_t>(segments.size()) > capacity.slots)
    throw InvalidArgument("pack_batch: " + std::to_string(segments.size()) +
                          " sequences exceed N = " + std::to_string(capacity.slots));
  const auto t = static_cast<std::size_t>(capacity.tokens);
  PackedBatch b;
  b.capacity = capacity;
  b.input_ids.assign(t, 0);
  b.labels.assign(t, kIgnoreLabel);
  b.loss_mask.assign(t, 0.0f);
  b.cu_seqlens.assign(static_cast<std::size_t>(capacity.slots + 1), 0);
  std::size_t row = 0;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    const std::vector<int32_t>& tokens = segments[s]->tokens;
    if (tokens.empty())
      throw InvalidArgument("pack_batch: segment " + std::to_string(s) + " ('" +
                            segments[s]->source + "') is empty");
    if (tokens.size() > t - row)
      throw InvalidArgument("pack_batch: the segments hold more than T = " +
                            std::to_string(capacity.tokens) + " tokens");
    const std::size_t n = tokens.size(), response = n / 2;
    for (std::size_t i = 0; i < n; ++i) {
      b.input_ids[row + i] = tokens[i];
      if (i + 1 < n) {
        b.labels[row + i] = tokens[i + 1];
        b.loss_mask[row + i] = i >= response ? 1.0f : 0.0f;
      }
    }
    row += n;
    b.cu_seqlens[s + 1] = static_cast<int32_t>(row);
    b.max_seqlen = std::max(b.max_seqlen, static_cast<int64_t>(n));
    b.sources.push_back(segments[s]->source);
  }
  for (std::size_t s = segments.size() + 1; s < b.cu_seqlens.size(); ++s)
    b.cu_seqlens[s] = static_cast<int32_t>(row);
  b.active_tokens = static_cast<int64_t>(row);
  b.active_sequences = static_cast<int64_t>(segments.size());
  return b;
}

PackedBatch with_capacity(PackedBatch batch, int64_t tokens) {
  if (tokens < batch.capacity.tokens)
    throw InvalidArgument("with_capacity: tokens = " + std::to_string(tokens) +
                          " is below the batch's T = " + std::to_string(batch.capacity.tokens));
  const auto t = static_cast<std::size_t>(tokens);
  batch.input_ids.resize(t, 0);
  batch.labels.resize(t, kIgnoreLabel);
  batch.loss_mask.resize(t, 0.0f);
  batch.capacity.tokens = tokens;
  return batch;
}

PackedLoader::PackedLoader(Source next, BatchCapacity capacity, int64_t lookahead)
    : next_(std::move(next)), capacity_(capacity) {
  check_capacity("PackedLoader", capacity);
  if (lookahead < 1)
    throw InvalidArgument("PackedLoader: lookahead (the candidate buffer B) must be >= 1, got " +
                          std::to_string(lookahead));
  if (!next_) throw InvalidArgument("PackedLoader: the source is empty (no function)");
  lookahead_ = static_cast<std::size_t>(lookahead);
}

void PackedLoader::refill() {
  while (!exhausted_ && buffer_.size() < lookahead_) {
    std::optional<Segment> s = next_();
    if (!s) {
      exhausted_ = true;
      break;
    }
    if (s->tokens.empty()) continue;  // nothing to train on
    if (static_cast<int64_t>(s->tokens.size()) > capacity_.tokens)
      throw InvalidArgument("PackedLoader: segment '" + s->source + "' has " +
                            std::to_string(s->tokens.size()) +
                            " tokens, more than T = " + std::to_string(capacity_.tokens) +
                            " (split documents at a segment cap <= T)");
    buffer_.push_back(std::move(*s));
  }
}

std::optional<PackedBatch> PackedLoader::next() {
  refill();
  if (buffer_.empty()) return std::nullopt;
  std::deque<int64_t> lengths;
  for (const Segment& s : buffer_) lengths.push_back(static_cast<int64_t>(s.tokens.size()));
  const std::vector<std::size_t> chosen = select_candidates(lengths, capacity_);
  std::vector<const Segment*> segments;
  for (std::size_t i : chosen) segments.push_back(&buffer_[i]);
  PackedBatch batch = pack_batch(segments, capacity_);
  remove_taken(buffer_, chosen);
  return batch;
}

PackedLoader::Source cycle_segments(const std::vector<Segment>* segments, std::size_t offset) {
  if (!segments || segments->empty())
    throw InvalidArgument("cycle_segments: no segments to cycle over");
  return [segments, i = offset % segments->size()]() mutable -> std::optional<Segment> {
    const Segment& s = (*segments)[i];
    i = (i + 1) % segments->size();
    return s;
  };
}

}  // namespace eagle::data
