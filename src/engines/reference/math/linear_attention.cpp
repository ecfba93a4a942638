#include "engines/reference/math/linear_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include "eagle/core/error.hpp"

namespace eagle::reference {
namespace {

const char* rule_name(DeltaRule rule) {
  switch (rule) {
    case DeltaRule::gdn:
      return "gdn";
    case DeltaRule::kda:
      return "kda";
    case DeltaRule::gdn2:
      return "gdn2";
  }
  return "?";
}

std::string dims_text(const Dims& dims) {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) text += ",";
    text += std::to_string(dims[i]);
  }
  return text + "]";
}

[[noreturn]] void fail(DeltaRule rule, const std::string& what) {
  throw InvalidArgument(std::string(rule_name(rule)) + ": " + what);
}

std::size_t at(int64_t i) {
  return static_cast<std::size_t>(i);
}

// A Dense whose data does not match its dims would be read out of bounds.
void expect_filled(DeltaRule rule, const char* arg, const Dense& x) {
  for (int64_t d : x.dims) {
    if (d < 0) fail(rule, std::string(arg) + " dims " + dims_text(x.dims) + ": negative extent");
  }
  if (x.numel() != count(x.dims)) {
    fail(rule, std::string(arg) + " holds " + std::to_string(x.numel()) + " values for dims " +
                   dims_text(x.dims));
  }
}

void expect_dims(DeltaRule rule, const char* arg, const Dense& x, const Dims& want,
                 const char* names) {
  if (x.dims != want) {
    fail(rule, std::string(arg) + " dims " + dims_text(x.dims) + ": expected " + names + " = " +
                   dims_text(want));
  }
  expect_filled(rule, arg, x);
}

const Dense& required(DeltaRule rule, const char* arg, const Dense* x) {
  if (x == nullptr) fail(rule, std::string(arg) + ": required");
  return *x;
}

// Sizes read off validated operands; group = HV / H value heads share one q/k head.
struct Sizes {
  int64_t T, H, HV, K, V, B, group;
  int64_t L;  // active rows: cu_seqlens[B] <= T; the rows past it are padding, never read
};

Sizes validate(DeltaRule rule, const DeltaInputs& in, const DeltaOptions& opt) {
  const bool gdn = rule == DeltaRule::gdn, gdn2 = rule == DeltaRule::gdn2;
  if (!gdn && opt.safe_gate) fail(rule, "safe_gate: only gdn has it");
  if (!gdn && opt.use_beta_sigmoid) fail(rule, "use_beta_sigmoid: only gdn has it");
  if (!std::isfinite(opt.scale))
    fail(rule, "scale = " + std::to_string(opt.scale) + ": not finite");

  const Dense& q = required(rule, "q", in.q);
  if (q.dims.size() != 3 || q.dims[1] < 1 || q.dims[2] < 1) {
    fail(rule, "q dims " + dims_text(q.dims) + ": expected [T, H, K] with H, K >= 1");
  }
  expect_filled(rule, "q", q);
  Sizes s{};
  s.T = q.dims[0], s.H = q.dims[1], s.K = q.dims[2];
  expect_dims(rule, "k", required(rule, "k", in.k), {s.T, s.H, s.K}, "[T, H, K]");

  const Dense& v = required(rule, "v", in.v);
  if (v.dims.size() != 3 || v.dims[0] != s.T || v.dims[1] < 1 || v.dims[2] < 1) {
    fail(rule, "v dims " + dims_text(v.dims) +
                   ": expected [T, HV, V] with T = " + std::to_string(s.T) + " and HV, V >= 1");
  }
  expect_filled(rule, "v", v);
  s.HV = v.dims[1], s.V = v.dims[2];
  if (s.HV % s.H != 0) {
    fail(rule,
         "v: HV = " + std::to_string(s.HV) + " is not a multiple of H = " + std::to_string(s.H));
  }
  s.group = s.HV / s.H;

  const auto& cu = in.cu_seqlens;
  if (cu.empty() || cu.front() != 0) {
    fail(rule, "cu_seqlens " + dims_text(cu) + ": expected [B + 1] offsets starting at 0");
  }
  for (std::size_t i = 1; i < cu.size(); ++i) {
    if (cu[i] < cu[i - 1]) {
      fail(rule, "cu_seqlens " + dims_text(cu) + ": decreases at index " + std::to_string(i));
    }
  }
  if (cu.back() > s.T) {
    fail(rule, "cu_seqlens " + dims_text(cu) + ": ends at " + std::to_string(cu.back()) +
                   ", past T = " + std::to_string(s.T));
  }
  s.B = static_cast<int64_t>(cu.size()) - 1;
  s.L = cu.back();

  const Dense& g = required(rule, "g", in.g);
  if (gdn) {
    expect_dims(rule, "g", g, {s.T, s.HV}, "[T, HV]");
  } else {
    expect_dims(rule, "g", g, {s.T, s.HV, s.K}, "[T, HV, K]");
  }
  if (gdn2) {
    if (in.beta != nullptr)
      fail(rule, "beta: gdn2 takes the erase gate b and write gate w instead");
    expect_dims(rule, "b", required(rule, "b", in.b), {s.T, s.HV, s.K}, "[T, HV, K]");
    expect_dims(rule, "w", required(rule, "w", in.w), {s.T, s.HV, s.V}, "[T, HV, V]");
  } else {
    expect_dims(rule, "beta", required(rule, "beta", in.beta), {s.T, s.HV}, "[T, HV]");
    if (in.b != nullptr) fail(rule, "b: only gdn2 takes an erase gate");
    if (in.w != nullptr) fail(rule, "w: only gdn2 takes a write gate");
  }
  if (in.initial_state != nullptr) {
    expect_dims(rule, "initial_state", *in.initial_state, {s.B, s.HV, s.K, s.V}, "[B, HV, K, V]");
  }
  if (opt.safe_gate) {
    expect_dims(rule, "a_log", required(rule, "a_log", in.a_log), {s.HV}, "[HV]");
    expect_dims(rule, "dt_bias", required(rule, "dt_bias", in.dt_bias), {s.HV}, "[HV]");
  } else {
    // Silently ignoring them would hide a caller that forgot to set safe_gate.
    if (in.a_log != nullptr) fail(rule, "a_log: given without safe_gate");
    if (in.dt_bias != nullptr) fail(rule, "dt_bias: given without safe_gate");
  }
  return s;
}

