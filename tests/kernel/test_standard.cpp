// Tests of the standard kernels: eager launches for every dtype each serves, against float64
// references computed here, and the call errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "eagle/eagle.hpp"
#include "kernel_check.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using test::expect_exact;
using test::expect_matches;
using test::expect_throw_with;
using test::from_doubles;
using test::host;
using test::indexed;

constexpr DType kElementwiseDTypes[] = {DType::f64,  DType::f32, DType::f16,
                                        DType::bf16, DType::i64, DType::i32};
constexpr DType kReduceDTypes[] = {DType::f64, DType::f32, DType::i64, DType::i32};

int64_t count(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string trace(const Kernel& k, DType d, const Shape& s) {
  return k.name() + " " + std::string(dtype_name(d)) + shape_str(s);
}

// A random condition: about half the elements true; u8 conditions use several nonzero values.
Array random_cond(const Shape& shape, DType dtype, Device device) {
  std::vector<double> v = test::random_values(static_cast<std::size_t>(count(shape)));
  for (double& x : v) x = x > 0 ? (dtype == DType::u8 ? 1 + std::floor(x * 254.99) : 1) : 0;
  return from_doubles(v, shape, dtype, device);
}

class Kernels : public test::KernelCheck {};
EAGLE_ON_EVERY_DEVICE(Kernels);

// ---------------------------------------------------------------------------------------------
// Every standard kernel, every dtype it serves

TEST_P(Kernels, Fill) {
  for (DType d : kElementwiseDTypes) {
    for (const Shape& s : shapes()) {
      SCOPED_TRACE(trace(kernels::fill(), d, s));
      const double value = is_floating(d) ? test::random_values(1, -4, 4)[0] : 7.0;
      const Scalar scalar = is_floating(d) ? Scalar(value) : Scalar(7);
      const Array out = Array::empty(s, d, device());
      test::poison(out);
      launch_into(kernels::fill(), {}, {scalar}, {out}, stream(), team_);
      stream().synchronize();
      expect_matches(out, std::vector<double>(static_cast<std::size_t>(count(s)), value), d);
    }
  }
}

TEST_P(Kernels, FillWritesExactlyRepresentableValuesExactly) {
  for (DType d : kElementwiseDTypes) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    const Array out = Array::empty({1001}, d, device());
    test::poison(out);
    launch_into(kernels::fill(), {}, {-3.0}, {out}, stream(), team_);
    stream().synchronize();
    EXPECT_EQ(host(out), std::vector<double>(1001, -3.0));
  }
}

TEST_P(Kernels, Copy) {
  for (DType d : kElementwiseDTypes) {
    for (const Shape& s : shapes()) {
      SCOPED_TRACE(trace(kernels::copy(), d, s));
      const Array x = test::random_array(s, d, device());
      check(kernels::copy(), {x}, {}, s, d, host(x), /*exact=*/true);
    }
  }
}

TEST_P(Kernels, Scale) {
  for (DType d : kElementwiseDTypes) {
    for (const Shape& s : shapes()) {
      SCOPED_TRACE(trace(kernels::scale(), d, s));
      // Integer kernels take an integral alpha (integer arithmetic).
      const double alpha = is_floating(d) ? test::random_values(1, -2, 2)[0] : -3.0;
      const Array x = test::random_array(s, d, device());
      std::vector<double> want = host(x);
      for (double& v : want) v *= alpha;
      check(kernels::scale(), {x}, {alpha}, s, d, want);
    }
  }
}

TEST_P(Kernels, Axpy) {
  for (DType d : kElementwiseDTypes) {
    for (const Shape& s : shapes()) {
      SCOPED_TRACE(trace(kernels::axpy(), d, s));
      const double alpha = is_floating(d) ? test::random_values(1, -2, 2)[0] : 5.0;
      const Array x = test::random_array(s, d, device());
      const Array y = test::random_array(s, d, device());
      const std::vector<double> hx = host(x), hy = host(y);
      std::vector<double> want(hx.size()), magnitude(hx.size());
      for (std::size_t i = 0; i < want.size(); ++i) {
        want[i] = alpha * hx[i] + hy[i];
        magnitude[i] = std::fabs(alpha * hx[i]) + std::fabs(hy[i]);  // the sum can cancel
      }
      check(kernels::axpy(), {x, y}, {alpha}, s, d, want, false, &magnitude);
    }
  }
}

