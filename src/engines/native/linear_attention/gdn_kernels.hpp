// Our chunked gated delta rule (op `gdn`) forward for Hopper (sm_90a), fla's WY / UT form with
// chunks of C = 64 tokens. Three launches after the chunk offsets:
//   prepare  per (chunk, value head): the gate's cumulative sum G inside the chunk, the
//            strictly lower A[i, j] = beta_i (k_i . k_j) exp(G_i - G_j), T = (I + A)^-1 (column
//            by column, or by 16 x 16 blocks when blocked_solve), then
//            W = T (beta exp(G) k) and U = T (beta v)
//   state    per (sequence, value head, V block), sequentially over the sequence's chunks (the
//            next chunk's rows prefetched by cp.async when pipelined_state): stores
//            h_c (the state at the chunk's start), v' = U - W h_c over U, and
//            S <- exp(G_last) S + (k exp(G_last - G))^T v'
//   output   per (chunk, value head): o = scale (exp(G) q h_c + tril(q k^T exp(G_i - G_j)) v')
// Matrix products on tensor cores (mma.sync, f32 accumulation); the recurrent state in f32
// registers. No max_seqlen: grids come from the capacity (G_cap chunks, N slots), tasks past
// the batch return at once, and every row index is read clamped (ragged::chunk_task).
//
// Layout (dense row-major, 16-byte aligned): q, k [T, H, K], v and o [T, HV, V] (bf16 or f16,
// one dtype), g and beta [T, HV], a_log and dt_bias [HV], initial_state and final_state
// [N, HV, K, V] (each f32, bf16 or f16; a_log and dt_bias one dtype), cu_seqlens [N + 1] i32. Value
// head h reads q/k head h / (HV / H). Padding rows (outside every sequence) may hold anything, NaN
// included; no output depends on them and padding rows of o are left unwritten.
#pragma once

#include <cstddef>
#include <cstdint>

#include "eagle/core/dtype.hpp"

namespace eagle::native::linear_attention {

inline constexpr int kGdnChunk = 64;

struct GdnShape {
  int64_t slots = 0;   // N (>= 1)
  int64_t tokens = 0;  // T: buffer rows (the capacity)
  int heads = 0, value_heads = 0;
  int key_dim = 0, value_dim = 0;
  float scale = 0;
  bool use_qk_l2norm = false;     // q, k rows / sqrt(sum x^2 + 1e-6)
  bool safe_gate = false;         // g <- -exp(a_log) softplus(g + dt_bias)
  bool use_beta_sigmoid = false;  // beta <- sigmoid(beta)
  DType dtype = DType::bf16;      // q, k, v, o
  // f32, bf16 or f16 each:
  DType g_dtype = DType::f32;
  DType beta_dtype = DType::f32;
  DType param_dtype = DType::f32;  // a_log and dt_bias
  DType state_dtype = DType::f32;  // initial_state and final_state
  // The state launch loads the next chunk's rows with cp.async while it computes this one
  // (knob `pipeline` = 1) instead of loading each chunk before computing it.
  bool pipelined_state = false;
  // The state launch's CTAs: one per head covering all V columns, V / 32 groups of four warps
  // sharing the chunk's W and k rows in shared memory (the plan knob `state` = 1), else one per
  // 32 columns (each reading W and k itself).
  bool head_state = false;
  // The state launch with the state transposed in registers, each warp running the recurrence
  // for 16 value columns alone, one barrier per chunk (the plan knob `state` = 2; always
  // pipelined). Takes precedence over head_state.
  bool state_rows = false;
  // With state_rows: two CTAs per (sequence, value head), the sequences with more chunks than a
  // balanced share split over both, V / 2 columns each, so their chains of chunks run on two SMs
  // (the plan knob `state` = 3; persistent.cuh's rows_split).
  bool split_state_rows = false;
  // The prepare launch inverts I + A by 16 x 16 blocks on all 128 threads (knob `solve` = 1)
  // instead of by forward substitution with one column per thread.
  bool blocked_solve = false;
  // The prepare launch's compact layout (knob `prepare` = 1): b exp(G) k formed over the k rows
  // once A is taken, and T's 16-bit copy over A once inverted, so a CTA takes 70 KB at
  // K = V = 128 and three fit an SM instead of two (98 KB). Same arithmetic, same results.
  bool compact_prepare = false;
  // The prepare launch's W and U stores and the output launch's o stores: staged through shared
  // memory and written in 16-byte pieces (knob `stores` = 1), instead of each lane's 4-byte
  // fragment pairs (native_kda's knob of the same name).
  bool staged_stores = false;
  // The persistent schedule: a launch runs as many CTAs as are resident at once, each looping
  // over its tasks, instead of one CTA per task of the capacity (flat), whose CTAs past the batch
  // return at once. Per stage: `persistent` for the chunk launches (prepare, output; knob
  // `schedule` 1 or 3), `persistent_state` for the state launch over slots (`schedule` 1 or 2).
  bool persistent = false;
  bool persistent_state = false;
};

struct GdnArgs {
  GdnShape shape;
  const int32_t* cu_seqlens = nullptr;     // [N + 1], device
  const int32_t* chunk_offsets = nullptr;  // [N + 1]: ragged chunk offsets for C = 64, device
  int64_t capacity_chunks = 0;             // ragged::chunk_capacity(T, N, 64)
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* g = nullptr;
  const void* beta = nullptr;
  const void* a_log = nullptr;          // safe_gate only
  const void* dt_bias = nullptr;        // safe_gate only
  const void* initial_state = nullptr;  // or null: zeros
  void* o = nullptr;
  void* final_state = nullptr;  // or null: not written
};

// Whether a kernel of this build serves the shape (bf16/f16, K = V in {64, 128}, sm_90a build).
bool gdn_serves(const GdnShape& shape);
// Device workspace of one forward at capacity (T rows, N slots, capacity_chunks), 256-byte
// multiple; independent of the batch.
std::size_t gdn_workspace_bytes(const GdnShape& shape, int64_t capacity_chunks);
// Enqueues prepare, state and output on `stream` (a cudaStream_t); `workspace` holds at least
// gdn_workspace_bytes() bytes, needs no clearing and must be 256-byte aligned. False when the
// shape is not served or a launch failed (the CUDA error is left for cudaGetLastError).
bool gdn_forward(const GdnArgs& args, void* workspace, void* stream) noexcept;

}  // namespace eagle::native::linear_attention
