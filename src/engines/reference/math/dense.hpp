// The one data form every reference routine reads and writes: a contiguous row-major float64
// tensor. The reference engine gathers each operand (any dtype, any strides) into one of these,
// calls a routine, and scatters the result into the caller's buffer in the caller's dtype.
#pragma once

#include <cstdint>
#include <vector>

namespace eagle::reference {

using Dims = std::vector<int64_t>;

inline int64_t count(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

struct Dense {
  Dims dims;
  std::vector<double> data;

  Dense() = default;
  // A tensor of `dims` with every element `fill`.
  explicit Dense(Dims d, double fill = 0.0)
      : dims(std::move(d)), data(static_cast<std::size_t>(count(dims)), fill) {}
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
};

}  // namespace eagle::reference