TEST_P(Kernels, Add) {
  for (DType d : kElementwiseDTypes) {
    for (const Shape& s : shapes()) {
      SCOPED_TRACE(trace(kernels::add(), d, s));
      const Array a = test::random_array(s, d, device());
      const Array b = test::random_array(s, d, device());
      const std::vector<double> ha = host(a), hb = host(b);
      std::vector<double> want(ha.size());
      for (std::size_t i = 0; i < want.size(); ++i) want[i] = ha[i] + hb[i];
      check(kernels::add(), {a, b}, {}, s, d, want);
    }
  }
}

TEST_P(Kernels, Mul) {
  for (DType d : kElementwiseDTypes) {
    for (const Shape& s : shapes()) {
      SCOPED_TRACE(trace(kernels::mul(), d, s));
      const Array a = test::random_array(s, d, device());
      const Array b = test::random_array(s, d, device());
      const std::vector<double> ha = host(a), hb = host(b);
      std::vector<double> want(ha.size());
      for (std::size_t i = 0; i < want.size(); ++i) want[i] = ha[i] * hb[i];
      check(kernels::mul(), {a, b}, {}, s, d, want);
    }
  }
}

TEST_P(Kernels, Where) {
  for (DType cond_dtype : {DType::boolean, DType::u8}) {
    for (DType d : kElementwiseDTypes) {
      for (const Shape& s : shapes()) {
        SCOPED_TRACE(trace(kernels::where(), d, s) + " cond " +
                     std::string(dtype_name(cond_dtype)));
        const Array cond = random_cond(s, cond_dtype, device());
        const Array a = test::random_array(s, d, device());
        const Array b = test::random_array(s, d, device());
        const std::vector<double> hc = host(cond), ha = host(a), hb = host(b);
        std::vector<double> want(ha.size());
        for (std::size_t i = 0; i < want.size(); ++i) want[i] = hc[i] != 0 ? ha[i] : hb[i];
        // A selection does no arithmetic: every dtype is exact.
        check(kernels::where(), {cond, a, b}, {}, s, d, want, /*exact=*/true);
      }
    }
  }
}

TEST_P(Kernels, WhereTreatsEveryNonzeroByteAsTrue) {
  const Array cond = Array::from(std::vector<uint8_t>{0, 1, 2, 128, 255, 0}, {6}, device());
  const Array a = Array::from(std::vector<float>{1, 2, 3, 4, 5, 6}, {6}, device());
  const Array b = Array::from(std::vector<float>{-1, -2, -3, -4, -5, -6}, {6}, device());
  const auto outs = launch(kernels::where(), {cond, a, b}, {}, stream(), team_);
  stream().synchronize();
  EXPECT_EQ(outs[0].to_vector<float>(), (std::vector<float>{-1, 2, 3, 4, 5, -6}));
}

TEST_P(Kernels, Sum) {
  for (DType d : kReduceDTypes) {
    for (const Shape& s : shapes()) {
      SCOPED_TRACE(trace(kernels::sum(), d, s));
      const Array x = test::random_array(s, d, device());
      const std::vector<double> hx = host(x);
      long double total = 0, magnitude = 0;
      for (double v : hx) {
        total += v;
        magnitude += std::fabs(v);
      }
      const double n = static_cast<double>(hx.size());
      // Rounding grows with the number of terms; bound the error by the sum of magnitudes.
      const double rel = d == DType::f32   ? 1e-6 + 1e-10 * n
                         : d == DType::f64 ? 1e-14 + 1e-16 * n
                                           : 0;
      const double bound = rel * static_cast<double>(magnitude);
      for (int way = 0; way < 2; ++way) {
        SCOPED_TRACE(way == 0 ? "launch" : "launch_into");
        Array out;
        if (way == 0) {
          const auto outs = launch(kernels::sum(), {x}, {}, stream(), team_);
          ASSERT_EQ(outs.size(), 1u);
          out = outs[0];
        } else {
          out = Array::empty({1}, d, device());
          test::poison(out);
          launch_into(kernels::sum(), {x}, {}, {out}, stream(), team_);
        }
        stream().synchronize();
        EXPECT_EQ(out.shape(), Shape{1});
        EXPECT_EQ(out.dtype(), d);
        const double got = host(out)[0];
        if (is_floating(d)) {
          EXPECT_LE(std::fabs(got - static_cast<double>(total)), bound)
              << "got " << got << ", want " << static_cast<double>(total);
        } else {
          EXPECT_EQ(got, static_cast<double>(total));
        }
      }
      expect_exact(host(x), hx);
    }
  }
}

