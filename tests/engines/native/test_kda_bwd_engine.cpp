// The native kda / gdn / gdn2 backward engine (native_kda_bwd):
//  * on the CPU (float64): the backward as the kernels factor it equals the reference's, and
//    gdn's backward equals kda's with gdn's gate broadcast over K and dg summed over K (the
//    reduction the engine runs gdn_bwd through, safe_gate and use_beta_sigmoid included);
//  * planning for a stand-in H200: it serves kda_bwd, gdn_bwd and gdn2_bwd first, and what it
//    declines, with the reason;
//  * on an H200, against the reference engine's backward (float64) on fresh random inputs:
//    outputs poisoned, NaN in every padding row of every input and of d_o, lengths 0, 1, C - 1,
//    C, C + 1 and a long one, M < N tails, GQA 1, 2 and 4, each option on and off (l2 norm,
//    initial_state, d_final_state, scale; gdn's safe_gate and use_beta_sigmoid), the three rules,
//    both io dtypes, K = V in {64, 128}; every gradient's padding rows must be exactly 0.
//
// Tolerance: as the forward, the kernels round their chunk operands (the forward's W, U, v', h
// and the backward's dh, dv', dW, d(w v), d(bk e^G)) to bf16 before each tensor-core product;
// each gradient is held to 3e-2 relative (root-mean-square error over the gradient's norm).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#ifdef EAGLE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "engines/native/linear_attention/kda_kernels.hpp"
#include "engines/reference/math/linear_attention.hpp"
#include "native_structured.hpp"
#include "planned_runs.hpp"

