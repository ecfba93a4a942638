#include "oracles/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "oracles/pointwise.hpp"

namespace eagle::test::oracle {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

Sequences Sequences::from_cu(const std::vector<int64_t>& cu_q, const std::vector<int64_t>& cu_kv,
                             const std::vector<int64_t>& q_start,
                             const std::vector<int64_t>& kv_start) {
  Sequences s;
  for (std::size_t b = 0; b + 1 < cu_q.size(); ++b) {
    s.q_start.push_back(q_start.empty() ? cu_q[b] : q_start[b]);
    s.q_len.push_back(cu_q[b + 1] - cu_q[b]);
    s.kv_start.push_back(kv_start.empty() ? cu_kv[b] : kv_start[b]);
    s.kv_len.push_back(cu_kv[b + 1] - cu_kv[b]);
  }
  return s;
}

Attention sdpa(const Dense& q, const Dense& k, const Dense& v, const Sequences& seqs, double scale,
               bool causal) {
  const int64_t tq = q.dims[0], h = q.dims[1], d = q.dims[2];
  const int64_t hk = k.dims[1], dv = v.dims[2], group = h / hk;
  Attention out{Dense({tq, h, dv}, kNaN), Dense({tq, h}, kNaN)};
  for (std::size_t b = 0; b < seqs.q_start.size(); ++b) {
    const int64_t nq = seqs.q_len[b], nk = seqs.kv_len[b];
    for (int64_t head = 0; head < h; ++head) {
      const int64_t kv_head = head / group;
      for (int64_t i = 0; i < nq; ++i) {
        const int64_t row = seqs.q_start[b] + i;
        // The row's scores with the mask as -inf, then a max-shifted softmax.
        std::vector<double> s(static_cast<std::size_t>(nk));
        double mx = -kInf;
        for (int64_t j = 0; j < nk; ++j) {
          const int64_t key = seqs.kv_start[b] + j;
          double dot = 0;
          for (int64_t c = 0; c < d; ++c)
            dot += q.data[(row * h + head) * d + c] * k.data[(key * hk + kv_head) * d + c];
          s[j] = causal && j > i + nk - nq ? -kInf : scale * dot;
          mx = std::max(mx, s[j]);
        }
        double* o = out.o.data.data() + (row * h + head) * dv;
        std::fill(o, o + dv, 0.0);
        if (mx == -kInf) {  // sees no key
          out.lse.data[row * h + head] = -kInf;
          continue;
        }
        double z = 0;
        for (int64_t j = 0; j < nk; ++j) z += std::exp(s[j] - mx);
        out.lse.data[row * h + head] = mx + std::log(z);
        for (int64_t j = 0; j < nk; ++j) {
          const double p = std::exp(s[j] - mx) / z;
          const int64_t key = seqs.kv_start[b] + j;
          for (int64_t c = 0; c < dv; ++c) o[c] += p * v.data[(key * hk + kv_head) * dv + c];
        }
      }
    }
  }
  return out;
}

DeltaOut delta_rule(const std::string& rule, const DeltaOperands& in, const DeltaOptions& opt) {
  const int64_t T = in.q.dims[0], H = in.q.dims[1], K = in.q.dims[2];
  const int64_t HV = in.v.dims[1], V = in.v.dims[2], group = HV / H;
  const int64_t B = static_cast<int64_t>(in.cu_seqlens.size()) - 1;
  DeltaOut out{Dense({T, HV, V}, kNaN), Dense({B, HV, K, V}, kNaN)};
  // Row `at` of q or k (K values), divided by its norm under use_qk_l2norm.
  const auto unit = [&](const Dense& x, int64_t at) {
    std::vector<double> r(x.data.begin() + at, x.data.begin() + at + K);
    if (opt.use_qk_l2norm) {
      double ss = 0;
      for (double e : r) ss += e * e;
      for (double& e : r) e /= std::sqrt(ss + 1e-6);
    }
    return r;
  };
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t hv = 0; hv < HV; ++hv) {
      std::vector<double> S(K * V, 0.0);
      if (!in.initial_state.data.empty())
        for (int64_t i = 0; i < K * V; ++i) S[i] = in.initial_state.data[(b * HV + hv) * K * V + i];
      for (int64_t t = in.cu_seqlens[b]; t < in.cu_seqlens[b + 1]; ++t) {
        const int64_t hq = hv / group;
        std::vector<double> q = unit(in.q, (t * H + hq) * K), k = unit(in.k, (t * H + hq) * K);
        for (double& e : q) e *= opt.scale;
        // The decay per key channel (gdn: one per head).
        std::vector<double> decay(K);
        for (int64_t i = 0; i < K; ++i) {
          double g = rule == "gdn" ? in.g.data[t * HV + hv] : in.g.data[(t * HV + hv) * K + i];
          if (rule == "gdn" && opt.safe_gate)
            g = -std::exp(in.a_log.data[hv]) * softplus(g + in.dt_bias.data[hv]);
          decay[i] = std::exp(g);
        }
        for (int64_t i = 0; i < K; ++i)
          for (int64_t j = 0; j < V; ++j) S[i * V + j] *= decay[i];
        // The row written at k: v_new, from the decayed state.
        const double* v = &in.v.data[(t * HV + hv) * V];
        std::vector<double> v_new(V);
        if (rule == "gdn2") {
          const double* erase_gate = &in.b.data[(t * HV + hv) * K];
          const double* write_gate = &in.w.data[(t * HV + hv) * V];
          for (int64_t j = 0; j < V; ++j) {
            double erase = 0;
            for (int64_t i = 0; i < K; ++i) erase += erase_gate[i] * k[i] * S[i * V + j];
            v_new[j] = write_gate[j] * v[j] - erase;
          }
        } else {
          double beta = in.beta.data[t * HV + hv];
          if (opt.use_beta_sigmoid) beta = sigmoid(beta);
          for (int64_t j = 0; j < V; ++j) {
            double read = 0;
            for (int64_t i = 0; i < K; ++i) read += k[i] * S[i * V + j];
            v_new[j] = beta * (v[j] - read);
          }
        }
        for (int64_t i = 0; i < K; ++i)
          for (int64_t j = 0; j < V; ++j) S[i * V + j] += k[i] * v_new[j];
        for (int64_t j = 0; j < V; ++j) {
          double o = 0;
          for (int64_t i = 0; i < K; ++i) o += S[i * V + j] * q[i];
          out.o.data[(t * HV + hv) * V + j] = o;
        }
      }
      for (int64_t i = 0; i < K * V; ++i) out.final_state.data[(b * HV + hv) * K * V + i] = S[i];
    }
  }
  return out;
}

}  // namespace eagle::test::oracle