TEST_P(Kernels, Max) {
  for (DType d : kReduceDTypes) {
    for (const Shape& s : shapes()) {
      SCOPED_TRACE(trace(kernels::max(), d, s));
      const Array x = test::random_array(s, d, device());
      const std::vector<double> hx = host(x);
      const double want = *std::max_element(hx.begin(), hx.end());
      check(kernels::max(), {x}, {}, {1}, d, {want}, /*exact=*/true);
    }
  }
}

TEST_P(Kernels, MaxFindsTheMaximumAnywhere) {
  // All values negative (so an identity of 0 would show), the maximum at the ends and in between.
  const int64_t n = 100003;
  for (int64_t at : {int64_t{0}, n / 2 + 1, n - 1}) {
    SCOPED_TRACE(at);
    std::vector<double> v(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = -1000.0 - static_cast<double>(i % 977);
    v[at] = -7.0;
    for (DType d : kReduceDTypes) {
      const auto outs =
          launch(kernels::max(), {from_doubles(v, {n}, d, device())}, {}, stream(), team_);
      stream().synchronize();
      EXPECT_EQ(host(outs[0]), std::vector<double>{-7.0}) << dtype_name(d);
    }
  }
}

TEST_P(Kernels, SumOfIntegersIsExact) {
  const int64_t n = 200001;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * 7919) % 2001 - 1000);
  const double want = std::accumulate(v.begin(), v.end(), 0.0);
  for (DType d : {DType::i64, DType::i32}) {
    const auto outs =
        launch(kernels::sum(), {from_doubles(v, {n}, d, device())}, {}, stream(), team_);
    stream().synchronize();
    EXPECT_EQ(host(outs[0]), std::vector<double>{want}) << dtype_name(d);
  }
  // Large i64 values that a double accumulator would round.
  const std::vector<int64_t> big = {int64_t{1} << 60, 1, 1, -(int64_t{1} << 60), 3};
  const auto outs = launch(kernels::sum(), {Array::from(big, {5}, device())}, {}, stream(), team_);
  stream().synchronize();
  EXPECT_EQ(outs[0].to_vector<int64_t>(), std::vector<int64_t>{5});
}

TEST_P(Kernels, EmptyInputs) {
  for (DType d : kElementwiseDTypes) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    const Array a = Array::empty({0}, d, device());
    const auto outs = launch(kernels::add(), {a, a}, {}, stream(), team_);
    stream().synchronize();
    EXPECT_EQ(outs[0].shape(), Shape{0});
    EXPECT_EQ(outs[0].numel(), 0);
  }
  for (DType d : kReduceDTypes) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    const Array x = Array::empty({0}, d, device());
    const Array out = Array::empty({1}, d, device());
    test::poison(out);
    launch_into(kernels::sum(), {x}, {}, {out}, stream(), team_);
    stream().synchronize();
    EXPECT_EQ(host(out), std::vector<double>{0.0});
  }
}

// The identity of max: -inf for floats, the lowest value for integers.
template <class T>
T max_identity() {
  return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                              : std::numeric_limits<T>::lowest();
}

template <class T>
void expect_max_identity(const Stream& stream, const ThreadTeam& team) {
  SCOPED_TRACE(std::string(dtype_name(dtype_of<T>)));
  // An empty input gives the identity, the same on every device.
  const Array x = Array::empty({0}, dtype_of<T>, stream.device());
  const Array out = Array::empty({1}, dtype_of<T>, stream.device());
  test::poison(out);
  launch_into(kernels::max(), {x}, {}, {out}, stream, team);
  stream.synchronize();
  EXPECT_EQ(out.to_vector<T>(), std::vector<T>{max_identity<T>()});
  // An input of only the identity (all -inf, or all lowest) gives it back, in both paths.
  for (int64_t n : {int64_t{5}, int64_t{200003}}) {
    const Array all = Array::from(std::vector<T>(static_cast<std::size_t>(n), max_identity<T>()),
                                  {n}, stream.device());
    const auto outs = launch(kernels::max(), {all}, {}, stream, team);
    stream.synchronize();
    EXPECT_EQ(outs[0].to_vector<T>(), std::vector<T>{max_identity<T>()}) << n;
  }
}