namespace eagle {
namespace {

using test::Arrays;
using test::kGpu;

int64_t kda_bwd_engine() {
  return test::native::engine("linear_attention_bwd", "native_kda_bwd");
}

// ---- the chunk algebra of the backward on the host (float64) ---------------------------------

struct HostCase {
  std::vector<int64_t> cu;
  int64_t h, hv, d;
  bool gdn2, l2;
};

using Mat = std::vector<double>;  // row-major

// Every gradient the reference computed for its rule and options (the others stay empty) within
// `tol` of the same gradient of `got`.
void expect_gradients_close(const reference::DeltaBackward& got,
                            const reference::DeltaBackward& want, double tol) {
  using Field = reference::Dense reference::DeltaBackward::*;
  const std::pair<const char*, Field> fields[] = {
      {"dq", &reference::DeltaBackward::dq},
      {"dk", &reference::DeltaBackward::dk},
      {"dv", &reference::DeltaBackward::dv},
      {"dg", &reference::DeltaBackward::dg},
      {"dbeta", &reference::DeltaBackward::dbeta},
      {"db", &reference::DeltaBackward::db},
      {"dw", &reference::DeltaBackward::dw},
      {"d_initial_state", &reference::DeltaBackward::d_initial_state},
      {"d_a_log", &reference::DeltaBackward::d_a_log},
      {"d_dt_bias", &reference::DeltaBackward::d_dt_bias}};
  for (const auto& [name, field] : fields) {
    if ((want.*field).data.empty()) continue;
    SCOPED_TRACE(name);
    EXPECT_CLOSE((got.*field).data, (want.*field).data, tol);
  }
}

// The backward written exactly as the kernels factor it (dstate, dmat, dqkg, finish), without
// rounding, for K = V = d.
reference::DeltaBackward chunked_backward(const HostCase& c, const reference::DeltaInputs& in,
                                          const reference::Dense& d_o, const reference::Dense& dht,
                                          double scale) {
  const int64_t C = 64, D = c.d, HV = c.hv, H = c.h, group = HV / H, N = c.cu.size() - 1;
  const int64_t T = c.cu.back();
  reference::DeltaBackward out;
  out.dq = reference::Dense({T, H, D});
  out.dk = reference::Dense({T, H, D});
  out.dv = reference::Dense({T, HV, D});
  out.dg = reference::Dense({T, HV, D});
  if (c.gdn2) {
    out.db = reference::Dense({T, HV, D});
    out.dw = reference::Dense({T, HV, D});
  } else {
    out.dbeta = reference::Dense({T, HV});
  }
  out.d_initial_state = reference::Dense({N, HV, D, D});
  // q~ and k~ per (row, head) and their inverse norms.
  std::vector<double> qn(T * H * D), kn(T * H * D), rq(T * H, 1.0), rk(T * H, 1.0);
  for (int64_t r = 0; r < T * H; ++r) {
    double sq = 0, sk = 0;
    for (int64_t i = 0; i < D; ++i) {
      sq += in.q->data[r * D + i] * in.q->data[r * D + i];
      sk += in.k->data[r * D + i] * in.k->data[r * D + i];
    }
    if (c.l2) rq[r] = 1 / std::sqrt(sq + 1e-6), rk[r] = 1 / std::sqrt(sk + 1e-6);
    for (int64_t i = 0; i < D; ++i) {
      qn[r * D + i] = scale * rq[r] * in.q->data[r * D + i];
      kn[r * D + i] = rk[r] * in.k->data[r * D + i];
    }
  }
  std::vector<double> pq(T * HV * D), pk(T * HV * D);
  auto at = [&](int64_t t, int64_t h, int64_t i) { return (t * HV + h) * D + i; };
  for (int64_t s = 0; s < N; ++s)
    for (int64_t h = 0; h < HV; ++h) {
      const int64_t hq = h / group;
      struct Chunk {
        int64_t r0, n;
        Mat Q, K, BK, G, Tm, W, U, Vn, M, hs, dh, dvn;
      };
      std::vector<Chunk> chunks;
      Mat S(D * D, 0.0);
      if (in.initial_state)
        for (int64_t i = 0; i < D * D; ++i) S[i] = in.initial_state->data[(s * HV + h) * D * D + i];
      for (int64_t r0 = c.cu[s]; r0 < c.cu[s + 1]; r0 += C) {
        Chunk x;
        x.r0 = r0;
        const int64_t n = x.n = std::min(C, c.cu[s + 1] - r0);
        x.Q = x.K = x.BK = x.G = x.W = x.U = x.Vn = Mat(n * D);
        x.Tm = x.M = Mat(n * n, 0.0);
        for (int64_t r = 0; r < n; ++r)
          for (int64_t i = 0; i < D; ++i) {
            const int64_t t = r0 + r;
            x.Q[r * D + i] = qn[(t * H + hq) * D + i];
            x.K[r * D + i] = kn[(t * H + hq) * D + i];
            const double b = c.gdn2 ? in.b->data[at(t, h, i)] : in.beta->data[t * HV + h];
            x.BK[r * D + i] = b * x.K[r * D + i];
            x.G[r * D + i] = (r ? x.G[(r - 1) * D + i] : 0.0) + in.g->data[at(t, h, i)];
          }
        auto E = [&](int64_t r, int64_t j, int64_t i) {
          return std::exp(x.G[r * D + i] - x.G[j * D + i]);
        };
        Mat A(n * n, 0.0);
        for (int64_t r = 0; r < n; ++r)
          for (int64_t j = 0; j <= r; ++j)
            for (int64_t i = 0; i < D; ++i) {
              if (j < r) A[r * n + j] += x.BK[r * D + i] * x.K[j * D + i] * E(r, j, i);
              x.M[r * n + j] += x.Q[r * D + i] * x.K[j * D + i] * E(r, j, i);
            }
        for (int64_t r = 0; r < n; ++r) {
          x.Tm[r * n + r] = 1;
          for (int64_t col = 0; col < r; ++col) {
            double v = 0;
            for (int64_t m = col; m < r; ++m) v -= A[r * n + m] * x.Tm[m * n + col];
            x.Tm[r * n + col] = v;
          }
        }
        for (int64_t r = 0; r < n; ++r)
          for (int64_t i = 0; i < D; ++i) {
            double w = 0, u = 0;
            for (int64_t m = 0; m <= r; ++m) {
              const double wg =
                  c.gdn2 ? in.w->data[at(r0 + m, h, i)] : in.beta->data[(r0 + m) * HV + h];
              w += x.Tm[r * n + m] * x.BK[m * D + i] * std::exp(x.G[m * D + i]);
              u += x.Tm[r * n + m] * wg * in.v->data[at(r0 + m, h, i)];
            }
            x.W[r * D + i] = w;
            x.U[r * D + i] = u;
          }
        x.hs = S;
        for (int64_t r = 0; r < n; ++r)
          for (int64_t col = 0; col < D; ++col) {
            double v = x.U[r * D + col];
            for (int64_t i = 0; i < D; ++i) v -= x.W[r * D + i] * S[i * D + col];
            x.Vn[r * D + col] = v;
          }
        Mat next(D * D);
        for (int64_t i = 0; i < D; ++i)
          for (int64_t col = 0; col < D; ++col) {
            double v = std::exp(x.G[(n - 1) * D + i]) * S[i * D + col];
            for (int64_t r = 0; r < n; ++r)
              v += x.K[r * D + i] * std::exp(x.G[(n - 1) * D + i] - x.G[r * D + i]) *
                   x.Vn[r * D + col];
            next[i * D + col] = v;
          }
        S = next;
        chunks.push_back(std::move(x));
      }
      // dstate, backwards.
      Mat dh(D * D);
      for (int64_t i = 0; i < D * D; ++i) dh[i] = dht.data[(s * HV + h) * D * D + i];
      for (auto it = chunks.rbegin(); it != chunks.rend(); ++it) {
        Chunk& x = *it;
        const int64_t n = x.n;
        auto dO = [&](int64_t r, int64_t col) { return d_o.data[at(x.r0 + r, h, col)]; };
        x.dh = dh;
        x.dvn = Mat(n * D, 0.0);
        for (int64_t r = 0; r < n; ++r)
          for (int64_t col = 0; col < D; ++col) {
            double v = 0;
            for (int64_t i = r; i < n; ++i) v += x.M[i * n + r] * dO(i, col);
            for (int64_t i = 0; i < D; ++i)
              v += x.K[r * D + i] * std::exp(x.G[(n - 1) * D + i] - x.G[r * D + i]) *
                   dh[i * D + col];
            x.dvn[r * D + col] = v;
          }
        Mat prev(D * D);
        for (int64_t i = 0; i < D; ++i)
          for (int64_t col = 0; col < D; ++col) {
            double v = std::exp(x.G[(n - 1) * D + i]) * dh[i * D + col];
            for (int64_t r = 0; r < n; ++r)
              v += x.Q[r * D + i] * std::exp(x.G[r * D + i]) * dO(r, col) -
                   x.W[r * D + i] * x.dvn[r * D + col];
            prev[i * D + col] = v;
          }
        dh = prev;
      }
      for (int64_t i = 0; i < D * D; ++i)
        out.d_initial_state.data[(s * HV + h) * D * D + i] = dh[i];
      // dmat and dqkg per chunk.
      for (const Chunk& x : chunks) {
        const int64_t n = x.n;
        auto dO = [&](int64_t r, int64_t col) { return d_o.data[at(x.r0 + r, h, col)]; };
        Mat dqg(n * D, 0.0), dkl(n * D, 0.0), dW(n * D, 0.0), dWv(n * D, 0.0), dbg(n * D, 0.0);
        Mat dM(n * n, 0.0), dA(n * n, 0.0);
        std::vector<double> dgl(D, 0.0);
        for (int64_t r = 0; r < n; ++r)
          for (int64_t i = 0; i < D; ++i)
            for (int64_t col = 0; col < D; ++col) {
              dqg[r * D + i] += dO(r, col) * x.hs[i * D + col];
              dkl[r * D + i] += x.Vn[r * D + col] * x.dh[i * D + col];
              dW[r * D + i] -= x.dvn[r * D + col] * x.hs[i * D + col];
            }
        for (int64_t i = 0; i < D; ++i) {
          for (int64_t col = 0; col < D; ++col) dgl[i] += x.hs[i * D + col] * x.dh[i * D + col];
          dgl[i] *= std::exp(x.G[(n - 1) * D + i]);
        }
        for (int64_t r = 0; r < n; ++r)
          for (int64_t j = 0; j <= r; ++j)
            for (int64_t col = 0; col < D; ++col) dM[r * n + j] += dO(r, col) * x.Vn[j * D + col];
        for (int64_t r = 0; r < n; ++r)
          for (int64_t col = 0; col < D; ++col)
            for (int64_t m = r; m < n; ++m) {
              dWv[r * D + col] += x.Tm[m * n + r] * x.dvn[m * D + col];
              dbg[r * D + col] += x.Tm[m * n + r] * dW[m * D + col];
            }
        for (int64_t r = 0; r < n; ++r)
          for (int64_t j = 0; j < r; ++j)
            for (int64_t col = 0; col < D; ++col)
              dA[r * n + j] -=
                  dWv[r * D + col] * x.U[j * D + col] + dbg[r * D + col] * x.W[j * D + col];
        Mat dG(n * D), last(n * D);
        for (int64_t r = 0; r < n; ++r) {
          const int64_t t = x.r0 + r;
          double dbeta = 0;
          for (int64_t col = 0; col < D; ++col) {
            const double v = in.v->data[at(t, h, col)];
            if (c.gdn2) {
              out.dv.data[at(t, h, col)] = dWv[r * D + col] * in.w->data[at(t, h, col)];
              out.dw.data[at(t, h, col)] = dWv[r * D + col] * v;
            } else {
              out.dv.data[at(t, h, col)] = dWv[r * D + col] * in.beta->data[t * HV + h];
              dbeta += dWv[r * D + col] * v;
            }
          }
          for (int64_t i = 0; i < D; ++i) {
            const double gi = x.G[r * D + i];
            double dq_m = 0, dbk_a = 0, dk_m = 0, dk_a = 0;
            for (int64_t j = 0; j <= r; ++j) {
              const double kj = x.K[j * D + i] * std::exp(gi - x.G[j * D + i]);
              dq_m += dM[r * n + j] * kj;
              dbk_a += dA[r * n + j] * kj;
            }
            for (int64_t m = r; m < n; ++m) {
              const double f = std::exp(x.G[m * D + i] - gi);
              dk_m += dM[m * n + r] * x.Q[m * D + i] * f;
              dk_a += dA[m * n + r] * x.BK[m * D + i] * f;
            }
            const double dq = dqg[r * D + i] * std::exp(gi) + dq_m;
            const double dbk = dbg[r * D + i] * std::exp(gi) + dbk_a;
            const double dk_l = dkl[r * D + i] * std::exp(x.G[(n - 1) * D + i] - gi);
            const double dk_part = dk_l + dk_m + dk_a;
            const double b = c.gdn2 ? in.b->data[at(t, h, i)] : in.beta->data[t * HV + h];
            const double kc = x.K[r * D + i];
            dG[r * D + i] = x.Q[r * D + i] * dq + x.BK[r * D + i] * dbk - kc * dk_part;
            last[r * D + i] = dk_l * kc;
            pq[at(t, h, i)] = dq;
            pk[at(t, h, i)] = dk_part + b * dbk;
            if (c.gdn2)
              out.db.data[at(t, h, i)] = dbk * kc;
            else
              dbeta += dbk * kc;
          }
          if (!c.gdn2) out.dbeta.data[t * HV + h] = dbeta;
        }
        for (int64_t i = 0; i < D; ++i) {
          double acc = dgl[i];
          for (int64_t r = 0; r < n; ++r) acc += last[r * D + i];
          for (int64_t r = n - 1; r >= 0; --r) {
            acc += dG[r * D + i];
            out.dg.data[at(x.r0 + r, h, i)] = acc;
          }
        }
      }
    }
  // finish: the group sums and the norms' backward.
  for (int64_t t = 0; t < T; ++t)
    for (int64_t hq = 0; hq < H; ++hq)
      for (int which = 0; which < 2; ++which) {
        const reference::Dense& raw = which ? *in.k : *in.q;
        const double r = which ? rk[t * H + hq] : rq[t * H + hq];
        const double mul = which ? 1.0 : scale;
        std::vector<double> d(D, 0.0);
        double dot = 0;
        for (int64_t i = 0; i < D; ++i) {
          for (int64_t m = 0; m < group; ++m) d[i] += (which ? pk : pq)[at(t, hq * group + m, i)];
          dot += raw.data[(t * H + hq) * D + i] * d[i];
        }
        reference::Dense& o = which ? out.dk : out.dq;
        for (int64_t i = 0; i < D; ++i) {
          const double x = raw.data[(t * H + hq) * D + i];
          o.data[(t * H + hq) * D + i] = mul * r * (d[i] - (c.l2 ? x * r * r * dot : 0.0));
        }
      }
  return out;
}

reference::Dense host_random(reference::Dims dims, double lo, double hi) {
  reference::Dense x(dims);
  x.data = test::random_values(x.data.size(), lo, hi);
  return x;
}

TEST(KdaBwdChunkAlgebra, TheChunkedBackwardEqualsTheReference) {
  std::printf("%s\n", test::reproduce_line().c_str());
  for (bool gdn2 : {false, true})
    for (bool l2 : {false, true}) {
      SCOPED_TRACE(std::string(gdn2 ? "gdn2" : "kda") + (l2 ? " l2" : ""));
      const HostCase c{{0, 0, 1, 64, 127, 192, 257}, 1, 2, 4, gdn2, l2};
      const int64_t T = c.cu.back(), N = c.cu.size() - 1;
      const reference::Dense q = host_random({T, c.h, c.d}, -1, 1),
                             k = host_random({T, c.h, c.d}, -0.4, 0.4),
                             v = host_random({T, c.hv, c.d}, -1, 1),
                             g = host_random({T, c.hv, c.d}, -3, -0.01),
                             beta = host_random({T, c.hv}, 0.1, 0.9),
                             b = host_random({T, c.hv, c.d}, 0.1, 0.9),
                             w = host_random({T, c.hv, c.d}, 0.2, 1),
                             h0 = host_random({N, c.hv, c.d, c.d}, -0.5, 0.5),
                             d_o = host_random({T, c.hv, c.d}, -1, 1),
                             dht = host_random({N, c.hv, c.d, c.d}, -0.5, 0.5);
      reference::DeltaInputs in;
      in.q = &q;
      in.k = &k;
      in.v = &v;
      in.g = &g;
      if (gdn2) {
        in.b = &b;
        in.w = &w;
      } else {
        in.beta = &beta;
      }
      in.initial_state = &h0;
      in.cu_seqlens = c.cu;
      const double scale = 0.5;
      const reference::DeltaBackward want =
          reference::delta_backward(gdn2 ? reference::DeltaRule::gdn2 : reference::DeltaRule::kda,
                                    in, d_o, &dht, {scale, l2, false, false});
      const reference::DeltaBackward got = chunked_backward(c, in, d_o, dht, scale);
      expect_gradients_close(got, want, 1e-10);
    }
}

// ---- gdn as kda with a broadcast gate (float64) ----------------------------------------------

double softplus(double z) {
  return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z));
}
double sigmoid(double z) {
  return 1 / (1 + std::exp(-z));
}

