// Checks of eager kernel launches: a result against float64 values, and a fixture that runs a
// kernel with launch and launch_into (poisoned outputs) over awkward sizes and checks the inputs
// are left as they were.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace eagle::test {

inline std::vector<double> host(const Array& a) {
  return a.to_vector<double>();
}

// prefix followed by i ("a3"); spelled out because GCC 12 warns falsely on "literal" + string.
inline std::string indexed(const char* prefix, int i) {
  std::string s = prefix;
  s += std::to_string(i);
  return s;
}

// Element-by-element equality, reporting the count and the first difference (not 10^5 values).
inline void expect_exact(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i]) && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << bad << " elements differ; the first is " << first << ": got " << got[first]
                     << ", want " << want[first];
}

// Compares got with a float64 reference: exact for integers (or when `exact`); for floats each
// element within tolerance(dtype) * (1 + m) and the whole within tolerance(dtype) relative to
// the norm of m, where m is the magnitude the rounding is relative to: |want| by default, the
// terms' magnitudes for a sum that can cancel (axpy). NaN never passes.
inline void expect_matches(const Array& got, const std::vector<double>& want, DType dtype,
                           bool exact = false, const std::vector<double>* magnitude = nullptr) {
  const std::vector<double> g = host(got);
  ASSERT_EQ(g.size(), want.size());
  const double tol = exact ? 0.0 : tolerance(dtype);
  std::size_t bad = 0, first = 0;
  double err2 = 0, mag2 = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double m = magnitude ? (*magnitude)[i] : std::fabs(want[i]);
    const double e = std::fabs(g[i] - want[i]);
    const bool ok = tol == 0 ? g[i] == want[i] : e <= tol * (1 + m);
    if (!ok && bad++ == 0) first = i;
    err2 += e * e;
    mag2 += m * m;
  }
  EXPECT_EQ(bad, 0u) << bad << " elements differ; the first is " << first << ": got " << g[first]
                     << ", want " << want[first];
  if (tol == 0 || want.empty()) return;
  // f16 results below its smallest normal (2^-14) are rounded to an absolute step of 2^-24.
  const double floor = dtype == DType::f16 ? std::ldexp(1.0, -14) : 0.0;
  const double n = static_cast<double>(want.size());
  const double rel = err2 == 0 ? 0.0 : std::sqrt(err2) / (std::sqrt(mag2) + std::sqrt(n) * floor);
  EXPECT_LE(rel, tol) << "relative error of the whole";
}

class KernelCheck : public OnDeviceWithStream {
 protected:
  // Sizes that are not multiples of 256; 100003 is past the CPU team's parallel threshold, and
  // on a GPU a larger one also exceeds one pass of the grid (the grid-stride loop).
  std::vector<Shape> shapes() const {
    std::vector<Shape> s = {{100003}, {3, 7, 11}, {2, 3, 2, 3, 5}, {1}};
    if (device().is_cuda()) s.push_back({1048583});  // > 132 SMs * 16 blocks * 256 threads
    return s;
  }

  // Runs the kernel with launch (fresh outputs) and with launch_into (poisoned outputs) and
  // compares the one output with `want` (within tolerance(dtype), or exactly); the inputs must be
  // left as they were.
  void check(const Kernel& k, const std::vector<Array>& inputs, const std::vector<Scalar>& scalars,
             const Shape& shape, DType dtype, const std::vector<double>& want, bool exact = false,
             const std::vector<double>* magnitude = nullptr) {
    std::vector<std::vector<double>> before;
    for (const Array& a : inputs) before.push_back(host(a));
    {
      SCOPED_TRACE("launch");
      const std::vector<Array> outs = launch(k, inputs, scalars, stream(), team_);
      ASSERT_EQ(outs.size(), 1u);
      EXPECT_EQ(outs[0].shape(), shape);
      EXPECT_EQ(outs[0].dtype(), dtype);
      EXPECT_EQ(outs[0].device(), device());
      EXPECT_TRUE(outs[0].owning());
      stream().synchronize();
      expect_matches(outs[0], want, dtype, exact, magnitude);
    }
    {
      SCOPED_TRACE("launch_into");
      const Array out = Array::empty(shape, dtype, device());
      poison(out);
      launch_into(k, inputs, scalars, {out}, stream(), team_);
      stream().synchronize();
      expect_matches(out, want, dtype, exact, magnitude);
    }
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      SCOPED_TRACE(indexed("input ", static_cast<int>(i)));
      expect_exact(host(inputs[i]), before[i]);
    }
  }
};

}  // namespace eagle::test
