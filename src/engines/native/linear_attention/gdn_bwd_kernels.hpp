// The gated delta rule's backward (op gdn_bwd, one log-space gate per token and value head) as
// the kda backward (kda_bwd_kernels.hpp) with that gate broadcast over the K key channels. The
// reduction is exact: the reference recurrence (reference/math/linear_attention.cpp, decay())
// reads both rules' gates the same way, S <- diag(exp(a)) S with a [T, HV, K] the natural-log
// decay per key channel, where gdn's a[t, h, c] = g[t, h] (or its safe_gate transform) for every
// c and kda's a = g; everything after the decay is the same for both (beta erases and writes).
// So gdn's d(log-decay) at (t, h) is the sum over c of kda's dg[t, h, c] (the chain rule of a
// broadcast), and the options gdn has and kda has not act on the gates alone:
//   prepare  per (row, value head): a = g or, under safe_gate, -exp(a_log) softplus(g + dt_bias),
//            broadcast to [T, HV, K]; beta through its sigmoid when use_beta_sigmoid
//   kda      kda::backward on those gates (its dg [T, HV, K] in the workspace, dbeta in place)
//   reduce   per (row, value head), one warp: d_log = sum_c dg[t, h, c] (a fixed shuffle tree),
//            dg = d_log, or under safe_gate dz = -d_log exp(a_log) sigmoid(g + dt_bias) with the
//            per-row terms of d_dt_bias (dz) and d_a_log (d_log a); dbeta times p (1 - p) under
//            use_beta_sigmoid; zeros in padding rows
//   heads    (safe_gate) per value head, one CTA: d_a_log and d_dt_bias summed over the rows in a
//            fixed order (per-thread strided sums, then a shared-memory tree)
// Deterministic (no atomics). Layout as kda_bwd_kernels.hpp, except g [T, HV], dg [T, HV],
// a_log, dt_bias, d_a_log and d_dt_bias [HV], all f32.
#pragma once

#include <cstddef>

#include "engines/native/linear_attention/kda_bwd_kernels.hpp"

namespace eagle::native::kda {

struct GdnBwdArgs {
  // Everything the kda backward takes except its gate g and gate gradient dg (ignored here):
  // base.shape.gates must be Gates::kda; base.beta is the raw beta (logits under
  // use_beta_sigmoid) and base.dbeta receives the gradient w.r.t. it.
  BwdArgs base;
  const float* g = nullptr;        // [T, HV]: the log decay, or logits under safe_gate
  const float* a_log = nullptr;    // [HV], safe_gate only
  const float* dt_bias = nullptr;  // [HV], safe_gate only
  bool safe_gate = false;          // a = -exp(a_log) softplus(g + dt_bias)
  bool use_beta_sigmoid = false;   // beta <- sigmoid(beta)
  // The gradients; any may be null (not written).
  float* dg = nullptr;         // [T, HV]
  float* d_a_log = nullptr;    // [HV], safe_gate only
  float* d_dt_bias = nullptr;  // [HV], safe_gate only
};

// Device workspace of gdn_backward, a 256-byte multiple: the kda backward's, then the broadcast
// gate and kda's dg [T, HV, K], the sigmoid of beta and two per-row partials [T, HV], all f32.
std::size_t gdn_backward_workspace_bytes(const Shape& shape, int64_t capacity_chunks);
// Enqueues prepare, the kda backward, reduce and heads on `stream`; `workspace` holds
// gdn_backward_workspace_bytes, 256-byte aligned, and needs no clearing. False when no kernel
// serves the shape, an argument is missing or a launch failed.
bool gdn_backward(const GdnBwdArgs& args, void* workspace, void* stream) noexcept;

}  // namespace eagle::native::kda