// gdn's backward computed as the engine computes it (kda::gdn_backward), in float64: the gate
// (after safe_gate) broadcast over K and beta after its sigmoid feed the reference's kda
// backward; dg is the sum of kda's dg over K, chained through safe_gate, and dbeta through the
// sigmoid. Rows at or past cu.back() are padding: 0 in every gradient.
reference::DeltaBackward gdn_via_kda(const reference::DeltaInputs& in, const reference::Dense& d_o,
                                     const reference::Dense* dht,
                                     const reference::DeltaOptions& opt) {
  const int64_t T = in.g->dims[0], HV = in.g->dims[1], K = in.q->dims[2];
  const int64_t L = in.cu_seqlens.back();
  reference::Dense gate({T, HV, K}), beta({T, HV});
  for (int64_t i = 0; i < L * HV; ++i) {
    const int64_t h = i % HV;
    const double g = in.g->data[i];
    const double a =
        opt.safe_gate ? -std::exp(in.a_log->data[h]) * softplus(g + in.dt_bias->data[h]) : g;
    for (int64_t c = 0; c < K; ++c) gate.data[i * K + c] = a;
    beta.data[i] = opt.use_beta_sigmoid ? sigmoid(in.beta->data[i]) : in.beta->data[i];
  }
  reference::DeltaInputs k = in;
  k.g = &gate;
  k.beta = &beta;
  k.a_log = k.dt_bias = nullptr;
  reference::DeltaOptions ko = opt;
  ko.safe_gate = ko.use_beta_sigmoid = false;
  reference::DeltaBackward r =
      reference::delta_backward(reference::DeltaRule::kda, k, d_o, dht, ko);
  reference::Dense dg({T, HV});
  if (opt.safe_gate) {
    r.d_a_log = reference::Dense({HV});
    r.d_dt_bias = reference::Dense({HV});
  }
  for (int64_t i = 0; i < L * HV; ++i) {
    const int64_t h = i % HV;
    double d_log = 0;
    for (int64_t c = 0; c < K; ++c) d_log += r.dg.data[i * K + c];
    dg.data[i] = d_log;
    if (opt.safe_gate) {
      const double z = in.g->data[i] + in.dt_bias->data[h], e = std::exp(in.a_log->data[h]);
      dg.data[i] = -d_log * e * sigmoid(z);
      r.d_dt_bias.data[h] += dg.data[i];
      r.d_a_log.data[h] += d_log * gate.data[i * K];
    }
    if (opt.use_beta_sigmoid) r.dbeta.data[i] *= beta.data[i] * (1 - beta.data[i]);
  }
  r.dg = dg;
  return r;
}

