#include "dense.hpp"

#include <stdexcept>

namespace eagle::test {

Dense make_dense(Dims dims, std::vector<double> values) {
  Dense x(std::move(dims));
  if (x.data.size() != values.size())
    throw std::invalid_argument("make_dense: " + std::to_string(values.size()) + " values for " +
                                std::to_string(x.data.size()) + " elements");
  x.data = std::move(values);
  return x;
}

Dense random_dense(Dims dims, double lo, double hi) {
  Dense x(std::move(dims));
  x.data = random_values(x.data.size(), lo, hi);
  return x;
}

Dense random_dense_signed(Dims dims, double min_abs, double max_abs) {
  Dense x(std::move(dims));
  x.data = random_signed(x.data.size(), min_abs, max_abs);
  return x;
}

Dense to_dense(const Array& a) {
  return make_dense(Dims(a.shape().begin(), a.shape().end()), a.to_vector<double>());
}

Dense dense_rows(const Dense& x, int64_t begin, int64_t end) {
  const int64_t row = x.dims.empty() || x.dims[0] == 0 ? 0 : x.numel() / x.dims[0];
  Dims dims = x.dims;
  dims[0] = end - begin;
  return make_dense(dims,
                    std::vector<double>(x.data.begin() + begin * row, x.data.begin() + end * row));
}

void expect_all_near(const Dense& got, const Dense& want, double tol, const std::string& what) {
  ASSERT_EQ(got.dims, want.dims) << what;
  expect_all_near(got.data, want.data, tol, what);
}

}  // namespace eagle::test
