// Shapes and the checked arithmetic that turns them into element counts and byte sizes.
#pragma once

#include <cstdint>
#include <string_view>

#include "eagle/core/array.hpp"

namespace eagle {

// The element count of `shape`; throws InvalidArgument naming `who` for a negative size or a
// count that does not fit in int64.
int64_t checked_numel(const Shape& shape, std::string_view who);
// The byte size of `shape` elements of `dtype`; throws InvalidArgument as checked_numel does, or
// when the bytes do not fit.
std::size_t checked_nbytes(const Shape& shape, DType dtype, std::string_view who);

}  // namespace eagle