TEST(GdnBwdAsKda, TheBroadcastGateReductionIsExact) {
  std::printf("%s\n", test::reproduce_line().c_str());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<int64_t> cu = {0, 0, 1, 7, 20, 33};
  const int64_t H = 1, HV = 2, K = 4, V = 3, pad = 2, T = cu.back() + pad, N = cu.size() - 1;
  for (bool safe_gate : {false, true})
    for (bool sig : {false, true})
      for (bool l2 : {false, true}) {
        SCOPED_TRACE(std::string(safe_gate ? "safe_gate " : "") + (sig ? "beta_sigmoid " : "") +
                     (l2 ? "l2" : ""));
        reference::Dense q = host_random({T, H, K}, -1, 1), k = host_random({T, H, K}, -0.5, 0.5),
                         v = host_random({T, HV, V}, -1, 1),
                         g = safe_gate ? host_random({T, HV}, -1, 1)
                                       : host_random({T, HV}, -1.5, -0.01),
                         beta = sig ? host_random({T, HV}, -2, 2) : host_random({T, HV}, 0.1, 0.9),
                         a_log = host_random({HV}, -1, 0.5), dt_bias = host_random({HV}, -1, 1),
                         h0 = host_random({N, HV, K, V}, -0.5, 0.5),
                         d_o = host_random({T, HV, V}, -1, 1),
                         dht = host_random({N, HV, K, V}, -0.5, 0.5);
        // Padding rows NaN: neither side may read them.
        for (reference::Dense* x : {&q, &k, &v, &g, &beta, &d_o}) {
          const std::size_t per_row = x->data.size() / T;
          std::fill(x->data.begin() + cu.back() * per_row, x->data.end(), nan);
        }
        reference::DeltaInputs in;
        in.q = &q;
        in.k = &k;
        in.v = &v;
        in.g = &g;
        in.beta = &beta;
        in.initial_state = &h0;
        if (safe_gate) {
          in.a_log = &a_log;
          in.dt_bias = &dt_bias;
        }
        in.cu_seqlens = cu;
        const reference::DeltaOptions opt{0.7, l2, safe_gate, sig};
        const reference::DeltaBackward want =
            reference::delta_backward(reference::DeltaRule::gdn, in, d_o, &dht, opt);
        const reference::DeltaBackward got = gdn_via_kda(in, d_o, &dht, opt);
        expect_gradients_close(got, want, 1e-10);
      }
}

// ---- planning for a stand-in H200 -----------------------------------------------------------

struct Spec {
  std::string rule = "kda";  // the forward's rule; the graph holds rule + "_bwd"
  DType io = DType::bf16, gate = DType::f32, state = DType::f32;
  DType param = DType::f32;  // gdn's a_log and dt_bias
  int64_t t = 10, h = 2, hv = 4, dk = 128, dv = 128, slots = 3;
  bool initial_state = true, l2 = false, d_final_state = true;
  bool safe_gate = false, beta_sigmoid = false;  // gdn only
  std::optional<double> scale;
  bool strong_gates = false;  // half of the gates in [-30, -5] (blocks decaying past e^-80)
};

