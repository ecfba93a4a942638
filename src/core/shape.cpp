#include "eagle/core/shape.hpp"

#include <limits>
#include <string>

#include "eagle/core/error.hpp"

namespace eagle {

int64_t checked_numel(const Shape& shape, std::string_view who) {
  int64_t n = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0)
      throw InvalidArgument(std::string(who) + ": shape " + shape_str(shape) +
                            " has a negative size in dim " + std::to_string(i));
    if (shape[i] != 0 && n > std::numeric_limits<int64_t>::max() / shape[i])
      throw InvalidArgument(std::string(who) + ": shape " + shape_str(shape) +
                            " holds more elements than fit in int64");
    n *= shape[i];
  }
  return n;
}

std::size_t checked_nbytes(const Shape& shape, DType dtype, std::string_view who) {
  const int64_t n = checked_numel(shape, who);
  const auto size = static_cast<int64_t>(itemsize(dtype));
  if (n > std::numeric_limits<int64_t>::max() / size)
    throw InvalidArgument(std::string(who) + ": shape " + shape_str(shape) + " of " +
                          std::string(dtype_name(dtype)) + " holds more bytes than fit in int64");
  return static_cast<std::size_t>(n * size);
}

}  // namespace eagle
