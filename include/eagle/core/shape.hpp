// Shapes and strides, and the checked arithmetic that turns them into element counts, byte sizes
// and byte extents. Every layer that turns a caller's shape into a count or an allocation goes
// through these checks, so a hostile shape is refused with InvalidArgument instead of wrapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "eagle/core/dtype.hpp"

namespace eagle {

using Shape = std::vector<int64_t>;

// Row-major strides (in elements) of `shape`. Only for shapes checked_numel accepts.
Shape contiguous_strides(const Shape& shape);
// The same into `out` (one entry per dim), for callers that must not allocate.
void contiguous_strides(std::span<const int64_t> shape, std::span<int64_t> out);
// "[2,3]": how shapes appear in messages.
std::string shape_str(const Shape& shape);

// The number of elements of `shape`. Throws InvalidArgument whose message starts with `who` when
// a dim is negative or the product does not fit in int64 (a dim of size 0 makes it 0, whatever
// the other dims are).
int64_t checked_numel(std::span<const int64_t> shape, std::string_view who);
inline int64_t checked_numel(const Shape& shape, std::string_view who) {
  return checked_numel(std::span<const int64_t>(shape), who);
}

// The bytes a dense array of `shape` and `dtype` takes. Throws InvalidArgument naming `who` as
// checked_numel does, and when the byte count does not fit in int64 (so it fits in size_t and in
// any byte offset eagle computes).
std::size_t checked_nbytes(std::span<const int64_t> shape, DType dtype, std::string_view who);
inline std::size_t checked_nbytes(const Shape& shape, DType dtype, std::string_view who) {
  return checked_nbytes(std::span<const int64_t>(shape), dtype, who);
}

// The bytes a strided view can touch, relative to its first element: [lo, hi), lo <= 0 < hi when
// it holds elements ({0, 0} when it holds none). Strides are in elements and may be negative.
struct ByteExtent {
  int64_t lo = 0;
  int64_t hi = 0;
};
// Throws InvalidArgument naming `who` when a dim is negative, strides has another length than
// shape, or an offset does not fit in int64.
// (The span forms check a DLPack tensor's own arrays without copying them.)
ByteExtent checked_byte_extent(std::span<const int64_t> shape, std::span<const int64_t> strides,
                               DType dtype, std::string_view who);
inline ByteExtent checked_byte_extent(const Shape& shape, const Shape& strides, DType dtype,
                                      std::string_view who) {
  return checked_byte_extent(std::span<const int64_t>(shape), std::span<const int64_t>(strides),
                             dtype, who);
}

// True unless the layout provably gives every element its own address: sorted by |stride|, each
// dim of size > 1 must step past everything the smaller strides reach (a stride 0 on such a dim,
// or strides that interleave, count as overlapping). An output may not overlap itself: two
// elements written to one address lose one of them. No allocation, no throw.
bool may_overlap(const int64_t* shape, const int64_t* strides, int ndim) noexcept;
bool may_overlap(const Shape& shape, const Shape& strides) noexcept;

}  // namespace eagle