op::Graph bwd_graph(const Spec& s) {
  op::Graph g(s.rule + "_bwd");
  op::Ports ports;
  auto in = [&](const char* name, op::Dims dims, DType d) {
    ports.emplace_back(name, g.tensor({name, std::move(dims), d}));
  };
  in("q", {s.t, s.h, s.dk}, s.io);
  in("k", {s.t, s.h, s.dk}, s.io);
  in("v", {s.t, s.hv, s.dv}, s.io);
  const bool gdn = s.rule == "gdn";
  in("g", gdn ? op::Dims{s.t, s.hv} : op::Dims{s.t, s.hv, s.dk}, s.gate);
  if (s.rule == "gdn2") {
    in("b", {s.t, s.hv, s.dk}, s.gate);
    in("w", {s.t, s.hv, s.dv}, s.gate);
  } else {
    in("beta", {s.t, s.hv}, s.gate);
  }
  in("cu_seqlens", {s.slots + 1}, DType::i32);
  if (s.initial_state) in("initial_state", {s.slots, s.hv, s.dk, s.dv}, s.state);
  if (gdn && s.safe_gate) {
    in("a_log", {s.hv}, s.param);
    in("dt_bias", {s.hv}, s.param);
  }
  in("d_o", {s.t, s.hv, s.dv}, s.io);
  if (s.d_final_state) in("d_final_state", {s.slots, s.hv, s.dk, s.dv}, s.state);
  op::Attrs attrs = {{"use_qk_l2norm", s.l2}};
  if (gdn) {
    attrs.emplace_back("safe_gate", s.safe_gate);
    attrs.emplace_back("use_beta_sigmoid", s.beta_sigmoid);
  }
  if (s.scale) attrs.emplace_back("scale", *s.scale);
  for (auto& [port, t] : g.op(s.rule + "_bwd", ports, attrs)) t.set_output(true);
  return g;
}

bool kernels_built(const Spec& s) {
  native::kda::Shape shape;
  shape.slots = s.slots;
  shape.heads = static_cast<int>(s.h);
  shape.value_heads = static_cast<int>(s.hv);
  shape.dim = static_cast<int>(s.dk);
  shape.dtype = s.io;
  return native::kda::served(shape);
}

TEST(NativeKdaBwdPlanning, ServesKdaGdnAndGdn2BackwardFirstOnHopper) {
  int combo = 0;
  for (const char* rule : {"kda", "gdn", "gdn2"})
    for (DType d : {DType::bf16, DType::f16})
      for (int64_t dim : {64, 128}) {
        Spec s;
        s.rule = rule;
        s.io = d;
        s.dk = s.dv = dim;
        // gdn's options: every combination once over its four specs.
        s.safe_gate = s.rule == "gdn" && combo % 2 == 0;
        s.beta_sigmoid = s.rule == "gdn" && (combo / 2) % 2 == 0;
        if (s.rule == "gdn") ++combo;
        SCOPED_TRACE(s.rule + " " + std::string(dtype_name(d)) + " " + std::to_string(dim) +
                     (s.safe_gate ? " safe_gate" : "") + (s.beta_sigmoid ? " beta_sigmoid" : ""));
        if (!kernels_built(s)) GTEST_SKIP() << "no sm_90a kernels in this build";
        plan::ExecutionPlans plans = plan::ExecutionPlans::create(
            bwd_graph(s), test::native::manifest(), test::native::hopper());
        const int first = plans.build_plans();
        EXPECT_EQ(plans.at(first).engine_id, kda_bwd_engine()) << plans.describe();
        // The measured points lead: the state and dstate in registers with the long sequences
        // split over two CTAs, the compact prepare with its products' fragments in registers
        // and the tensor-core products; the per-stage schedules follow.
        EXPECT_EQ(plans.at(first).knobs, (plan::Knobs{{"dstate", 3},
                                                      {"intra", 1},
                                                      {"pipeline", 1},
                                                      {"prepare", 2},
                                                      {"schedule", 0},
                                                      {"state", 3}}));
      }
}

TEST(NativeKdaBwdPlanning, DeclinesWhatItDoesNotServeWithTheReason) {
  const auto declines = [](const Spec& s, std::initializer_list<std::string> why) {
    test::sweep::expect_declines(test::native::manifest(), kda_bwd_engine(), bwd_graph(s),
                                 test::native::hopper(), why);
  };
  Spec s;
  s.io = DType::f32;
  declines(s, {"q must be bf16 or f16, not f32"});
  s = Spec();
  s.gate = DType::bf16;
  declines(s, {"the gate g must be f32, not bf16"});
  s = Spec();
  s.rule = "gdn2";
  s.gate = DType::f16;
  declines(s, {"the gate g must be f32"});
  s = Spec();
  s.state = DType::bf16;
  declines(s, {"initial_state must be f32"});
  s = Spec();
  s.initial_state = false;
  s.state = DType::bf16;
  declines(s, {"d_final_state must be f32"});
  s = Spec();
  s.dk = s.dv = 96;
  declines(s, {"serves K = V in {64, 128}, got K = 96, V = 96"});
  s = Spec();
  s.dv = 64;
  declines(s, {"serves K = V in {64, 128}, got K = 128, V = 64"});
  test::sweep::expect_declines(test::native::manifest(), kda_bwd_engine(), bwd_graph(Spec()),
                               test::stand_in_gpu(80), {"serves sm 90 to 90, not sm 80"});
  // gdn_bwd: what it shares with kda_bwd, and safe_gate's parameters.
  s = Spec();
  s.rule = "gdn";
  s.gate = DType::bf16;
  declines(s, {"the gate g must be f32, not bf16"});
  s = Spec();
  s.rule = "gdn";
  s.safe_gate = true;
  s.param = DType::f16;
  declines(s, {"a_log must be f32, not f16"});
  s = Spec();
  s.rule = "gdn";
  s.io = DType::f32;
  declines(s, {"q must be bf16 or f16, not f32"});
  s = Spec();
  s.rule = "gdn";
  s.dk = s.dv = 96;
  declines(s, {"serves K = V in {64, 128}, got K = 96, V = 96"});
  s = Spec();
  s.rule = "gdn";
  s.state = DType::bf16;
  declines(s, {"initial_state must be f32"});
}

// ---- on the GPU, against the reference ------------------------------------------------------

class NativeKdaBwd : public ::testing::Test {
 protected:
  void SetUp() override { EAGLE_SKIP_UNLESS_RUNS_HERE(kda_bwd_engine()); }
};

struct Case {
  std::string name;
  std::vector<int64_t> lens;
  int64_t pad;  // padding rows after the last sequence (NaN in every input and in d_o)
  int64_t h, hv;
};

