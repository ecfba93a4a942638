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

// An integer (or boolean) tensor also carries its exact values in `ints`: float64 holds integers
// only up to 2^53, and integer ops must compute exactly (reference/math/pointwise.hpp). `data`
// then holds the same values rounded to double, for the routines that read numbers as reals.
struct Dense {
  Dims dims;
  std::vector<double> data;
  bool integer = false;       // the tensor holds integers: `ints` is exact, numel entries
  std::vector<int64_t> ints;  // empty unless `integer`

  Dense() = default;
  // A tensor of `dims` with every element `fill`.
  explicit Dense(Dims d, double fill = 0.0)
      : dims(std::move(d)), data(static_cast<std::size_t>(count(dims)), fill) {}
  // An integer tensor holding `values` (numel of dims entries).
  static Dense of_ints(Dims d, std::vector<int64_t> values) {
    Dense out;
    out.dims = std::move(d);
    out.integer = true;
    out.ints = std::move(values);
    out.data.assign(out.ints.begin(), out.ints.end());
    return out;
  }
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
};

}  // namespace eagle::reference