double softplus(double z) {
  return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z));
}

double sigmoid(double z) {
  if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1.0 + e);
}

// ---- input transforms, shared by forward and backward ----

// q or k rows as the recurrence reads them: y = mul * x * r per [T, H] row, where r is the
// inverse l2 norm (1 without the norm). r is kept for the backward.
struct Rows {
  std::vector<double> y, r;
};

Rows transform_rows(const Dense& x, const Sizes& s, bool l2, double mul) {
  Rows rows{std::vector<double>(x.data.size()), std::vector<double>(at(s.T * s.H), 1.0)};
  for (int64_t row = 0; row < s.T * s.H; ++row) {
    const double* xr = &x.data[at(row * s.K)];
    if (l2) {
      double sum = 0;
      for (int64_t i = 0; i < s.K; ++i) sum += xr[i] * xr[i];
      rows.r[at(row)] = 1.0 / std::sqrt(sum + 1e-6);
    }
    for (int64_t i = 0; i < s.K; ++i) rows.y[at(row * s.K + i)] = mul * xr[i] * rows.r[at(row)];
  }
  return rows;
}

// Gradient w.r.t. x given dy for y = transform_rows(x): with n = x r, dx = mul r (dy - n (n . dy)),
// which is mul dy without the norm (r = 1, no projection).
Dense transform_rows_backward(const Dense& x, const Sizes& s, bool l2, double mul, const Rows& rows,
                              const std::vector<double>& dy) {
  Dense dx(x.dims);  // padding rows (t >= L) stay 0
  for (int64_t row = 0; row < s.L * s.H; ++row) {
    const double r = rows.r[at(row)];
    const double* xr = &x.data[at(row * s.K)];
    const double* dyr = &dy[at(row * s.K)];
    double proj = 0;  // n . dy
    if (l2) {
      for (int64_t i = 0; i < s.K; ++i) proj += xr[i] * r * dyr[i];
    }
    for (int64_t i = 0; i < s.K; ++i) {
      dx.data[at(row * s.K + i)] = mul * r * (dyr[i] - xr[i] * r * proj);
    }
  }
  return dx;
}

// ---- per-rule gates: the only place the three rules differ ----

// What the recurrence reads per token and value head, the same for every rule: decay a and
// erase gate c per key channel [T, HV, K], write gate u per value channel [T, HV, V].
struct Coefs {
  std::vector<double> a, c, u;
};

// gdn's log-decay for row i = t * HV + h: g itself, or under safe_gate the gate of logit g.
double gdn_log_decay(const DeltaInputs& in, const DeltaOptions& opt, int64_t i, int64_t h) {
  const double g = in.g->data[at(i)];
  if (!opt.safe_gate) return g;
  return -std::exp(in.a_log->data[at(h)]) * softplus(g + in.dt_bias->data[at(h)]);
}