// Whether a port holds one row per token (else a state or a per-head parameter).
bool per_token(const std::string& port) {
  for (const char* p : {"initial_state", "d_final_state", "a_log", "dt_bias", "d_initial_state",
                        "d_a_log", "d_dt_bias", "cu_seqlens"})
    if (port == p) return false;
  return true;
}

// Log decays like real models': most in [-1, -0.01), a fifth strong in [-5, -1).
Array gate_array(const op::Dims& dims, bool very_strong) {
  std::vector<double> g =
      test::random_values(static_cast<std::size_t>(reference::count(dims)), -1, -0.01);
  const std::vector<double> strong =
      very_strong ? test::random_values(g.size(), -30, -5) : test::random_values(g.size(), -5, -1);
  const std::vector<double> pick = test::random_values(g.size(), 0, 1);
  for (std::size_t i = 0; i < g.size(); ++i)
    if (pick[i] < (very_strong ? 0.5 : 0.2)) g[i] = strong[i];
  return test::from_doubles(g, dims, DType::f32, Device::cpu());
}

Arrays inputs(const op::Graph& g, const test::RaggedRows& rows, const std::vector<int64_t>& cu,
              const Spec& s) {
  Arrays in;
  const op::Node n = g.nodes()[0];
  for (const auto& [port, t] : n.inputs()) {
    Array a;
    if (port == "cu_seqlens") {
      in[t.uid()] = test::from_ints(cu, t.dims(), t.dtype(), Device::cpu());
      continue;
    }
    if (port == "g" && s.safe_gate) {  // logits, as the gdn forward's test draws them
      a = test::random_array(t.dims(), t.dtype(), Device::cpu(), -1, 1);
    } else if (port == "g") {
      a = gate_array(t.dims(), s.strong_gates);
    } else if (port == "k") {
      // Without the norm, keys of about unit norm keep the recurrence contracting.
      const double r = s.l2 ? 1.0 : 1.7 / std::sqrt(static_cast<double>(t.dims()[2]));
      a = test::random_array(t.dims(), t.dtype(), Device::cpu(), -r, r);
    } else if (port == "beta" && s.beta_sigmoid) {  // logits
      a = test::random_array(t.dims(), t.dtype(), Device::cpu(), -2, 2);
    } else if (port == "a_log") {
      a = test::random_array(t.dims(), t.dtype(), Device::cpu(), -1, 0);
    } else if (port == "dt_bias") {
      a = test::random_array(t.dims(), t.dtype(), Device::cpu(), -0.5, 0.5);
    } else if (port == "beta" || port == "b") {
      a = test::random_array(t.dims(), t.dtype(), Device::cpu(), 0.1, 0.9);
    } else if (port == "w") {
      a = test::random_array(t.dims(), t.dtype(), Device::cpu(), 0.2, 1.0);
    } else if (port == "initial_state" || port == "d_final_state") {
      a = test::random_array(t.dims(), t.dtype(), Device::cpu(), -0.5, 0.5);
    } else {
      a = test::random_array(t.dims(), t.dtype(), Device::cpu());
    }
    if (per_token(port)) test::poison_padding(a, rows);
    in[t.uid()] = a;
  }
  return in;
}

std::vector<double> rows_where(const Array& a, const test::RaggedRows& rows, bool padding) {
  const std::vector<double> v = test::values(a);
  const int64_t per_row = a.numel() / a.shape()[0];
  std::vector<double> out;
  for (int64_t r = 0; r < a.shape()[0]; ++r)
    if (rows.is_padding(r) == padding)
      out.insert(out.end(), v.begin() + r * per_row, v.begin() + (r + 1) * per_row);
  return out;
}

// The worst relative error over the gradients; `worst` keeps each port's worst.
double check(const op::Graph& g, const test::RaggedRows& rows, const Arrays& got,
             const Arrays& want, std::map<std::string, double>& worst) {
  double all = 0;
  const op::Node n = g.nodes()[0];
  for (const auto& [port, t] : n.outputs()) {
    if (t.is_virtual()) continue;
    SCOPED_TRACE("gradient " + port);
    const bool tok = per_token(port);
    const std::vector<double> w =
        tok ? rows_where(want.at(t.uid()), rows, false) : test::values(want.at(t.uid()));
    const std::vector<double> x =
        tok ? rows_where(got.at(t.uid()), rows, false) : test::values(got.at(t.uid()));
    const double err = test::rel_error(x, w);
    EXPECT_TRUE(err <= 3e-2) << "relative error " << err;
    if (!(err <= worst[port])) worst[port] = err;
    if (!(err <= all)) all = err;
    if (tok) {
      int nonzero = 0;
      for (double p : rows_where(got.at(t.uid()), rows, true))
        if (!(p == 0)) ++nonzero;
      EXPECT_EQ(nonzero, 0) << "padding rows of " << port << " must be 0";
    }
  }
  return all;
}

// The backward's knobs: the first version's points (wide prepare, exact products) unless given;
// the tests name the others.
struct BwdKnobs {
  int64_t prepare = 0, pipeline = 1, intra = 0, schedule = 0, dstate = 0, state = 0;
};

plan::ExecutionPlans native_plan(const op::Graph& g, BwdKnobs k = {}) {
  plan::ExecutionPlans p = engines::create_execution_plan(g.clone(), kGpu, kda_bwd_engine(),
                                                          {{"schedule", k.schedule},
                                                           {"prepare", k.prepare},
                                                           {"pipeline", k.pipeline},
                                                           {"intra", k.intra},
                                                           {"dstate", k.dstate},
                                                           {"state", k.state}});
  p.build_plans();
  return p;
}

// The reference runs the batch without its padding rows (test::reference_without_padding).
Arrays reference_of(const Spec& padded, const op::Graph& g, const Arrays& in, int64_t active) {
  Spec s = padded;
  s.t = active;
  return test::reference_without_padding(g, bwd_graph(s), in, per_token);
}

std::vector<Case> cases() {
  std::vector<Case> c = {
      {"lengths 0 1 C-1 C C+1", {0, 1, 63, 64, 65}, 7, 2, 2},
      {"M < N: repeated tail, L < T, gqa 2", {70, 130, 0, 0}, 40, 2, 4},
      {"one long sequence, gqa 4", {330}, 3, 1, 4},
  };
  std::vector<int64_t> lens;
  const std::vector<int64_t> cu = test::random_cu_seqlens(4, 150);
  for (std::size_t b = 1; b < cu.size(); ++b) lens.push_back(cu[b] - cu[b - 1]);
  c.push_back({"random lengths", lens, 9, 2, 2});
  return c;
}