TEST_P(Kernels, MaxIdentity) {
  expect_max_identity<double>(stream(), team_);
  expect_max_identity<float>(stream(), team_);
  expect_max_identity<int64_t>(stream(), team_);
  expect_max_identity<int32_t>(stream(), team_);
}

TEST_P(Kernels, InPlaceOutputAliasingAnInput) {
  // Elementwise kernels are per-sample: the output may be one of the inputs.
  const int64_t n = 100003;
  const Array a = test::random_array({n}, DType::f32, device());
  const Array b = test::random_array({n}, DType::f32, device());
  const std::vector<double> ha = host(a), hb = host(b);
  launch_into(kernels::add(), {a, b}, {}, {a}, stream(), team_);
  launch_into(kernels::scale(), {a}, {2.0}, {a}, stream(), team_);
  stream().synchronize();
  std::vector<double> want(ha.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    want[i] = 2.0 * static_cast<double>(static_cast<float>(ha[i] + hb[i]));
  expect_matches(a, want, DType::f32);
}

TEST_P(Kernels, SlicesAreLaunchedAtTheirOffset) {
  std::vector<double> v(40);
  std::iota(v.begin(), v.end(), 0.0);
  const Array m = from_doubles(v, {8, 5}, DType::f32, device());
  const Array rows = m.slice(0, 3, 6);  // contiguous, at an offset
  const auto outs = launch(kernels::scale(), {rows}, {10.0}, stream(), team_);
  stream().synchronize();
  std::vector<double> want(v.begin() + 15, v.begin() + 30);
  for (double& x : want) x *= 10;
  expect_exact(host(outs[0]), want);
  // Writing into a slice leaves the rest of the parent alone.
  launch_into(kernels::fill(), {}, {-1.0}, {m.slice(0, 7, 8)}, stream(), team_);
  stream().synchronize();
  std::vector<double> after = v;
  std::fill(after.begin() + 35, after.end(), -1.0);
  expect_exact(host(m), after);
}

TEST_P(Kernels, ScalarKindsConvert) {
  // An integer scalar for a real parameter, on float and integer data.
  const Array x = from_doubles({1, 2, 3}, {3}, DType::f32, device());
  auto outs = launch(kernels::scale(), {x}, {Scalar(3)}, stream(), team_);
  stream().synchronize();
  EXPECT_EQ(host(outs[0]), (std::vector<double>{3, 6, 9}));
  const Array xi = from_doubles({1, -2, 3}, {3}, DType::i64, device());
  outs = launch(kernels::scale(), {xi}, {Scalar(int64_t{4})}, stream(), team_);
  stream().synchronize();
  EXPECT_EQ(host(outs[0]), (std::vector<double>{4, -8, 12}));
  outs = launch(kernels::scale(), {xi}, {Scalar(0.5f)}, stream(), team_);
  stream().synchronize();
  EXPECT_EQ(outs[0].dtype(), DType::i64);
}

// ---------------------------------------------------------------------------------------------
// Call errors

TEST_P(Kernels, WrongNumberOfArrays) {
  const Array a = test::random_array({10}, DType::f32, device());
  expect_throw_with<InvalidArgument>([&] { launch(kernels::add(), {a}, {}, stream(), team_); },
                                     {"kernel add", "expects 2 array arguments, got 1"});
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::add(), {a, a, a}, {}, stream(), team_);
      },
      {"got 3"});
  expect_throw_with<InvalidArgument>([&] { launch(kernels::copy(), {}, {}, stream(), team_); },
                                     {"kernel copy", "expects 1 array arguments, got 0"});
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::where(), {a, a}, {}, stream(), team_);
      },
      {"expects 3"});
  expect_throw_with<InvalidArgument>(
      [&] { launch_into(kernels::fill(), {a}, {1.0}, {a}, stream(), team_); },
      {"kernel fill", "expects 0 array arguments, got 1"});
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::sum(), {a, a}, {}, stream(), team_);
      },
      {"kernel sum", "expects 1"});
}

