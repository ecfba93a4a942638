// The float64 gradient oracle: central finite differences of a scalar loss.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "eagle/eagle.hpp"

namespace eagle::test::oracle {

// (loss(x + step) - loss(x - step)) / (2 step) for every element of x; each element is changed
// in place while loss() runs, then restored.
std::vector<double> central_difference(double* x, std::size_t n,
                                       const std::function<double()>& loss, double step = 1e-6);
inline std::vector<double> central_difference(std::vector<double>& x,
                                              const std::function<double()>& loss,
                                              double step = 1e-6) {
  return central_difference(x.data(), x.size(), loss, step);
}
// Of a contiguous f64 array on the CPU (what an executed plan reads through its pack).
std::vector<double> central_difference(const Array& x, const std::function<double()>& loss,
                                       double step = 1e-6);

}  // namespace eagle::test::oracle
