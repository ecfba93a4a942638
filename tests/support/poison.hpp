// Poison: what a buffer holds before a kernel writes it, so unwritten elements show. NaN for
// floats (and NaN never passes a comparison), a large sentinel for integers, the byte 0xAB for
// u8 and bool.
#pragma once

#include <cstdint>

#include "eagle/eagle.hpp"
#include "random.hpp"

namespace eagle::test {

// The poison of `dtype` as a double: NaN, -123456789 (i64, i32), 3735928559 (u32), 0xAB (u8;
// bool holds the byte 0xAB, which reads as true).
double poison_value(DType dtype);
// Whether `v`, read back from an array of `dtype`, is that dtype's poison.
bool is_poison(double v, DType dtype);

// Fills an array (any dtype, any device, contiguous) with poison.
void poison(const Array& a);
// A new contiguous array of `shape` on `device`, poisoned.
Array poisoned(const Shape& shape, DType dtype, Device device = Device::cpu());

// Poisons the padding rows (along dim 0) of a ragged [rows, ...] buffer: every row outside the
// sequences of `rows`. A kernel that reads padding then produces NaN (floats) or a sentinel.
void poison_padding(const Array& a, const RaggedRows& rows);

}  // namespace eagle::test