// Every case of both rules against the reference, with the knobs given (and, when asked, half
// the gates strong enough that 16-row blocks decay past e^-80).
// `small`: the first case alone in bf16 at D 128, a size compute-sanitizer's racecheck finishes.
void backward_matches_the_reference(BwdKnobs knobs, bool strong_gates = false, bool small = false) {
  std::printf("%s\n", test::reproduce_line().c_str());
  std::map<std::string, double> worst;
  int combo = 0;
  const std::vector<Case> all = small ? std::vector<Case>{cases().front()} : cases();
  const std::vector<DType> dtypes =
      small ? std::vector<DType>{DType::bf16} : std::vector<DType>{DType::bf16, DType::f16};
  const std::vector<int64_t> dims =
      small ? std::vector<int64_t>{128} : std::vector<int64_t>{128, 64};
  for (const Case& c : all)
    for (const char* rule : {"kda", "gdn2"})
      for (DType d : dtypes)
        for (int64_t dim : dims) {
          // The options cycle over the combinations so each is on and off in every case.
          ++combo;
          Spec s;
          s.rule = rule;
          s.io = d;
          s.dk = s.dv = dim;
          s.h = c.h;
          s.hv = c.hv;
          s.l2 = combo % 2 == 0;
          s.initial_state = (combo / 2) % 2 == 0;
          s.d_final_state = (combo % 3) != 0;
          if (combo % 5 == 0) s.scale = 0.3;
          s.strong_gates = strong_gates;
          std::vector<int64_t> cu = {0};
          for (int64_t l : c.lens) cu.push_back(cu.back() + l);
          test::RaggedRows rows = test::rows_of(cu);
          rows.rows += c.pad;
          s.t = rows.rows;
          s.slots = static_cast<int64_t>(c.lens.size());
          SCOPED_TRACE(c.name + " " + rule + " " + std::string(dtype_name(d)) + " D " +
                       std::to_string(dim) + (s.l2 ? " l2" : "") + (s.initial_state ? " h0" : "") +
                       (s.d_final_state ? " dht" : "") + (s.scale ? " scale" : ""));
          const op::Graph g = bwd_graph(s);
          const Arrays in = inputs(g, rows, cu, s);
          const Arrays want = reference_of(s, g, in, cu.back());
          check(g, rows, test::execute(native_plan(g, knobs), in, kGpu), want, worst);
        }
  for (const auto& [port, err] : worst)
    std::printf("worst relative error %s: %.3g\n", port.c_str(), err);
}

TEST_F(NativeKdaBwd, MatchesTheReference) {
  backward_matches_the_reference({});
}

// The recompute's state loop unpipelined (knob pipeline = 0).
TEST_F(NativeKdaBwd, TheUnpipelinedRecomputeMatchesTheReference) {
  backward_matches_the_reference({.pipeline = 0});
}

// The forward's recompute through the compact prepare (knob prepare = 1).
TEST_F(NativeKdaBwd, TheCompactPrepareRecomputeMatchesTheReference) {
  backward_matches_the_reference({.prepare = 1, .intra = 1});
}

// The decay-weighted products on the tensor cores (knob intra = 1): through each block's
// reference row, and with strong gates also the exact route of the blocks decaying past e^-80
// (the exact per-channel kernel beside it for comparison).
TEST_F(NativeKdaBwd, TheTensorCoreDecayProductsMatchTheReference) {
  backward_matches_the_reference({.intra = 1});
  backward_matches_the_reference({.intra = 1}, true);
  backward_matches_the_reference({.intra = 0}, true);
}

// The dstate launch copying the previous chunk's tiles while it computes this one (knob
// dstate = 1), flat and persistent.
TEST_F(NativeKdaBwd, ThePipelinedDstateMatchesTheReference) {
  backward_matches_the_reference({.dstate = 1});
  backward_matches_the_reference({.schedule = 2, .dstate = 1});
}

// The dstate launch with dh transposed in registers (knob dstate = 2), flat and persistent.
TEST_F(NativeKdaBwd, TheDstateRowsLaunchMatchesTheReference) {
  backward_matches_the_reference({.prepare = 1, .intra = 1, .dstate = 2});
  backward_matches_the_reference({.prepare = 1, .intra = 1, .schedule = 2, .dstate = 2});
}

// The persistent schedule (knob schedule = 1: every launch over tasks; 2: the slot launches
// alone; 3: the chunk launches alone), with the other knobs' second points among them.
TEST_F(NativeKdaBwd, ThePersistentScheduleMatchesTheReference) {
  backward_matches_the_reference({.schedule = 1});
  backward_matches_the_reference({.pipeline = 0, .schedule = 2});
  backward_matches_the_reference({.prepare = 1, .intra = 1, .schedule = 3});
}

// Each knob point added for the H200 on one small batch: what the sanitizers run (the tests
// above are too large for racecheck's time).
TEST_F(NativeKdaBwd, EveryKnobPointOnASmallBatch) {
  for (const BwdKnobs& k :
       {BwdKnobs{.prepare = 1, .intra = 1}, BwdKnobs{.intra = 1}, BwdKnobs{.dstate = 1},
        BwdKnobs{.schedule = 2, .dstate = 1}, BwdKnobs{.prepare = 1, .intra = 1, .schedule = 1},
        BwdKnobs{.prepare = 1, .intra = 1, .state = 1},
        BwdKnobs{.prepare = 1, .intra = 1, .state = 2},
        BwdKnobs{.prepare = 1, .intra = 1, .dstate = 2},
        BwdKnobs{.prepare = 1, .intra = 1, .schedule = 2, .dstate = 2, .state = 2},
        BwdKnobs{.prepare = 2, .intra = 1, .dstate = 2, .state = 2},
        BwdKnobs{.prepare = 2, .intra = 1, .dstate = 2, .state = 3},
        BwdKnobs{.prepare = 2, .intra = 1, .dstate = 3, .state = 3},
        BwdKnobs{.prepare = 1, .intra = 1, .schedule = 2, .dstate = 3, .state = 3}}) {
    SCOPED_TRACE("prepare " + std::to_string(k.prepare) + " intra " + std::to_string(k.intra) +
                 " dstate " + std::to_string(k.dstate) + " schedule " + std::to_string(k.schedule) +
                 " state " + std::to_string(k.state));
    backward_matches_the_reference(k, false, true);
  }
  backward_matches_the_reference({.prepare = 1, .intra = 1}, true, true);
}

