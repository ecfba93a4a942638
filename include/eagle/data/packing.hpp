// Packing ragged sequences into fixed-capacity batches (shared/seeds/ragged-cuda-graphs.txt,
// "Show me the data!"): a batch holds at most T tokens in at most N sequences; the loader looks
// ahead into a buffer of at most B candidate segments and picks which of them go together.
//
// The policy (select_candidates): the oldest candidate always goes first (so no segment waits
// forever), then the others in decreasing length (ties: older first), each one that still fits,
// until N sequences are taken or none fits. M <= min(N, B) by construction.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "eagle/data/documents.hpp"

namespace eagle::data {

// The capacity of a batch: T token rows and N sequence slots (cu_seqlens has N + 1 entries).
struct BatchCapacity {
  int64_t tokens = 0;  // T
  int64_t slots = 0;   // N
};

// Indices into `candidates` (oldest first) of the segments one batch takes, in the order they
// are placed. Throws InvalidArgument when the capacity is not positive or a candidate is longer
// than T (no batch could ever hold it) or not positive.
std::vector<std::size_t> select_candidates(const std::deque<int64_t>& candidates,
                                           BatchCapacity capacity);

// Removes from `buffer` the entries at `taken` (what select_candidates chose), keeping the
// others in their order.
template <class T>
void remove_taken(std::deque<T>& buffer, std::vector<std::size_t> taken) {
  std::sort(taken.rbegin(), taken.rend());
  for (std::size_t i : taken) buffer.erase(buffer.begin() + static_cast<std::ptrdiff_t>(i));
}

// One packed batch, host side, at full capacity: what the training step copies into its static
// inputs. Rows past L are padding: input 0, label -100 (ignored), loss mask 0.
struct PackedBatch {
  BatchCapacity capacity;
  std::vector<int32_t> input_ids;    // [T]
  std::vector<int32_t> labels;       // [T] the next token of the same sequence, -100 at its end
  std::vector<float> loss_mask;      // [T] 1 on the second half of each sequence (the seed's
                                     // response half) where the label is not ignored, else 0
  std::vector<int32_t> cu_seqlens;   // [N + 1], the unused tail repeats L
  int64_t active_tokens = 0;         // L
  int64_t active_sequences = 0;      // M
  int64_t max_seqlen = 0;            // the longest sequence (what eagle's kernels never need)
  std::vector<std::string> sources;  // where each sequence came from
};

constexpr int32_t kIgnoreLabel = -100;

// Lays out the given segments (in order) as one batch of `capacity`. Throws InvalidArgument when
// they hold more than T tokens or more than N sequences, or a segment is empty.
PackedBatch pack_batch(const std::vector<const Segment*>& segments, BatchCapacity capacity);

// The same batch in a capacity of `tokens` >= its own T (N unchanged): the rows after the old T
// are padding as pack_batch lays it out (token 0, label ignored, mask 0). For a batch packed to
// a partial fill that a graph of a larger capacity then runs. Throws InvalidArgument when
// `tokens` is below the batch's T.
PackedBatch with_capacity(PackedBatch batch, int64_t tokens);

// The look-ahead loader: draws segments from `next` (std::nullopt: the source is exhausted)
// into a candidate buffer of at most `lookahead` (B) entries and packs one batch per call.
class PackedLoader {
 public:
  using Source = std::function<std::optional<Segment>()>;
  // Throws InvalidArgument when the capacity is not positive or lookahead < 1.
  PackedLoader(Source next, BatchCapacity capacity, int64_t lookahead);

  // The next batch, or std::nullopt once the source and the buffer are empty. A segment longer
  // than T throws InvalidArgument naming its source (split documents at a cap <= T).
  std::optional<PackedBatch> next();

  BatchCapacity capacity() const { return capacity_; }

 private:
  void refill();
  Source next_;
  BatchCapacity capacity_;
  std::size_t lookahead_;
  std::deque<Segment> buffer_;
  bool exhausted_ = false;
};

// A source cycling over `segments` forever (an epoch loop), starting at `offset`.
PackedLoader::Source cycle_segments(const std::vector<Segment>* segments, std::size_t offset = 0);

}  // namespace eagle::data
