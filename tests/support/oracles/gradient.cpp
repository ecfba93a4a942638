#include "oracles/gradient.hpp"

#include <stdexcept>

namespace eagle::test::oracle {

std::vector<double> central_difference(double* x, std::size_t n,
                                       const std::function<double()>& loss, double step) {
  std::vector<double> grad(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double keep = x[i];
    x[i] = keep + step;
    const double up = loss();
    x[i] = keep - step;
    const double down = loss();
    x[i] = keep;
    grad[i] = (up - down) / (2 * step);
  }
  return grad;
}

std::vector<double> central_difference(const Array& x, const std::function<double()>& loss,
                                       double step) {
  if (x.dtype() != DType::f64 || !x.device().is_cpu() || !x.is_contiguous())
    throw std::invalid_argument("central_difference: needs a contiguous f64 CPU array, got " +
                                x.describe());
  return central_difference(static_cast<double*>(x.data()), static_cast<std::size_t>(x.numel()),
                            loss, step);
}

}  // namespace eagle::test::oracle