// gdn_bwd (through the kda backward with the gate broadcast over K): as above, with safe_gate
// (d_a_log, d_dt_bias) and use_beta_sigmoid on and off in every case.
TEST_F(NativeKdaBwd, GdnMatchesTheReference) {
  std::printf("%s\n", test::reproduce_line().c_str());
  std::map<std::string, double> worst;
  int combo = 0;
  for (const Case& c : cases())
    for (DType d : {DType::bf16, DType::f16})
      for (int64_t dim : {128, 64})
        for (bool safe_gate : {false, true}) {
          ++combo;
          Spec s;
          s.rule = "gdn";
          s.io = d;
          s.dk = s.dv = dim;
          s.h = c.h;
          s.hv = c.hv;
          s.safe_gate = safe_gate;
          // Each of these on and off within every case's eight runs.
          s.l2 = (dim == 64) != safe_gate;
          s.beta_sigmoid = (d == DType::f16) != (dim == 64);
          s.initial_state = combo % 3 != 0;
          s.d_final_state = combo % 4 != 1;
          if (combo % 5 == 0) s.scale = 0.3;
          std::vector<int64_t> cu = {0};
          for (int64_t l : c.lens) cu.push_back(cu.back() + l);
          test::RaggedRows rows = test::rows_of(cu);
          rows.rows += c.pad;
          s.t = rows.rows;
          s.slots = static_cast<int64_t>(c.lens.size());
          SCOPED_TRACE(c.name + " gdn " + std::string(dtype_name(d)) + " D " + std::to_string(dim) +
                       (s.l2 ? " l2" : "") + (s.initial_state ? " h0" : "") +
                       (s.d_final_state ? " dht" : "") + (s.scale ? " scale" : "") +
                       (s.safe_gate ? " safe_gate" : "") + (s.beta_sigmoid ? " beta_sigmoid" : ""));
          const op::Graph g = bwd_graph(s);
          const Arrays in = inputs(g, rows, cu, s);
          const Arrays want = reference_of(s, g, in, cu.back());
          check(g, rows, test::execute(native_plan(g), in, kGpu), want, worst);
        }
  for (const auto& [port, err] : worst)
    std::printf("worst relative error %s: %.3g\n", port.c_str(), err);
}

#ifdef EAGLE_HAVE_CUDA
// The timing shape (run by name: --gtest_also_run_disabled_tests): kda backward, bf16,
// H = HV = 32, K = V = 128, T = 32768 in 8 equal sequences, l2 norm on, no initial state; CUDA
// events around 10 runs after 2 warm-up runs, for each layout of the recompute's prepare and
// each route of the decay-weighted products.
// Drawing the inputs on the host takes a while.
void time_the_backward(const op::Graph& g, const Arrays& host, BwdKnobs knobs);

TEST_F(NativeKdaBwd, DISABLED_TimeTheBackward) {
  Spec s;
  s.h = s.hv = 32;
  s.t = 32768;
  s.slots = 8;
  s.initial_state = false;
  s.d_final_state = false;
  s.l2 = true;
  const op::Graph g = bwd_graph(s);
  std::vector<int64_t> cu = {0};
  for (int i = 0; i < 8; ++i) cu.push_back(cu.back() + 4096);
  Arrays host = inputs(g, test::rows_of(cu), cu, s);
  for (int64_t prepare : {0, 1})
    for (int64_t intra : {0, 1}) time_the_backward(g, host, {.prepare = prepare, .intra = intra});
  time_the_backward(g, host, {.prepare = 1, .intra = 1, .dstate = 1});
  time_the_backward(g, host, {.prepare = 1, .intra = 1, .dstate = 2});
  time_the_backward(g, host, {.prepare = 1, .intra = 1, .dstate = 2, .state = 2});
  time_the_backward(g, host, {.prepare = 2, .intra = 1, .dstate = 2, .state = 2});
  time_the_backward(g, host, {.prepare = 2, .intra = 1, .dstate = 2, .state = 3});
  time_the_backward(g, host, {.prepare = 2, .intra = 1, .dstate = 3, .state = 3});
}

void time_the_backward(const op::Graph& g, const Arrays& host, BwdKnobs knobs) {
  const plan::ExecutionPlans plans = native_plan(g, knobs);
  plan::VariantPack pack(plans.layout());
  std::vector<Array> keep;
  for (const auto& [uid, a] : host) {
    keep.push_back(a.to(kGpu));
    pack.set(uid, plan::Operand(keep.back()));
  }
  for (const op::Tensor& t : test::outputs(plans.graph())) {
    keep.push_back(Array::empty(t.dims(), t.dtype(), kGpu));
    pack.set(t.uid(), plan::Operand(keep.back()));
  }
  const Stream stream(kGpu);
  const std::size_t ws_bytes = plans.workspace_size();
  const Array ws = Array::empty({static_cast<int64_t>(ws_bytes)}, DType::u8, kGpu);
  plan::ExecutionContext ctx{stream.native(), nullptr, ws.data(), ws_bytes};
  ctx.device = kGpu;
  for (int i = 0; i < 2; ++i) plans.execute(pack, ctx);
  cudaEvent_t a, b;
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  const auto st = static_cast<cudaStream_t>(stream.native());
  constexpr int kRuns = 10;
  ASSERT_EQ(cudaEventRecord(a, st), cudaSuccess);
  for (int i = 0; i < kRuns; ++i) plans.execute(pack, ctx);
  ASSERT_EQ(cudaEventRecord(b, st), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(b), cudaSuccess);
  float ms = 0;
  ASSERT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  std::printf(
      "kda backward bf16 H=HV=32 K=V=128 T=32768 N=8 (equal), prepare %lld intra %lld dstate "
      "%lld state %lld: %.3f ms, workspace %.0f MiB\n",
      static_cast<long long>(knobs.prepare), static_cast<long long>(knobs.intra),
      static_cast<long long>(knobs.dstate), static_cast<long long>(knobs.state), ms / kRuns,
      ws_bytes / 1048576.0);
  std::fflush(stdout);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}
#endif

}  // namespace
}  // namespace eagle