TEST_P(Kernels, WrongNumberOfScalars) {
  const Array a = test::random_array({10}, DType::f32, device());
  expect_throw_with<InvalidArgument>([&] { launch(kernels::scale(), {a}, {}, stream(), team_); },
                                     {"kernel scale", "expects 1 scalar arguments, got 0"});
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::scale(), {a}, {1.0, 2.0}, stream(), team_);
      },
      {"got 2"});
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::add(), {a, a}, {1.0}, stream(), team_);
      },
      {"kernel add", "expects 0 scalar arguments, got 1"});
  expect_throw_with<InvalidArgument>(
      [&] { launch_into(kernels::fill(), {}, {}, {a}, stream(), team_); }, {"expects 1 scalar"});
}

TEST_P(Kernels, ShapeMismatchNamesTheArgument) {
  const Array a = test::random_array({10}, DType::f32, device());
  const Array b = test::random_array({11}, DType::f32, device());
  const Array c = test::random_array({2, 5}, DType::f32, device());
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::add(), {a, b}, {}, stream(), team_);
      },
      {"kernel add", "'b'", "[11]", "'a'", "[10]", "shape"});
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::mul(), {b, a}, {}, stream(), team_);
      },
      {"kernel mul", "'b'", "[10]", "[11]"});
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::axpy(), {a, c}, {2.0}, stream(), team_);
      },
      {"kernel axpy", "'y'", "[2,5]", "'x'"});
  const Array cond = random_cond({10}, DType::boolean, device());
  const Array cond9 = random_cond({9}, DType::boolean, device());
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::where(), {cond, a, b}, {}, stream(), team_);
      },
      {"kernel where", "'b'", "[11]"});
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::where(), {cond9, a, a}, {}, stream(), team_);
      },
      {"kernel where", "'cond'", "[9]"});
}

TEST_P(Kernels, DTypeMismatchNamesTheArgument) {
  const Array f = test::random_array({10}, DType::f32, device());
  const Array g = test::random_array({10}, DType::f64, device());
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::add(), {f, g}, {}, stream(), team_);
      },
      {"kernel add", "'b'", "f64", "'a'", "f32", "dtype"});
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::axpy(), {g, f}, {1.0}, stream(), team_);
      },
      {"'y'", "f32", "f64"});
  const Array cond = random_cond({10}, DType::u8, device());
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::where(), {cond, f, g}, {}, stream(), team_);
      },
      {"'b'", "f64"});
}

TEST_P(Kernels, WhereConditionMustBeBoolOrU8) {
  const Array a = test::random_array({10}, DType::f32, device());
  for (DType d : {DType::f32, DType::i32, DType::f64, DType::u32}) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    const Array cond = Array::empty({10}, d, device());
    expect_throw_with<InvalidArgument>(
        [&] {
          launch(kernels::where(), {cond, a, a}, {}, stream(), team_);
        },
        {"kernel where", "'cond'", "bool or u8", std::string(dtype_name(d))});
  }
}

// u32 serves device condition cells: fill, copy and integer arithmetic without wrap-around.
TEST_P(Kernels, U32FillCopyAndAdd) {
  const Array a = test::random_array({1001}, DType::u32, device());
  const Array b = test::random_array({1001}, DType::u32, device());
  const Array out = Array::empty({1001}, DType::u32, device());
  test::poison(out);
  launch_into(kernels::fill(), {}, {7.0}, {out}, stream(), team_);
  stream().synchronize();
  EXPECT_EQ(out.to_vector<double>(), std::vector<double>(1001, 7.0));
  const Array sum = launch(kernels::add(), {a, b}, {}, stream(), team_)[0];
  const Array copy = launch(kernels::copy(), {a}, {}, stream(), team_)[0];
  stream().synchronize();
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> want;
  for (std::size_t i = 0; i < av.size(); ++i) want.push_back(av[i] + bv[i]);
  EXPECT_EQ(sum.to_vector<double>(), want);
  EXPECT_EQ(copy.to_vector<double>(), av);
}

