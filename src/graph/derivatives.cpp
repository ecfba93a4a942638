// Derivative rules: vjp_rule for kernels of one's own, and the rules of the standard kernels
// (eagle/kernel/standard.hpp), which are defined in the kernel layer below recording.
#include "eagle/graph/derivative.hpp"

#include <algorithm>

#include "eagle/kernel/standard.hpp"
#include "eagle/kernel/views.hpp"

namespace eagle {

namespace {

class FnRule final : public VjpRule {
 public:
  FnRule(VjpFn fn, std::vector<int> reads) : fn_(std::move(fn)), reads_(std::move(reads)) {}
  std::vector<std::optional<Value>> vjp(Recorder& r, const VjpArgs& a) const override {
    return fn_(r, a);
  }
  bool reads(int slot) const override {
    return std::find(reads_.begin(), reads_.end(), slot) != reads_.end();
  }

 private:
  VjpFn fn_;
  std::vector<int> reads_;
};

using Grads = std::vector<std::optional<Value>>;

// A new array of `like`'s shape and dtype holding `value`.
Value filled(Recorder& r, const Value& like, double value) {
  const Value out = r.empty(like.shape(), like.dtype());
  r.call(kernels::fill(), {value}, buffer(out));
  return out;
}

// The cotangent of the one output of an elementwise or reduction kernel (its last parameter).
const std::optional<Value>& cot(const VjpArgs& a) {
  return a.cotangents.back();
}

// copy (x, out): dx = g
Grads copy_vjp(Recorder&, const VjpArgs& a) {
  return {cot(a), std::nullopt};
}
// scale (x, out; alpha): dx = alpha g
Grads scale_vjp(Recorder& r, const VjpArgs& a) {
  return {r.call(kernels::scale(), {*cot(a), a.scalars[0].f}), std::nullopt};
}
// axpy (x, y, out; alpha): dx = alpha g, dy = g
Grads axpy_vjp(Recorder& r, const VjpArgs& a) {
  Grads g(3);
  if (a.wanted[0]) g[0] = r.call(kernels::scale(), {*cot(a), a.scalars[0].f});
  g[1] = cot(a);
  return g;
}
// add (a, b, out): da = db = g
Grads add_vjp(Recorder&, const VjpArgs& a) {
  return {cot(a), cot(a), std::nullopt};
}
// mul (a, b, out): da = g b, db = g a
Grads mul_vjp(Recorder& r, const VjpArgs& a) {
  Grads g(3);
  if (a.wanted[0]) g[0] = r.call(kernels::mul(), {*cot(a), a.arrays[1]});
  if (a.wanted[1]) g[1] = r.call(kernels::mul(), {*cot(a), a.arrays[0]});
  return g;
}
// where (cond, a, b, out): da = cond ? g : 0, db = cond ? 0 : g
Grads where_vjp(Recorder& r, const VjpArgs& a) {
  Grads g(4);
  const Value zero = filled(r, *cot(a), 0.0);
  if (a.wanted[1]) g[1] = r.call(kernels::where(), {a.arrays[0], *cot(a), zero});
  if (a.wanted[2]) g[2] = r.call(kernels::where(), {a.arrays[0], zero, *cot(a)});
  return g;
}
// sum (x, out): dx = g[0] everywhere
Grads sum_vjp(Recorder& r, const VjpArgs& a) {
  const Value dx = r.empty(a.arrays[0].shape(), a.arrays[0].dtype());
  r.call(kernels::broadcast(), {*cot(a)}, buffer(dx));
  return {dx, std::nullopt};
}
// max (x, out): g[0] shared evenly by the elements equal to the maximum (a subgradient whose
// entries sum to g[0], as for a sum over ties)
Grads max_vjp(Recorder& r, const VjpArgs& a) {
  const Value ties = r.call(kernels::equal_mask(), {a.arrays[0], a.arrays[1]});
  const Value count = r.call(kernels::sum(), {ties});
  return {r.call(kernels::mul_div(), {ties, *cot(a), count}), std::nullopt};
}
// broadcast (x, out): dx = sum of g
Grads broadcast_vjp(Recorder& r, const VjpArgs& a) {
  return {r.call(kernels::sum(), {*cot(a)}), std::nullopt};
}
// equal_mask (x, value, out): piecewise constant, zero almost everywhere
Grads equal_mask_vjp(Recorder&, const VjpArgs&) {
  return Grads(3);
}
// mul_div (x, num, den, out) = x num / den: dx = g num / den; with t = sum(g x):
// dnum = t / den, dden = -t num / den^2
Grads mul_div_vjp(Recorder& r, const VjpArgs& a) {
  const Value &x = a.arrays[0], &num = a.arrays[1], &den = a.arrays[2];
  Grads g(4);
  if (a.wanted[0]) g[0] = r.call(kernels::mul_div(), {*cot(a), num, den});
  if (!a.wanted[1] && !a.wanted[2]) return g;
  const Value t = r.call(kernels::sum(), {r.call(kernels::mul(), {*cot(a), x})});
  if (a.wanted[1]) g[1] = r.call(kernels::mul_div(), {t, filled(r, t, 1.0), den});
  if (a.wanted[2])
    g[2] = r.call(kernels::mul_div(),
                  {r.call(kernels::scale(), {t, -1.0}), num, r.call(kernels::mul(), {den, den})});
  return g;
}

struct StandardRule {
  const Kernel* kernel;
  std::shared_ptr<const Derivative> rule;
};

const std::vector<StandardRule>& standard_rules() {
  static const std::vector<StandardRule> rules = {
      {&kernels::fill(), vjp_rule([](Recorder&, const VjpArgs&) { return Grads(1); }, {})},
      {&kernels::copy(), vjp_rule(copy_vjp, {})},
      // gather_view (x a strided view, out): dx = g, added where the view lies
      {&kernels::gather_view(), vjp_rule(copy_vjp, {})},
      {&kernels::scale(), vjp_rule(scale_vjp, {})},
      {&kernels::axpy(), vjp_rule(axpy_vjp, {})},
      {&kernels::add(), vjp_rule(add_vjp, {})},
      {&kernels::mul(), vjp_rule(mul_vjp, {0, 1})},
      {&kernels::where(), vjp_rule(where_vjp, {0})},
      {&kernels::sum(), vjp_rule(sum_vjp, {})},
      {&kernels::max(), vjp_rule(max_vjp, {0, 1})},
      {&kernels::broadcast(), vjp_rule(broadcast_vjp, {})},
      {&kernels::equal_mask(), vjp_rule(equal_mask_vjp, {})},
      {&kernels::mul_div(), vjp_rule(mul_div_vjp, {0, 1, 2})},
  };
  return rules;
}

}  // namespace

std::shared_ptr<const Derivative> vjp_rule(VjpFn fn, std::vector<int> reads) {
  return std::make_shared<FnRule>(std::move(fn), std::move(reads));
}

const VjpRule* derivative_of(const Kernel& kernel) {
  if (kernel.def().derivative) return dynamic_cast<const VjpRule*>(kernel.def().derivative.get());
  for (const StandardRule& s : standard_rules())
    if (*s.kernel == kernel) return static_cast<const VjpRule*>(s.rule.get());
  return nullptr;
}

}  // namespace eagle
