// Float64 reference semantics of ragged (THD, token-packed) scaled dot-product attention, forward
// and backward. Every GPU attention engine is tested against these routines, so they favour
// plain, checkable loops over speed.
//
// Layout: q [Tq, H, D], k [Tk, Hk, D], v [Tk, Hk, Dv], with H % Hk == 0; query head h reads kv
// head h / (H / Hk) (GQA, MQA when Hk == 1). Sequence b owns q rows [q_start, q_start + q_len)
// and kv rows [kv_start, kv_start + kv_len). Rows outside every sequence are padding.
#pragma once

#include <cstdint>
#include <vector>

#include "engines/reference/math/dense.hpp"

namespace eagle::reference {

// Per sequence b: rows [start, start + len) of the packed tensor. All four vectors have size B.
struct SdpaSequences {
  std::vector<int64_t> q_start, q_len, kv_start, kv_len;
};

// scale multiplies q.k. causal is bottom-right aligned (FlashAttention >= 2.1): query i of a
// sequence sees key j iff j <= i + (kv_len - q_len).
struct SdpaOptions {
  double scale;
  bool causal;
};

// o [Tq, H, Dv]; lse [Tq, H] is the natural log-sum-exp of scale * q.k over the visible keys.
// A query row that sees no key has o = 0 and lse = -inf; padding rows are NaN.
struct SdpaForward {
  Dense o;
  Dense lse;
};

// dq [Tq, H, D], dk [Tk, Hk, D], dv [Tk, Hk, Dv]. Padding rows (q rows in no sequence for dq, kv
// rows in no sequence for dk and dv) are NaN.
struct SdpaBackward {
  Dense dq, dk, dv;
};

// Throws InvalidArgument on malformed shapes, a non-finite scale, or sequences that leave their
// tensor or overlap another sequence of the same tensor.
SdpaForward sdpa_forward(const Dense& q, const Dense& k, const Dense& v, const SdpaSequences& seqs,
                         const SdpaOptions& opt);

// Takes the forward's o and lse (as a real backward does) plus d_o [Tq, H, Dv]. dk and dv of a kv
// head sum over the query heads of its group; rows that see no key contribute nothing.
SdpaBackward sdpa_backward(const Dense& q, const Dense& k, const Dense& v, const Dense& o,
                           const Dense& lse, const Dense& d_o, const SdpaSequences& seqs,
                           const SdpaOptions& opt);

// Sequences from cumulative lengths cu_q, cu_kv ([B + 1], nondecreasing, first entry >= 0):
// start = cu[b], len = cu[b + 1] - cu[b].
SdpaSequences sequences_from_cu_seqlens(const std::vector<int64_t>& cu_q,
                                        const std::vector<int64_t>& cu_kv);

}  // namespace eagle::reference
