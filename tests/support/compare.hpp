// Comparisons: the relative error of the method, per-dtype tolerances, elementwise checks, and
// expected exceptions.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "eagle/eagle.hpp"

namespace eagle::test {

// Relative error ||got - want|| / ||want|| (absolute when want is all zeros), NaN if any element
// of got is NaN or the sizes differ (NaN never passes).
inline double rel_error(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return std::nan("");
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) return std::nan("");
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// Tolerances of the method for a result stored in `d`: f32 far under 1e-3, 16-bit formats
// between 1e-3 and 1e-2 (about one unit in the last place of the stored result).
inline double tolerance(DType d) {
  switch (d) {
    case DType::f64:
      return 1e-12;
    case DType::f32:
      return 1e-6;
    case DType::f16:
      return 2e-3;
    case DType::bf16:
      return 1e-2;
    default:
      return 0;
  }
}

#define EXPECT_CLOSE(got, want, tol)                                                       \
  do {                                                                                     \
    const double eagle_err_ = ::eagle::test::rel_error((got), (want));                     \
    EXPECT_TRUE(eagle_err_ <= (tol)) << "relative error " << eagle_err_ << " > " << (tol); \
  } while (0)

// Every element within tol * max(1, |want|); NaN exactly where NaN is wanted, infinities equal.
inline void expect_all_near(const std::vector<double>& got, const std::vector<double>& want,
                            double tol, const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i]))
          << what << " element " << i << ": got " << got[i] << ", want NaN";
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " element " << i;
    } else {
      EXPECT_LE(std::fabs(got[i] - want[i]), tol * std::max(1.0, std::fabs(want[i])))
          << what << " element " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
}

// Expects `fn` to throw exception type E whose message contains every one of `needles`.
template <class E, class Fn>
void expect_throw_with(Fn&& fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an exception, none was thrown";
  } catch (const E& e) {
    const std::string what = e.what();
    for (const auto& n : needles)
      EXPECT_NE(what.find(n), std::string::npos) << "message '" << what << "' lacks '" << n << "'";
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type, message: " << e.what();
  }
}

// The common case: an InvalidArgument naming every one of `needles`.
template <class Fn>
void expect_invalid(Fn&& fn, std::initializer_list<std::string> needles) {
  expect_throw_with<InvalidArgument>(std::forward<Fn>(fn), needles);
}
template <class Fn>
void expect_invalid(Fn&& fn, const std::string& needle) {
  expect_throw_with<InvalidArgument>(std::forward<Fn>(fn), {needle});
}

}  // namespace eagle::test
