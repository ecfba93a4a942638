// The float64 oracle of every pointwise op of the IR table: its formula, written here from the
// op's definition (never the reference engine's code), and the input range it is tested on.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace eagle::test::oracle {

struct Range {
  double lo = -2, hi = 2;
};

struct Pointwise {
  Pointwise(std::function<double(const std::vector<double>&)> fn, Range ra = {},  // NOLINT
            Range rb = {}, double cancel_floor = 0)
      : f(std::move(fn)), a(ra), b(rb), cancel(cancel_floor) {}
  // The result from the inputs in port order (cond, a, b); a boolean result is 0 or 1.
  std::function<double(const std::vector<double>&)> f;
  Range a, b;  // where the inputs are drawn: inside the op's domain, away from its poles
  // An absolute error allowed per unit of |a|, for an op a f'(b) whose f' is a sum of terms of
  // size ~1 that cancel at a root (gelu' at b = -0.752, silu' at b = -1.278): there f32's
  // relative error grows without bound while its absolute error stays a few f32 units of |a|.
  double cancel = 0;
};

// The oracle of `op`, or nullptr when the table below has none (a new op needs a row).
const Pointwise* pointwise(std::string_view op);
// Whether the op yields a boolean (comparisons and logic).
bool yields_boolean(std::string_view op);

double sigmoid(double x);
double softplus(double x);

}  // namespace eagle::test::oracle
