// Float64 reference semantics of the gated delta-rule linear-attention ops on token-packed (THD)
// inputs: gdn (Gated DeltaNet), kda (Kimi Delta Attention, per-key-channel decay) and gdn2
// (Gated DeltaNet 2: per-key-channel decay and erase gate, per-value-channel write gate), each
// the recurrence of flash-linear-attention 0.6 (fla/ops/gated_delta_rule/naive.py
// naive_recurrent_gated_delta_rule, fla/ops/kda/naive.py naive_recurrent_kda,
// fla/ops/gdn2/naive.py naive_recurrent_gdn2). GPU engines are tested against these.
//
// Shapes: q, k [T, H, K]; v [T, HV, V] with HV % H == 0 (value head h reads q/k head
// h / (HV / H)); cu_seqlens [B + 1] (cu[0] == 0, nondecreasing, cu[B] == T); initial_state
// optional [B, HV, K, V]. Gates per rule:
//   gdn:  g [T, HV] (log-space decay), beta [T, HV]
//   kda:  g [T, HV, K],                beta [T, HV]
//   gdn2: g [T, HV, K],                b [T, HV, K] (erase gate), w [T, HV, V] (write gate)
// Per sequence and value head, with state S [K, V] starting at initial_state (or 0), each token:
//   S = diag(exp(g_t)) S;  e = S^T (c_t * k_t);  S += k_t (u_t * v_t - e)^T;
//   o_t = S^T (scale * q_t)                       (read after the update)
// with erase gate c and write gate u: gdn and kda c = u = beta_t (broadcast over K and V, so
// S += (beta_t k_t)(v_t - S^T k_t)^T); gdn2 c = b_t, u = w_t, i.e.
// S_t = (I - k_t (b_t * k_t)^T) diag(exp(g_t)) S_{t-1} + k_t (w_t * v_t)^T. gdn broadcasts g_t
// over K. final_state is S after the sequence's last token.
#pragma once

#include <cstdint>
#include <vector>

#include "engines/reference/math/dense.hpp"

namespace eagle::reference {

enum class DeltaRule { gdn, kda, gdn2 };

// Borrowed operands. q, k, v and g are required; beta only (and always) for gdn and kda; b and
// w only (and always) for gdn2; a_log and dt_bias [HV] only (and always) under safe_gate.
struct DeltaInputs {
  const Dense* q = nullptr;
  const Dense* k = nullptr;
  const Dense* v = nullptr;
  const Dense* g = nullptr;
  const Dense* beta = nullptr;  // gdn, kda: erase and write strength
  const Dense* b = nullptr;     // gdn2: erase gate per key channel (fla's b)
  const Dense* w = nullptr;     // gdn2: write gate per value channel (fla's w)
  const Dense* initial_state = nullptr;
  const Dense* a_log = nullptr;
  const Dense* dt_bias = nullptr;
  std::vector<int64_t> cu_seqlens = {};  // [B + 1]
};

struct DeltaOptions {
  double scale = 1.0;  // the op's default is 1 / sqrt(K); the caller passes the value
  // q and k rows (per token and head) become x / sqrt(sum x^2 + 1e-6) (fla's l2norm_fwd).
  bool use_qk_l2norm = false;
  // gdn only: g holds raw logits; gate = -exp(a_log[h]) * softplus(g + dt_bias[h]) (fla's
  // use_gate_in_kernel, not fla's safe_gate).
  bool safe_gate = false;
  // gdn only: beta holds raw logits; beta = sigmoid(beta_raw).
  bool use_beta_sigmoid = false;
};

struct DeltaForward {
  Dense o;            // [T, HV, V]
  Dense final_state;  // [B, HV, K, V]
};

// Gradients w.r.t. the raw inputs (through the l2 norm, safe gate and beta sigmoid when on).
// Members that do not apply are empty (dims {}): dbeta for gdn2, db and dw unless gdn2,
// d_initial_state without an initial_state, d_a_log and d_dt_bias without safe_gate.
struct DeltaBackward {
  Dense dq, dk, dv, dg, dbeta, db, dw, d_initial_state, d_a_log, d_dt_bias;
};

// Throws eagle::InvalidArgument naming the argument and the rule it broke.
DeltaForward delta_forward(DeltaRule rule, const DeltaInputs& in, const DeltaOptions& opt);

// Reverse mode of delta_forward for L = sum(d_o * o) + sum(d_final_state * final_state);
// d_final_state may be null (zero). Recomputes the forward states itself.
DeltaBackward delta_backward(DeltaRule rule, const DeltaInputs& in, const Dense& d_o,
                             const Dense* d_final_state, const DeltaOptions& opt);

}  // namespace eagle::reference
