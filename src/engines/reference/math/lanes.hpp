// The lanes the structured reference routines walk: a tensor seen as [outer, len, inner] with
// 1-D runs along one axis, and the sums and log-sum-exps over a run. Shared by the forward
// routines (structured.cpp) and their gradients (structured_grad.cpp).
#pragma once

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "eagle/core/error.hpp"
#include "engines/reference/math/dense.hpp"
#include "engines/reference/math/pointwise.hpp"

namespace eagle::reference::lanes {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <class T>
inline std::string str(const T& v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// Reruns `fn`, prefixing any InvalidArgument it throws with what the caller was doing.
template <class Fn>
auto in_context(const std::string& context, Fn&& fn) {
  try {
    return fn();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(context + " (" + e.what() + ")");
  }
}

// `axis` in [-rank, rank), counted from the front.
inline std::size_t resolve_axis(std::string_view op, std::string_view arg, int axis,
                                const Dims& dims) {
  const int rank = static_cast<int>(dims.size());
  if (axis < -rank || axis >= rank)
    throw InvalidArgument(str(op) + ": " + str(arg) + " " + str(axis) +
                          " is out of range for x dims " + format_dims(dims) + " (must be in [" +
                          str(-rank) + ", " + str(rank) + "))");
  return static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
}

// One 1-D run through a tensor: `len` elements `stride` apart from `base`; lane[i] is the flat
// index of element i.
struct Lane {
  int64_t base, stride, len;
  std::size_t operator[](int64_t i) const { return static_cast<std::size_t>(base + i * stride); }
};

// A tensor viewed as [outer, len, inner], with lanes along the middle axis.
struct Lanes {
  int64_t outer, len, inner;
};

inline Lanes lanes_along(const Dims& dims, std::size_t axis) {
  const Dims before(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(axis));
  const Dims after(dims.begin() + static_cast<std::ptrdiff_t>(axis) + 1, dims.end());
  return {count(before), dims[axis], count(after)};
}

// Calls fn(lane number, lane) for every lane, numbered in row-major order of (outer, inner).
template <class Fn>
void for_each_lane(Lanes s, Fn&& fn) {
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i)
      fn(o * s.inner + i, Lane{o * s.len * s.inner + i, s.inner, s.len});
}

inline double lane_sum(const std::vector<double>& x, Lane l) {
  double s = 0;
  for (int64_t i = 0; i < l.len; ++i) s += x[l[i]];
  return s;
}

// log(sum(exp(x))) shifted by the lane's max so exp cannot overflow. An infinite max is the
// answer itself (all -inf, or a +inf); the shift would make it inf - inf = NaN.
inline double lane_logsumexp(const std::vector<double>& x, Lane l) {
  static const BinaryFn max_nan = binary_fn("max");
  double m = -kInf;
  for (int64_t i = 0; i < l.len; ++i) m = max_nan(m, x[l[i]]);
  if (std::isinf(m)) return m;
  double s = 0;
  for (int64_t i = 0; i < l.len; ++i) s += std::exp(x[l[i]] - m);
  return m + std::log(s);
}

}  // namespace eagle::reference::lanes
