// Our varlen (THD, token-packed) attention kernels for Hopper (sm_90a): forward and backward of
// softmax(scale * q k^T) v per sequence, with GQA, bottom-right causal masking and the
// logsumexp statistics. No max_seqlen anywhere: a launch is sized by the capacity bound of its
// ragged schedule (eagle/ragged/schedule.hpp) and reads the batch from the device.
//
// Layout (dense row-major, 16-byte aligned base pointers): q [Tq, H, D], k [Tk, Hk, D],
// v [Tk, Hk, Dv], o and d_o [Tq, H, Dv], lse [Tq, H] f32. Query head h reads kv head
// h / (H / Hk). Sequence s owns q rows [cu_q[s], cu_q[s + 1]) and kv rows [cu_kv[s],
// cu_kv[s + 1]), both read clamped to [0, T] with non-decreasing boundaries (as
// ragged::chunk_task reads them), so bad metadata never reads or writes out of bounds.
//
// Semantics (the reference engine's, FlashAttention >= 2.1's): query i of a sequence sees key j
// iff !causal or j <= i + (kv_len - q_len). A row that sees no key has o = 0, lse = -inf and
// dq = 0; a kv row no query sees has dk = dv = 0. Rows outside every sequence (padding) may hold
// anything, NaN included, on input: no active output or gradient may depend on them (mask V and
// d_o rows as well as scores: 0 * NaN = NaN). Padding rows of outputs are left unspecified.
#pragma once

#include <cstddef>
#include <cstdint>

#include "eagle/core/dtype.hpp"

namespace eagle::native::attention {

// How a kernel's grid covers its tasks (eagle/ragged/schedule.hpp):
//   flat        one CTA per (capacity tile, head); CTAs past the batch's tiles return at once
//   persistent  min(tasks at capacity, resident CTAs) workers striding over the active tasks
enum class Schedule : int32_t { flat = 0, persistent = 1 };

// The problem every launch shares.
struct VarlenShape {
  const int32_t* cu_q = nullptr;    // [slots + 1] i32, device
  const int32_t* cu_kv = nullptr;   // [slots + 1] i32, device
  int64_t slots = 0;                // N (>= 1)
  int64_t rows_q = 0, rows_kv = 0;  // Tq, Tk: the capacities (buffer rows)
  int heads = 0, kv_heads = 0;      // H, Hk, H % Hk == 0
  int head_dim = 0, value_dim = 0;  // D, Dv
  float scale = 0;                  // multiplies q.k (> 0)
  bool causal = false;
  DType dtype = DType::bf16;  // of q, k, v, o, d_o, dq, dk, dv: bf16 or f16
};

// Where a kernel finds its tasks. Tiles are the chunks of `block` rows of each sequence on one
// side (ragged::chunk_task), numbered by tile_offsets = the chunk offsets of that side's
// cu_seqlens for chunk `block` (ragged::scan_chunk_offsets; the plan computes them on the
// device before the launch, see tile_offsets_launch below).
struct TaskGrid {
  Schedule schedule = Schedule::flat;
  const int32_t* tile_offsets = nullptr;  // [slots + 1] i32, device
  int64_t capacity_tiles = 0;             // ragged::chunk_capacity(T, N, block)
  int multiprocessors = 0;                // SMs of the device (persistent grid size)
};

// ---- forward -------------------------------------------------------------------------------

struct FwdArgs {
  VarlenShape shape;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // natural log-sum-exp of scale * q.k over the visible keys, or null
  TaskGrid grid;         // over q tiles of fwd_block_rows(shape) rows
};

// Rows of q per forward tile (the chunk size of grid.tile_offsets); 0 when no kernel of this
// build serves the shape's (dtype, head_dim, value_dim).
int fwd_block_rows(const VarlenShape& shape);
// Enqueues the forward on `stream` (a cudaStream_t). False when no kernel serves the shape or
// the launch failed (the CUDA error is left for the caller's cudaGetLastError).
bool varlen_fwd(const FwdArgs& args, void* stream) noexcept;

// ---- backward ------------------------------------------------------------------------------

struct BwdArgs {
  VarlenShape shape;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* o = nullptr;
  const void* d_o = nullptr;
  const float* lse = nullptr;  // the forward's
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  // Deterministic: the same inputs give bitwise the same gradients (no float atomics).
  bool deterministic = false;
  TaskGrid kv_grid;  // over kv tiles of bwd_kv_block_rows(shape) rows
  TaskGrid q_grid;   // over q tiles of bwd_q_block_rows(shape) rows
};

int bwd_kv_block_rows(const VarlenShape& shape);  // 0: no kernel serves the shape
int bwd_q_block_rows(const VarlenShape& shape);
// Device workspace the backward needs (f32 dq accumulator, row statistics), 256-byte multiple.
std::size_t bwd_workspace_bytes(const VarlenShape& shape, bool deterministic);
// Enqueues the backward (all of its kernels) on `stream`; `workspace` holds at least
// bwd_workspace_bytes(shape, deterministic) bytes and needs no clearing.
bool varlen_bwd(const BwdArgs& args, void* workspace, void* stream) noexcept;

// ---- the schedule's tile offsets -------------------------------------------------------------

// One small launch that writes up to three tile-offset arrays ([slots + 1] i32 each), the
// chunk offsets of cu[i] for chunk block[i] and capacity rows[i] (ragged::scan_chunk_offsets).
struct TileOffsetsJob {
  const int32_t* cu = nullptr;
  int64_t rows = 0;
  int64_t block = 0;
  int32_t* out = nullptr;
};
bool tile_offsets_launch(const TileOffsetsJob* jobs, int count, int64_t slots,
                         void* stream) noexcept;

}  // namespace eagle::native::attention