TEST_P(Kernels, UnsupportedDTypesAreDeclined) {
  auto decline = [&](const Kernel& k, DType d) {
    SCOPED_TRACE(k.name() + " " + std::string(dtype_name(d)));
    const Array x = Array::empty({10}, d, device());
    std::vector<Array> inputs(static_cast<std::size_t>(k.num_inputs()), x);
    std::vector<Scalar> scalars(k.def().scalars.size(), Scalar(1.0));
    expect_throw_with<NotSupported>([&] { launch(k, inputs, scalars, stream(), team_); },
                                    {"kernel " + k.name(), std::string(dtype_name(d))});
  };
  for (DType d : {DType::f16, DType::bf16, DType::u32, DType::u8, DType::boolean}) {
    decline(kernels::sum(), d);
    decline(kernels::max(), d);
  }
  for (DType d : {DType::u8, DType::boolean}) {
    decline(kernels::copy(), d);
    decline(kernels::scale(), d);
    decline(kernels::axpy(), d);
    decline(kernels::add(), d);
    decline(kernels::mul(), d);
  }
  // where with u8 data (and a u8 condition).
  const Array u = Array::empty({10}, DType::u8, device());
  EXPECT_THROW(launch(kernels::where(), {u, u, u}, {}, stream(), team_), NotSupported);
  // fill into an output of an unserved dtype.
  EXPECT_THROW(launch_into(kernels::fill(), {}, {1.0}, {u}, stream(), team_), NotSupported);
}

TEST_P(Kernels, NonContiguousArraysAreRefused) {
  const Array m = test::random_array({6, 4}, DType::f32, device());
  const Array t = Array::wrap(m.data(), {4, 6}, DType::f32, device(), {1, 4});  // transposed
  const Array cols = m.slice(1, 1, 3);
  ASSERT_FALSE(t.is_contiguous());
  expect_throw_with<InvalidArgument>([&] { launch(kernels::copy(), {t}, {}, stream(), team_); },
                                     {"kernel copy", "'x'", "contiguous", "[1,4]"});
  const Array dense = test::random_array({6, 2}, DType::f32, device());
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::add(), {dense, cols}, {}, stream(), team_);
      },
      {"'b'", "contiguous"});
  expect_throw_with<InvalidArgument>(
      [&] { launch_into(kernels::copy(), {dense}, {}, {cols}, stream(), team_); },
      {"'out'", "contiguous"});
  expect_throw_with<InvalidArgument>([&] { launch(kernels::sum(), {cols}, {}, stream(), team_); },
                                     {"'x'", "contiguous"});
}

TEST_P(Kernels, FillThroughLaunchHasNoOutputShape) {
  expect_throw_with<InvalidArgument>([&] { launch(kernels::fill(), {}, {1.0}, stream(), team_); },
                                     {"kernel fill", "not determined", "launch_into"});
}

TEST_P(Kernels, LaunchIntoChecksTheOutputs) {
  const Array a = test::random_array({10}, DType::f32, device());
  expect_throw_with<InvalidArgument>(
      [&] {
        launch_into(kernels::add(), {a, a}, {}, {}, stream(), team_);
      },
      {"kernel add", "expects 1 outputs, got 0"});
  expect_throw_with<InvalidArgument>(
      [&] {
        launch_into(kernels::add(), {a, a}, {}, {a, a}, stream(), team_);
      },
      {"got 2"});
  const Array wrong_shape = Array::empty({11}, DType::f32, device());
  expect_throw_with<InvalidArgument>(
      [&] {
        launch_into(kernels::add(), {a, a}, {}, {wrong_shape}, stream(), team_);
      },
      {"output 0", "f32[10]", "f32[11]"});
  const Array wrong_dtype = Array::empty({10}, DType::f64, device());
  expect_throw_with<InvalidArgument>(
      [&] {
        launch_into(kernels::add(), {a, a}, {}, {wrong_dtype}, stream(), team_);
      },
      {"output 0", "f32[10]", "f64[10]"});
  const Array big = Array::empty({2}, DType::f32, device());
  expect_throw_with<InvalidArgument>(
      [&] { launch_into(kernels::sum(), {a}, {}, {big}, stream(), team_); }, {"f32[1]", "f32[2]"});
  const Array sum_f64 = Array::empty({1}, DType::f64, device());
  expect_throw_with<InvalidArgument>(
      [&] { launch_into(kernels::sum(), {a}, {}, {sum_f64}, stream(), team_); }, {"f64[1]"});
}

