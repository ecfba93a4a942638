#include "graph_gradients.hpp"

namespace eagle::test {

std::vector<double> graph_finite_difference(Graph& g, const std::string& param, const Array& at,
                                            std::size_t index) {
  const double h = 1e-6;
  const Device device = at.device();
  std::vector<double> x = at.to_vector<double>(), grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::vector<double> p = x, m = x;
    p[i] += h;
    m[i] -= h;
    g.bind(param, Array::from(p, at.shape(), device));
    const double fp = g()[index].to_vector<double>()[0];
    g.bind(param, Array::from(m, at.shape(), device));
    const double fm = g()[index].to_vector<double>()[0];
    grad[i] = (fp - fm) / (2 * h);
  }
  g.bind(param, at);
  return grad;
}

}  // namespace eagle::test