double gdn_beta(const DeltaInputs& in, const DeltaOptions& opt, int64_t i) {
  const double beta = in.beta->data[at(i)];
  return opt.use_beta_sigmoid ? sigmoid(beta) : beta;
}

// gdn broadcasts one decay per head over K; kda and gdn2 decay each key channel.
std::vector<double> decay(DeltaRule rule, const DeltaInputs& in, const DeltaOptions& opt,
                          const Sizes& s) {
  std::vector<double> a(at(s.T * s.HV * s.K));
  for (int64_t i = 0; i < s.T * s.HV; ++i) {
    for (int64_t c = 0; c < s.K; ++c) {
      const double g = rule == DeltaRule::gdn ? gdn_log_decay(in, opt, i, i % s.HV)
                                              : in.g->data[at(i * s.K + c)];
      a[at(i * s.K + c)] = std::exp(g);
    }
  }
  return a;
}

void decay_backward(DeltaRule rule, const DeltaInputs& in, const DeltaOptions& opt, const Sizes& s,
                    const Coefs& coefs, const std::vector<double>& da, DeltaBackward& out) {
  out.dg = Dense(in.g->dims);  // padding rows (t >= L) stay 0: their decay may be NaN
  if (rule != DeltaRule::gdn) {
    for (int64_t j = 0; j < s.L * s.HV * s.K; ++j) out.dg.data[at(j)] = da[at(j)] * coefs.a[at(j)];
    return;
  }
  if (opt.safe_gate) {
    out.d_a_log = Dense({s.HV});
    out.d_dt_bias = Dense({s.HV});
  }
  for (int64_t i = 0; i < s.L * s.HV; ++i) {
    double d_log = 0;  // d / d(log-decay), summed over the K channels it was broadcast to
    for (int64_t c = 0; c < s.K; ++c) d_log += da[at(i * s.K + c)] * coefs.a[at(i * s.K + c)];
    if (!opt.safe_gate) {
      out.dg.data[at(i)] = d_log;
      continue;
    }
    const int64_t h = i % s.HV;
    const double z = in.g->data[at(i)] + in.dt_bias->data[at(h)];
    const double dz = -d_log * std::exp(in.a_log->data[at(h)]) * sigmoid(z);
    out.dg.data[at(i)] = dz;
    out.d_dt_bias.data[at(h)] += dz;
    out.d_a_log.data[at(h)] += d_log * gdn_log_decay(in, opt, i, h);
  }
}

// gdn and kda erase and write with one beta per token and head (c = u = beta); gdn2 erases with
// b per key channel and writes with w per value channel.
std::vector<double> erase_gate(DeltaRule rule, const DeltaInputs& in, const DeltaOptions& opt,
                               const Sizes& s) {
  if (rule == DeltaRule::gdn2) return in.b->data;
  std::vector<double> c(at(s.T * s.HV * s.K));
  for (int64_t i = 0; i < s.T * s.HV; ++i) {
    for (int64_t e = 0; e < s.K; ++e) c[at(i * s.K + e)] = gdn_beta(in, opt, i);
  }
  return c;
}

std::vector<double> write_gate(DeltaRule rule, const DeltaInputs& in, const DeltaOptions& opt,
                               const Sizes& s) {
  if (rule == DeltaRule::gdn2) return in.w->data;
  std::vector<double> u(at(s.T * s.HV * s.V));
  for (int64_t i = 0; i < s.T * s.HV; ++i) {
    for (int64_t j = 0; j < s.V; ++j) u[at(i * s.V + j)] = gdn_beta(in, opt, i);
  }
  return u;
}

// dc [T, HV, K] and du [T, HV, V] to db and dw (gdn2), or to dbeta: beta feeds every channel of
// both gates, so its gradient sums them (then through the sigmoid when on).
void gates_backward(DeltaRule rule, const DeltaInputs& in, const DeltaOptions& opt, const Sizes& s,
                    const std::vector<double>& dc, const std::vector<double>& du,
                    DeltaBackward& out) {
  if (rule == DeltaRule::gdn2) {
    out.db = Dense(in.b->dims);
    out.db.data = dc;
    out.dw = Dense(in.w->dims);
    out.dw.data = du;
    return;
  }
  out.dbeta = Dense(in.beta->dims);
  for (int64_t i = 0; i < s.L * s.HV; ++i) {
    double d = 0;
    for (int64_t e = 0; e < s.K; ++e) d += dc[at(i * s.K + e)];
    for (int64_t j = 0; j < s.V; ++j) d += du[at(i * s.V + j)];
    if (opt.use_beta_sigmoid) {
      const double p = sigmoid(in.beta->data[at(i)]);
      d *= p * (1 - p);
    }
    out.dbeta.data[at(i)] = d;
  }
}