TEST_P(Kernels, FailedCallsLeaveTheOutputAlone) {
  const Array a = test::random_array({10}, DType::f32, device());
  const Array b = test::random_array({10}, DType::f64, device());
  const Array out = Array::empty({10}, DType::f32, device());
  test::poison(out);
  EXPECT_THROW(launch_into(kernels::add(), {a, b}, {}, {out}, stream(), team_), InvalidArgument);
  stream().synchronize();
  for (double v : host(out)) EXPECT_TRUE(std::isnan(v));
}

TEST_P(Kernels, ArraysOnAnotherDeviceAreRefused) {
  if (device().is_cpu() && !cuda_available())
    GTEST_SKIP() << "needs a CUDA device to put an array elsewhere";
  const Device other = device().is_cpu() ? Device::cuda(0) : Device::cpu();
  const Array here = test::random_array({10}, DType::f32, device());
  const Array there = test::random_array({10}, DType::f32, other);
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::add(), {here, there}, {}, stream(), team_);
      },
      {"kernel add", "'b'", other.str(), device().str()});
  const Array out_there = Array::empty({10}, DType::f32, other);
  expect_throw_with<InvalidArgument>(
      [&] { launch_into(kernels::copy(), {here}, {}, {out_there}, stream(), team_); }, {"'out'"});
}

}  // namespace
}  // namespace eagle

namespace eagle {
namespace {

// Real scalars become integers by one defined rule on the CPU and the GPU alike: truncation
// toward zero, saturation at the type's range, NaN to 0.
TEST_P(Kernels, RealScalarsSaturateIntoIntegerArrays) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    double value;
    int64_t i64;
    int32_t i32;
    uint32_t u32;
  };
  const Case cases[] = {
      {1e30, INT64_MAX, INT32_MAX, UINT32_MAX},
      {-1e30, INT64_MIN, INT32_MIN, 0},
      {inf, INT64_MAX, INT32_MAX, UINT32_MAX},
      {-inf, INT64_MIN, INT32_MIN, 0},
      {nan, 0, 0, 0},
      {-2.75, -2, -2, 0},
      {4294967295.5, 4294967295, INT32_MAX, UINT32_MAX},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value);
    const Array a64 = Array::empty({5}, DType::i64, device());
    const Array a32 = Array::empty({5}, DType::i32, device());
    const Array au = Array::empty({5}, DType::u32, device());
    launch_into(kernels::fill(), {}, {c.value}, {a64}, stream(), team_);
    launch_into(kernels::fill(), {}, {c.value}, {a32}, stream(), team_);
    launch_into(kernels::fill(), {}, {c.value}, {au}, stream(), team_);
    stream().synchronize();
    for (int64_t v : a64.to_vector<int64_t>()) EXPECT_EQ(v, c.i64);
    for (int32_t v : a32.to_vector<int32_t>()) EXPECT_EQ(v, c.i32);
    for (uint32_t v : au.to_vector<uint32_t>()) EXPECT_EQ(v, c.u32);
  }
  // The same rule for a real scalar passed to an integer scalar parameter.
  EXPECT_EQ(Scalar(1e300).as(ScalarKind::integer).i, INT64_MAX);
  EXPECT_EQ(Scalar(-1e300).as(ScalarKind::integer).i, INT64_MIN);
  EXPECT_EQ(Scalar(nan).as(ScalarKind::integer).i, 0);
  // scale on integers: alpha saturates too (no UB on the way).
  const Array x = Array::from(std::vector<int32_t>{1, -1, 0}, {3}, device());
  const auto out = launch(kernels::scale(), {x}, {1e20}, stream(), team_);
  stream().synchronize();
  const auto got = out[0].to_vector<int32_t>();
  EXPECT_EQ(got[0], INT32_MAX);
  EXPECT_EQ(got[1], -INT32_MAX);
  EXPECT_EQ(got[2], 0);
}

}  // namespace
}  // namespace eagle
