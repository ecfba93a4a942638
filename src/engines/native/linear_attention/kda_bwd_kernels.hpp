// Our chunked backward of the per-channel gated delta rules kda and gdn2 (the model: fla's
// chunk_kda backward, chunk C = 64) for Hopper (sm_90a), token-packed (THD) and ragged like the
// forward (kda_kernels.hpp): no forward intermediates are read, everything is recomputed from
// q, k, v, the gates and initial_state. The launches, after the chunk offsets:
//   recompute  the forward's prepare and state launches (kda::recompute): W, U, q e^G,
//              k e^{G_last - G}, v', Aqk, T = (I + A)^-1, the state h before each chunk
//   dstate     per (sequence slot, value head, V block), backwards over the sequence's chunks:
//              dh_c stored (the gradient of the state after chunk c), dv' = Aqk^T dO + Kl dh_c,
//              dh <- diag(e^{G_last}) dh + (q e^G)^T dO - W^T dv'
//   dmat       per (chunk, value head), the plain products: d(q e^G) = dO h^T,
//              d(k e^{G_last - G}) = v' dh^T, dW = -dv' h^T, dAqk = dO v'^T,
//              d(w v) = T^T dv' (-> dv, dw), d(b k e^G) = T^T dW, dA = -(d(w v) U^T + d(bke^G)
//              W^T), d e^{G_last} . e^{G_last}
//   dqkg       per (chunk, value head), the decay-weighted products with e^{G_i - G_j} <= 1 per
//              channel (exact, no reference row), dq, dk per value head, db / dbeta, and dg as
//              the reverse cumsum of dG within the chunk
//   finish     per row: dq and dk summed over the value heads of a group in a fixed order, the
//              l2 norm's backward and the scale; zeros in every padding row of every gradient
// Deterministic: no atomics. Layout as the forward; dq, dk, dv take q's dtype, dg, dbeta, db, dw
// and d_initial_state are f32. d_o rows outside every sequence are never read.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engines/native/linear_attention/kda_kernels.hpp"

namespace eagle::native::kda {

struct BwdArgs {
  Shape shape;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const float* g = nullptr;
  const float* beta = nullptr;           // kda
  const float* b = nullptr;              // gdn2
  const float* w = nullptr;              // gdn2
  const float* initial_state = nullptr;  // or null: zeros
  const void* d_o = nullptr;
  const float* d_final_state = nullptr;  // or null: zeros
  // The gradients; any may be null (not written).
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  float* dg = nullptr;
  float* dbeta = nullptr;                  // kda
  float* db = nullptr;                     // gdn2
  float* dw = nullptr;                     // gdn2
  float* d_initial_state = nullptr;        // [N, HV, D, D]
  const int32_t* chunk_offsets = nullptr;  // as FwdArgs
  int64_t capacity_chunks = 0;
};

// Device workspace of a backward over capacity_chunks chunks, a 256-byte multiple.
std::size_t backward_workspace_bytes(const Shape& shape, int64_t capacity_chunks);
// Enqueues the launches on `stream`; `workspace` holds backward_workspace_bytes and needs no
// clearing. False when no kernel serves the shape or a launch failed.
bool backward(const BwdArgs& args, void* workspace, void* stream) noexcept;

}  // namespace eagle::native::kda