// ---- the shared recurrence ----

// Everything the recurrence reads, after validation and the input transforms.
struct Prepared {
  Sizes s;
  Rows q, k;  // q carries the scale
  Coefs coefs;
};

Prepared prepare(DeltaRule rule, const DeltaInputs& in, const DeltaOptions& opt) {
  const Sizes s = validate(rule, in, opt);
  return {s,
          transform_rows(*in.q, s, opt.use_qk_l2norm, opt.scale),
          transform_rows(*in.k, s, opt.use_qk_l2norm, 1.0),
          {decay(rule, in, opt, s), erase_gate(rule, in, opt, s), write_gate(rule, in, opt, s)}};
}

// One token's operands for value head h.
struct Token {
  const double *q, *k, *v, *a, *c, *u;
};

Token token(const Prepared& p, const Dense& v, int64_t t, int64_t h) {
  const Sizes& s = p.s;
  const int64_t qk = (t * s.H + h / s.group) * s.K, key = (t * s.HV + h) * s.K,
                val = (t * s.HV + h) * s.V;
  return {&p.q.y[at(qk)],      &p.k.y[at(qk)],      &v.data[at(val)],
          &p.coefs.a[at(key)], &p.coefs.c[at(key)], &p.coefs.u[at(val)]};
}

// Applies one token to S [K, V] in place: decay, erase at c * k, write u * v at k. Leaves the
// written row n = u * v - S'^T (c * k) (S' the decayed state) for the backward.
void step(const Sizes& s, const Token& x, double* S, double* n) {
  for (int64_t i = 0; i < s.K; ++i) {
    for (int64_t j = 0; j < s.V; ++j) S[i * s.V + j] *= x.a[i];
  }
  for (int64_t j = 0; j < s.V; ++j) {
    double e = 0;
    for (int64_t i = 0; i < s.K; ++i) e += S[i * s.V + j] * x.c[i] * x.k[i];
    n[j] = x.u[j] * x.v[j] - e;
  }
  for (int64_t i = 0; i < s.K; ++i) {
    for (int64_t j = 0; j < s.V; ++j) S[i * s.V + j] += x.k[i] * n[j];
  }
}

// Runs every (sequence, value head). `history`, when given, receives the state before each
// token, [T, HV, K, V], so the backward can recompute each step.
DeltaForward run(const Prepared& p, const DeltaInputs& in, std::vector<double>* history) {
  const Sizes& s = p.s;
  const int64_t kv = s.K * s.V;
  DeltaForward out{Dense({s.T, s.HV, s.V}), Dense({s.B, s.HV, s.K, s.V})};
  std::vector<double> S(at(kv)), n(at(s.V));
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.HV; ++h) {
      const int64_t state = (b * s.HV + h) * kv;
      for (int64_t i = 0; i < kv; ++i) {
        S[at(i)] = in.initial_state ? in.initial_state->data[at(state + i)] : 0.0;
      }
      for (int64_t t = in.cu_seqlens[at(b)]; t < in.cu_seqlens[at(b + 1)]; ++t) {
        if (history) std::copy(S.begin(), S.end(), history->begin() + (t * s.HV + h) * kv);
        const Token x = token(p, *in.v, t, h);
        step(s, x, S.data(), n.data());
        double* o = &out.o.data[at((t * s.HV + h) * s.V)];
        for (int64_t j = 0; j < s.V; ++j) {
          for (int64_t i = 0; i < s.K; ++i) o[j] += S[at(i * s.V + j)] * x.q[i];
        }
      }
      std::copy(S.begin(), S.end(), out.final_state.data.begin() + state);
    }
  }
  return out;
}

// What the backward of every step adds to: the gradients w.r.t. what the recurrence reads.
struct StepGrads {
  std::vector<double> dq, dk, da, dc, du;
};
// Per-step scratch; dS carries the state's gradient from step to step, backwards.
struct StepScratch {
  std::vector<double> S, dS, n, dn;
};

