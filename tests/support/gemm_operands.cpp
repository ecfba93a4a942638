#include "gemm_operands.hpp"

#include "random.hpp"

namespace eagle::test {

using op::Dims;

Dims concat(Dims a, const Dims& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Dims row_major(const Dims& d) {
  Dims s(d.size(), 1);
  for (std::size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

GemmOperand make_operand(const Dims& batch, int64_t rows, int64_t cols, bool col_major) {
  GemmOperand o;
  o.dims = concat(batch, {rows, cols});
  int64_t slices = 1;
  for (int64_t d : batch) slices *= d;
  o.logical = random_values(static_cast<std::size_t>(slices * rows * cols));
  if (!col_major) {
    o.strides = row_major(o.dims);
    o.stored = o.logical;
    return o;
  }
  // Stored as [batch..., cols, rows] row-major: element (r, c) at c * rows + r.
  const Dims store = row_major(concat(batch, {cols, rows}));
  o.strides = concat(Dims(store.begin(), store.end() - 2), {1, rows});
  o.stored.resize(o.logical.size());
  for (int64_t s = 0; s < slices; ++s)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        o.stored[static_cast<std::size_t>(s * rows * cols + c * rows + r)] =
            o.logical[static_cast<std::size_t>(s * rows * cols + r * cols + c)];
  return o;
}

}  // namespace eagle::test
