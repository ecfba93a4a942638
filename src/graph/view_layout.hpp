// Which bytes of one buffer a view (NodeArgInfo) touches, finely enough to tell column slices of
// one array apart: q, k and v slices of a [T, 3 D] array each span nearly the whole array, yet
// share no byte.
#pragma once

#include <cstdint>
#include <vector>

#include "eagle/graph/recording.hpp"

namespace eagle::detail {

// A view's bytes lie in blocks of `run` bytes every `period` bytes from its byte_offset (its
// contiguous innermost dims make a block; every outer stride is a multiple of the period).
// period 0: one block, [byte_offset, byte_offset + bytes). run < 0: not known that way.
struct ViewLayout {
  int64_t run = -1, period = 0;
};
ViewLayout view_layout(const NodeArgInfo& v);

// Whether views at byte offsets a0 and b0 (spans a_bytes, b_bytes; layouts la, lb) of one buffer
// share no byte: apart as byte ranges, or blocks of one period that keep out of each other's way.
// False when unsure.
bool views_apart(int64_t a0, int64_t a_bytes, ViewLayout la, int64_t b0, int64_t b_bytes,
                 ViewLayout lb);
inline bool views_apart(const NodeArgInfo& a, const NodeArgInfo& b) {
  return views_apart(a.byte_offset, a.bytes, view_layout(a), b.byte_offset, b.bytes,
                     view_layout(b));
}

// Whether `views` of one buffer of `buffer_bytes` bytes cover every byte of it exactly once: each
// view inside the buffer and no element of it aliasing another, the views pairwise apart, their
// elements' bytes summing to the buffer's (q, k and v column slices of a packed [T, 3 D] array
// do). False when unsure, as views_apart.
bool views_tile(const std::vector<NodeArgInfo>& views, int64_t buffer_bytes);

}  // namespace eagle::detail