// The backward of token t's step of value head h: on entry dS is the gradient w.r.t. the state
// after the step, on return w.r.t. the state before it (`prev`).
void step_backward(const Prepared& p, const DeltaInputs& in, int64_t t, int64_t h,
                   const double* prev, const Dense& d_o, StepScratch& w, StepGrads& g, Dense& dv) {
  const Sizes& s = p.s;
  const int64_t kv = s.K * s.V;
  const Token x = token(p, *in.v, t, h);
  const int64_t qk = (t * s.H + h / s.group) * s.K, key = (t * s.HV + h) * s.K,
                val = (t * s.HV + h) * s.V;
  std::copy(prev, prev + kv, w.S.begin());
  step(s, x, w.S.data(), w.n.data());
  // o = S^T q
  const double* d_out = &d_o.data[at(val)];
  for (int64_t i = 0; i < s.K; ++i) {
    for (int64_t j = 0; j < s.V; ++j) {
      g.dq[at(qk + i)] += w.S[at(i * s.V + j)] * d_out[j];
      w.dS[at(i * s.V + j)] += x.q[i] * d_out[j];
    }
  }
  // S = S' + k n^T
  for (int64_t j = 0; j < s.V; ++j) {
    double dn = 0;
    for (int64_t i = 0; i < s.K; ++i) dn += w.dS[at(i * s.V + j)] * x.k[i];
    w.dn[at(j)] = dn;
    // n = u * v - e
    g.du[at(val + j)] = dn * x.v[j];
    dv.data[at(val + j)] = dn * x.u[j];
  }
  // e = S'^T (c * k) with S' = diag(a) prev: S' gets -(c * k) dn^T besides dS
  for (int64_t i = 0; i < s.K; ++i) {
    double dk_i = 0, dck_i = 0, da_i = 0;
    for (int64_t j = 0; j < s.V; ++j) {
      const int64_t ij = i * s.V + j;
      dk_i += w.dS[at(ij)] * w.n[at(j)];
      dck_i -= x.a[i] * prev[ij] * w.dn[at(j)];
      w.dS[at(ij)] -= x.c[i] * x.k[i] * w.dn[at(j)];
      da_i += w.dS[at(ij)] * prev[ij];
      w.dS[at(ij)] *= x.a[i];
    }
    g.dk[at(qk + i)] += dk_i + dck_i * x.c[i];
    g.dc[at(key + i)] = dck_i * x.k[i];
    g.da[at(key + i)] = da_i;
  }
}

}  // namespace

DeltaForward delta_forward(DeltaRule rule, const DeltaInputs& in, const DeltaOptions& opt) {
  return run(prepare(rule, in, opt), in, nullptr);
}

DeltaBackward delta_backward(DeltaRule rule, const DeltaInputs& in, const Dense& d_o,
                             const Dense* d_final_state, const DeltaOptions& opt) {
  const Prepared p = prepare(rule, in, opt);
  const Sizes& s = p.s;
  expect_dims(rule, "d_o", d_o, {s.T, s.HV, s.V}, "[T, HV, V]");
  if (d_final_state) {
    expect_dims(rule, "d_final_state", *d_final_state, {s.B, s.HV, s.K, s.V}, "[B, HV, K, V]");
  }
  const int64_t kv = s.K * s.V;
  std::vector<double> history(at(s.T * s.HV * kv));
  run(p, in, &history);

  DeltaBackward out;
  out.dv = Dense({s.T, s.HV, s.V});
  if (in.initial_state) out.d_initial_state = Dense(in.initial_state->dims);
  // Gradients w.r.t. what the recurrence reads; the transforms chain them to the raw inputs.
  StepGrads g{std::vector<double>(p.q.y.size()), std::vector<double>(p.k.y.size()),
              std::vector<double>(p.coefs.a.size()), std::vector<double>(p.coefs.c.size()),
              std::vector<double>(p.coefs.u.size())};
  StepScratch w{std::vector<double>(at(kv)), std::vector<double>(at(kv)),
                std::vector<double>(at(s.V)), std::vector<double>(at(s.V))};
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.HV; ++h) {
      const int64_t state = (b * s.HV + h) * kv;
      for (int64_t i = 0; i < kv; ++i)
        w.dS[at(i)] = d_final_state ? d_final_state->data[at(state + i)] : 0.0;
      for (int64_t t = in.cu_seqlens[at(b + 1)] - 1; t >= in.cu_seqlens[at(b)]; --t)
        step_backward(p, in, t, h, &history[at((t * s.HV + h) * kv)], d_o, w, g, out.dv);
      if (in.initial_state)
        std::copy(w.dS.begin(), w.dS.end(), out.d_initial_state.data.begin() + state);
    }
  }
  out.dq = transform_rows_backward(*in.q, s, opt.use_qk_l2norm, opt.scale, p.q, g.dq);
  out.dk = transform_rows_backward(*in.k, s, opt.use_qk_l2norm, 1.0, p.k, g.dk);
  decay_backward(rule, in, opt, s, p.coefs, g.da, out);
  gates_backward(rule, in, opt, s, g.dc, g.du, out);
  return out;
}

}  // namespace eagle::reference
