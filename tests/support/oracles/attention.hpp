// Float64 oracles of the attention ops, written from their definitions with plain loops (never
// the reference engine's code): scaled dot-product attention per sequence, and the gated delta
// rules (gdn, kda, gdn2) as their recurrence. Inputs and outputs are packed (THD) Dense tensors;
// rows that belong to no sequence are padding and come out NaN.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dense.hpp"

namespace eagle::test::oracle {

// Where sequence b sits: q rows [q_start[b], q_start[b] + q_len[b]) attend to kv rows
// [kv_start[b], kv_start[b] + kv_len[b]).
struct Sequences {
  std::vector<int64_t> q_start, q_len, kv_start, kv_len;
  // The gap-free packing of cumulative lengths; q_start / kv_start, when given, place the
  // sequences elsewhere (a ragged offset in rows).
  static Sequences from_cu(const std::vector<int64_t>& cu_q, const std::vector<int64_t>& cu_kv,
                           const std::vector<int64_t>& q_start = {},
                           const std::vector<int64_t>& kv_start = {});
};

struct Attention {
  Dense o;    // [Tq, H, Dv]
  Dense lse;  // [Tq, H]: log(sum(exp(scale * q.k))) over the keys the row sees
};
// q [Tq, H, D], k [Tk, Hk, D], v [Tk, Hk, Dv]; query head h reads kv head h / (H / Hk). Per
// sequence and head: softmax(scale * Q K^T + M) V, M = -inf where a key is masked: causal is
// bottom-right aligned (query i sees key j iff j <= i + kv_len - q_len). A row that sees no key
// gives o = 0 and lse = -inf.
Attention sdpa(const Dense& q, const Dense& k, const Dense& v, const Sequences& seqs, double scale,
               bool causal);

// The delta rules' operands; an absent optional operand is an empty Dense (no data).
struct DeltaOperands {
  Dense q, k;           // [T, H, K]
  Dense v;              // [T, HV, V]
  Dense g;              // gdn: [T, HV] (log decay, or a raw logit under safe_gate); else [T, HV, K]
  Dense beta;           // gdn, kda: [T, HV]
  Dense b;              // gdn2: [T, HV, K], the erase gate
  Dense w;              // gdn2: [T, HV, V], the write gate
  Dense initial_state;  // [B, HV, K, V] or absent (zero)
  Dense a_log, dt_bias;             // [HV], safe_gate only
  std::vector<int64_t> cu_seqlens;  // [B + 1]
};
struct DeltaOptions {
  double scale = 1.0;
  bool use_qk_l2norm = false;     // q, k rows become x / sqrt(sum x^2 + 1e-6)
  bool safe_gate = false;         // gdn: g = -exp(a_log) * softplus(g + dt_bias)
  bool use_beta_sigmoid = false;  // gdn: beta = sigmoid(beta)
};
struct DeltaOut {
  Dense o;            // [T, HV, V]
  Dense final_state;  // [B, HV, K, V]
};
// Per sequence and value head (reading q/k head hv / (HV / H)), S [K, V] from initial_state or 0,
// each token as flash-linear-attention 0.6's naive recurrences write it:
//   gdn, kda (naive_recurrent_gated_delta_rule, naive_recurrent_kda):
//     S = S * exp(g); v' = beta * (v - S^T k); S = S + k v'^T; o = S^T (scale * q)
//   gdn2 (naive_recurrent_gdn2):
//     S = S * exp(g); erase = S^T (b * k); v' = w * v - erase; S = S + k v'^T; o = S^T (scale * q)
// with exp(g) scaling S's rows (one value for gdn, one per key channel for kda and gdn2).
DeltaOut delta_rule(const std::string& rule, const DeltaOperands& in, const DeltaOptions& opt);

}  // namespace eagle::test::oracle
