#include "eagle/core/shape.hpp"

#include <limits>

#include "eagle/core/error.hpp"

namespace eagle {

namespace {

[[noreturn]] void refuse(std::string_view who, const std::string& rule) {
  throw InvalidArgument(std::string(who) + ": " + rule);
}

using Dims = std::span<const int64_t>;

std::string dims_str(Dims d) {
  return shape_str(Shape(d.begin(), d.end()));
}

void check_dims(Dims shape, std::string_view who) {
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < 0)
      refuse(who, "shape " + dims_str(shape) + " has negative size in dim " + std::to_string(i));
}

// |v| for the strides of a layout; INT64_MIN has no int64 magnitude and reaches past anything.
bool magnitude(int64_t v, int64_t& out) {
  if (v == std::numeric_limits<int64_t>::min()) return false;
  out = v < 0 ? -v : v;
  return true;
}

}  // namespace

void contiguous_strides(std::span<const int64_t> shape, std::span<int64_t> out) {
  int64_t step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    out[i] = step;
    // A later 0 dim makes the product wrap harmlessly in unsigned arithmetic; such strides are
    // never used to address an element.
    step = static_cast<int64_t>(static_cast<uint64_t>(step) * static_cast<uint64_t>(shape[i]));
  }
}

Shape contiguous_strides(const Shape& shape) {
  Shape s(shape.size());
  contiguous_strides(shape, s);
  return s;
}

std::string shape_str(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(shape[i]);
  }
  out += ']';
  return out;
}

int64_t checked_numel(Dims shape, std::string_view who) {
  check_dims(shape, who);
  for (int64_t d : shape)
    if (d == 0) return 0;  // an empty array, however large the other dims
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      refuse(who, "shape " + dims_str(shape) +
                      " holds more elements than fit in int64 (at most 9223372036854775807)");
  return n;
}

std::size_t checked_nbytes(Dims shape, DType dtype, std::string_view who) {
  const int64_t n = checked_numel(shape, who);
  int64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(itemsize(dtype)), &bytes))
    refuse(who, "shape " + dims_str(shape) + " of " + std::string(dtype_name(dtype)) + " takes " +
                    std::to_string(n) + " x " + std::to_string(itemsize(dtype)) +
                    " bytes, more than fit in int64");
  return static_cast<std::size_t>(bytes);
}

ByteExtent checked_byte_extent(Dims shape, Dims strides, DType dtype, std::string_view who) {
  if (strides.size() != shape.size())
    refuse(who, "strides " + dims_str(strides) + " must have one entry per dim of shape " +
                    dims_str(shape));
  if (checked_numel(shape, who) == 0) return {};
  const int64_t size = static_cast<int64_t>(itemsize(dtype));
  int64_t lo = 0, hi = 0;  // byte offsets of the lowest and highest element
  for (std::size_t i = 0; i < shape.size(); ++i) {
    int64_t reach = 0;
    const bool ok = !__builtin_mul_overflow(shape[i] - 1, strides[i], &reach) &&
                    !__builtin_mul_overflow(reach, size, &reach) &&
                    !__builtin_add_overflow(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi);
    if (!ok)
      refuse(who, "shape " + dims_str(shape) + " with strides " + dims_str(strides) + " of " +
                      std::string(dtype_name(dtype)) +
                      " reaches byte offsets that do not fit in int64");
  }
  if (__builtin_add_overflow(hi, size, &hi))
    refuse(who, "shape " + dims_str(shape) + " with strides " + dims_str(strides) +
                    " reaches byte offsets that do not fit in int64");
  return {lo, hi};
}

bool may_overlap(const int64_t* shape, const int64_t* strides, int ndim) noexcept {
  for (int i = 0; i < ndim; ++i)
    if (shape[i] == 0) return false;  // no element, no two elements
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] <= 1) continue;
    int64_t step = 0;
    if (!magnitude(strides[i], step)) return true;
    // What the dims ordered before this one (smaller |stride|, ties by position) reach.
    int64_t reach = 0;
    for (int j = 0; j < ndim; ++j) {
      if (j == i || shape[j] <= 1) continue;
      int64_t other = 0;
      if (!magnitude(strides[j], other)) continue;  // ordered after: it reaches past everything
      if (other > step || (other == step && j > i)) continue;
      int64_t r = 0;
      if (__builtin_mul_overflow(shape[j] - 1, other, &r) ||
          __builtin_add_overflow(reach, r, &reach))
        return true;
    }
    if (step <= reach) return true;
  }
  return false;
}

bool may_overlap(const Shape& shape, const Shape& strides) noexcept {
  if (shape.size() != strides.size()) return true;
  return may_overlap(shape.data(), strides.data(), static_cast<int>(shape.size()));
}

}  // namespace eagle
