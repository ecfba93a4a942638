// Capacity bounds of a ragged (packed, THD) batch: a graph captured once for T token rows in N
// sequence slots serves any batch of L <= T active tokens in M <= N sequences, so its kernels are
// sized by what the worst such batch needs, never by a max_seqlen.
#pragma once

#include <cstdint>
#include <vector>

#include "eagle/core/hd.hpp"

namespace eagle::ragged {

// The most non-empty sequences a batch of at most T tokens in N slots holds: min(T, N).
int64_t max_sequences(int64_t tokens, int64_t slots);

// G_cap(T, N, C): the most chunks of C tokens any such batch is cut into, each sequence on its
// own (ceil(len / C) chunks a sequence): M_max + floor((T - M_max) / C) with M_max = min(T, N)
// (0 when M_max is 0).
// Reached by M_max - 1 sequences of one token and one of T - M_max + 1. A flat schedule launches
// this many tasks; those past the batch's real chunk count return at once.
// Throws InvalidArgument naming the argument when tokens < 0, slots < 0 or chunk < 1.
int64_t chunk_capacity(int64_t tokens, int64_t slots, int64_t chunk);

// The per-sequence bounds a device switch over a batch's longest sequence picks from (for
// engines that do size by a max_seqlen, such as cuDNN's attention): min(S0 * 2^i, T) for
// i = 0, 1, ... up to the first that reaches T. seqlen_bucket (eagle/ragged/kernels.hpp) writes
// the index of the first bound the batch fits. Throws InvalidArgument naming the argument when
// tokens < 1 or smallest < 1.
std::vector<int64_t> seqlen_buckets(int64_t tokens, int64_t smallest);

// seqlen_buckets' rule, in host and device code (the seqlen_bucket kernel walks it too): the
// first bound, min(S0, T), and the one after `bound`, min(2 * bound, T).
EAGLE_HD int64_t first_seqlen_bound(int64_t tokens, int64_t smallest) {
  return smallest < tokens ? smallest : tokens;
}
EAGLE_HD int64_t next_seqlen_bound(int64_t bound, int64_t tokens) {
  return bound * 2 < tokens ? bound * 2 : tokens;
}

}  // namespace eagle::ragged
