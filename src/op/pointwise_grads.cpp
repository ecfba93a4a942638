// Derivative rules of the pointwise table, each the formula of its op: with g the cotangent of
// `out`, the contribution to a (and b) over the broadcast dims of out; GradContext::grad sums
// the broadcast axes away. Comparisons and logic give booleans (no gradient); floor and ceil
// have a zero derivative.
#include <cmath>
#include <numbers>

#include "op/grad_context.hpp"
#include "op/tables.hpp"

namespace eagle::op::detail {

namespace {

struct Terms {
  GradContext& c;
  Tensor g() { return c.cot("out"); }
  Tensor a() { return c.value("a"); }
  Tensor b() { return c.value("b"); }
  Tensor y() { return c.value("out"); }
  Tensor k(double v) { return c.constant(v, c.cot("out").dtype()); }
  Tensor add(const Tensor& x, const Tensor& z) { return c.pw("add", x, z); }
  Tensor sub(const Tensor& x, const Tensor& z) { return c.pw("sub", x, z); }
  Tensor mul(const Tensor& x, const Tensor& z) { return c.pw("mul", x, z); }
  Tensor div(const Tensor& x, const Tensor& z) { return c.pw("div", x, z); }
  Tensor f(const char* op, const Tensor& x) { return c.pw(op, x); }
  // A boolean comparison as 0 / 1 of g's dtype.
  Tensor is(const char* cmp, const Tensor& x, const Tensor& z) {
    return c.cast(c.pw(cmp, x, z), c.cot("out").dtype());
  }
  Tensor zero_of(const Tensor& x) { return c.constant(0.0, x.dtype()); }
};

// da = g * local, for a unary op (local built only when a gradient is wanted).
template <class Local>
void unary(GradContext& c, Local local) {
  if (!c.wants("a")) return;
  Terms t{c};
  c.grad("a", t.mul(t.g(), local(t)));
}

}  // namespace

void pointwise_grad_identity(GradContext& c) {
  c.grad("a", c.cot("out"));
}
void pointwise_grad_cast(GradContext& c) {
  c.grad("a", c.cot("out"));  // grad() casts back to a's dtype
}
void pointwise_grad_zero(GradContext&) {}
void pointwise_grad_neg(GradContext& c) {
  if (c.wants("a")) c.grad("a", c.pw("neg", c.cot("out")));
}
void pointwise_grad_abs(GradContext& c) {  // sign(a), 0 at 0
  unary(c, [](Terms& t) {
    const Tensor a = t.a();
    return t.sub(t.is("cmp_gt", a, t.zero_of(a)), t.is("cmp_lt", a, t.zero_of(a)));
  });
}
void pointwise_grad_exp(GradContext& c) {
  unary(c, [](Terms& t) { return t.y(); });
}
void pointwise_grad_log(GradContext& c) {
  if (!c.wants("a")) return;
  Terms t{c};
  c.grad("a", t.div(t.g(), t.a()));
}
void pointwise_grad_sqrt(GradContext& c) {  // 1 / (2 y)
  unary(c, [](Terms& t) { return t.div(t.k(0.5), t.y()); });
}
void pointwise_grad_rsqrt(GradContext& c) {  // -y^3 / 2
  unary(c, [](Terms& t) {
    const Tensor y = t.y();
    return t.mul(t.k(-0.5), t.mul(y, t.f("square", y)));
  });
}
void pointwise_grad_reciprocal(GradContext& c) {  // -y^2
  unary(c, [](Terms& t) { return t.f("neg", t.f("square", t.y())); });
}
void pointwise_grad_square(GradContext& c) {  // 2a
  unary(c, [](Terms& t) { return t.mul(t.k(2.0), t.a()); });
}
void pointwise_grad_tanh(GradContext& c) {  // 1 - y^2
  unary(c, [](Terms& t) { return t.sub(t.k(1.0), t.f("square", t.y())); });
}
void pointwise_grad_sigmoid(GradContext& c) {  // y (1 - y)
  unary(c, [](Terms& t) {
    const Tensor y = t.y();
    return t.mul(y, t.sub(t.k(1.0), y));
  });
}
void pointwise_grad_relu(GradContext& c) {  // g where a > 0, else 0
  if (!c.wants("a")) return;
  Terms t{c};
  const Tensor a = t.a();
  c.grad("a", c.where(c.pw("cmp_gt", a, t.zero_of(a)), t.g(), t.k(0.0)));
}
// gelu and silu: one gelu_backward / silu_backward node (torch's kernels of the same names),
// computed in f32 and rounded once, instead of a chain of a dozen nodes each rounded to g's dtype.
void pointwise_grad_gelu(GradContext& c) {  // g (Phi(a) + a phi(a))
  if (c.wants("a")) c.grad("a", c.pw("gelu_backward", c.cot("out"), c.value("a")));
}
void pointwise_grad_gelu_tanh(GradContext& c) {
  // y = a (1 + tanh(u)) / 2, u = s (a + 0.044715 a^3), s = sqrt(2 / pi):
  // dy/da = (1 + tanh u) / 2 + a (1 - tanh^2 u) s (1 + 3 * 0.044715 a^2) / 2
  unary(c, [](Terms& t) {
    const double s = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;
    const Tensor a = t.a();
    const Tensor a2 = t.f("square", a);
    const Tensor th = t.f("tanh", t.mul(t.k(s), t.add(a, t.mul(t.k(0.044715), t.mul(a, a2)))));
    const Tensor du = t.mul(t.k(s), t.add(t.k(1.0), t.mul(t.k(3 * 0.044715), a2)));
    return t.add(t.mul(t.k(0.5), t.add(t.k(1.0), th)),
                 t.mul(t.mul(t.k(0.5), a), t.mul(t.sub(t.k(1.0), t.f("square", th)), du)));
  });
}
void pointwise_grad_silu(GradContext& c) {  // g s (1 + a (1 - s)), s = sigmoid(a)
  if (c.wants("a")) c.grad("a", c.pw("silu_backward", c.cot("out"), c.value("a")));
}
void pointwise_grad_softplus(GradContext& c) {  // sigmoid(a)
  unary(c, [](Terms& t) { return t.f("sigmoid", t.a()); });
}
void pointwise_grad_erf(GradContext& c) {  // 2 / sqrt(pi) e^(-a^2)
  unary(c, [](Terms& t) {
    return t.mul(t.k(2 * std::numbers::inv_sqrtpi), t.f("exp", t.f("neg", t.f("square", t.a()))));
  });
}
void pointwise_grad_sin(GradContext& c) {
  unary(c, [](Terms& t) { return t.f("cos", t.a()); });
}
void pointwise_grad_cos(GradContext& c) {
  unary(c, [](Terms& t) { return t.f("neg", t.f("sin", t.a())); });
}

// The backward ops themselves, y = a f'(b) with a the cotangent and b the forward input: dy/da =
// f'(b), the same op over this cotangent; dy/db = a f''(b).
void pointwise_grad_gelu_backward(GradContext& c) {  // gelu'' = phi(b) (2 - b^2)
  Terms t{c};
  if (c.wants("a")) c.grad("a", c.pw("gelu_backward", t.g(), t.b()));
  if (c.wants("b")) {
    const Tensor b2 = t.f("square", t.b());
    const Tensor pdf = t.mul(t.k(0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2),
                             t.f("exp", t.mul(t.k(-0.5), b2)));
    c.grad("b", t.mul(t.mul(t.g(), t.a()), t.mul(pdf, t.sub(t.k(2.0), b2))));
  }
}
void pointwise_grad_silu_backward(GradContext& c) {  // silu'' = s (1 - s) (2 + b (1 - 2 s))
  Terms t{c};
  if (c.wants("a")) c.grad("a", c.pw("silu_backward", t.g(), t.b()));
  if (c.wants("b")) {
    const Tensor b = t.b();
    const Tensor s = t.f("sigmoid", b);
    const Tensor ds = t.mul(s, t.sub(t.k(1.0), s));
    const Tensor bend = t.add(t.k(2.0), t.mul(b, t.sub(t.k(1.0), t.mul(t.k(2.0), s))));
    c.grad("b", t.mul(t.mul(t.g(), t.a()), t.mul(ds, bend)));
  }
}

void pointwise_grad_add(GradContext& c) {
  c.grad("a", c.cot("out"));
  c.grad("b", c.cot("out"));
}
void pointwise_grad_sub(GradContext& c) {
  c.grad("a", c.cot("out"));
  if (c.wants("b")) c.grad("b", c.pw("neg", c.cot("out")));
}
void pointwise_grad_mul(GradContext& c) {
  Terms t{c};
  if (c.wants("a")) c.grad("a", t.mul(t.g(), t.b()));
  if (c.wants("b")) c.grad("b", t.mul(t.g(), t.a()));
}
void pointwise_grad_div(GradContext& c) {  // 1 / b, -y / b
  Terms t{c};
  if (c.wants("a")) c.grad("a", t.div(t.g(), t.b()));
  if (c.wants("b")) c.grad("b", t.f("neg", t.mul(t.g(), t.div(t.y(), t.b()))));
}

namespace {
// max (cmp "cmp_gt") and min ("cmp_lt"): the larger (smaller) input takes g, ties share it.
void extremum(GradContext& c, const char* cmp, const char* other) {
  Terms t{c};
  const Tensor a = t.a(), b = t.b();
  const Tensor tie = t.mul(t.k(0.5), t.is("cmp_eq", a, b));
  if (c.wants("a")) c.grad("a", t.mul(t.g(), t.add(t.is(cmp, a, b), tie)));
  if (c.wants("b")) c.grad("b", t.mul(t.g(), t.add(t.is(other, a, b), tie)));
}
}  // namespace

void pointwise_grad_max(GradContext& c) {
  extremum(c, "cmp_gt", "cmp_lt");
}
void pointwise_grad_min(GradContext& c) {
  extremum(c, "cmp_lt", "cmp_gt");
}
void pointwise_grad_pow(GradContext& c) {  // b a^(b - 1), y log(a)
  Terms t{c};
  if (c.wants("a")) {
    const Tensor b = t.b();
    c.grad("a", t.mul(t.g(), t.mul(b, c.pw("pow", t.a(), t.sub(b, t.k(1.0))))));
  }
  if (c.wants("b")) c.grad("b", t.mul(t.g(), t.mul(t.y(), t.f("log", t.a()))));
}
void pointwise_grad_mod(GradContext& c) {  // fmod(a, b) = a - trunc(a / b) b: 1, -(a - y) / b
  Terms t{c};
  c.grad("a", t.g());
  if (c.wants("b")) c.grad("b", t.f("neg", t.mul(t.g(), t.div(t.sub(t.a(), t.y()), t.b()))));
}
void pointwise_grad_where(GradContext& c) {
  if (!c.wants("a") && !c.wants("b")) return;  // cond carries no gradient
  Terms t{c};
  const Tensor cond = c.value("cond");
  if (c.wants("a")) c.grad("a", c.where(cond, t.g(), t.k(0.0)));
  if (c.wants("b")) c.grad("b", c.where(cond, t.k(0.0), t.g()));
}

}  // namespace eagle::op::detail
