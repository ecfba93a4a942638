// Our chunked forward of the per-channel gated delta rules kda and gdn2 (fla's chunk_kda and
// chunk_gdn2, chunk C = 64, the WY / UT form) for Hopper (sm_90a), token-packed (THD) and
// ragged: no max_seqlen, no host read of cu_seqlens. Three launches after the chunk offsets:
//   prepare  per (chunk, value head): G = the chunk's cumsum of g per key channel, the
//            intra-chunk products A = strictly-lower (b k)(k e^{G_i - G_j})^T and
//            Aqk = lower scale q (k e^{G_i - G_j})^T (16-row sub-blocks: off the diagonal through
//            a reference row so no factor exceeds 1; on it through the same row where the
//            block's decay keeps the factors in range, else exactly per channel), T = (I + A)^-1,
//            W = T (b k e^G), U = T (w v), q e^G, k e^{G_last - G}, e^{G_last}
//   state    per (sequence slot, value head, V block), sequentially over the sequence's chunks:
//            h_c stored, v' = U - W h, h <- diag(e^{G_last}) h + (k e^{G_last - G})^T v'
//   output   per (chunk, value head): o = (q e^G) h_c + Aqk v'
// kda is gdn2 with b = w = beta (one per token and value head): the gates are read through a
// small policy and everything else is shared.
//
// Layout (dense row-major): q, k [T, H, D], v and o [T, HV, D] (bf16 or f16, one dtype),
// g [T, HV, D] f32 (natural log, <= 0), beta [T, HV] f32 (kda) or b [T, HV, D] and
// w [T, HV, D] f32 (gdn2), initial_state and final_state [N, HV, D, D] f32, cu_seqlens
// [N + 1] i32 read clamped (ragged::chunk_task). Value head hv reads q/k head hv / (HV / H).
// Rows outside every sequence may hold anything, NaN included: they are never read. Padding
// rows of o are left unspecified; final_state is written for every slot (an empty slot's is
// its initial state, or 0).
#pragma once

#include <cstddef>
#include <cstdint>

#include "eagle/core/dtype.hpp"

namespace eagle::native::kda {

constexpr int kChunk = 64;

// How the erase gate b (per key channel) and write gate w (per value channel) are read.
enum class Gates : int32_t { kda = 0, gdn2 = 1 };

struct Shape {
  const int32_t* cu = nullptr;              // [slots + 1] i32, device
  int64_t slots = 0;                        // N >= 1
  int64_t rows = 0;                         // T (buffer rows)
  int heads = 0, value_heads = 0, dim = 0;  // H, HV (HV % H == 0), D = K = V
  float scale = 0;
  bool l2norm = false;  // q and k rows divided by sqrt(sum x^2 + 1e-6) first
  DType dtype = DType::bf16;
  Gates gates = Gates::kda;
  // The diagonal 16-row blocks of the intra-chunk products on the tensor cores through their
  // first row where the block's decay allows (span <= 80), else exactly per channel; false:
  // always exactly (slower, the plan knob `intra` = 0).
  bool tensor_core_diagonal = true;
  // The state launch loads the next chunk's W, kg, U columns and e^{G_last} with cp.async while
  // it computes this one (the plan knob `pipeline` = 1) instead of loading each chunk first.
  bool pipelined_state = false;
  // The state launch's CTAs: one per head covering all D value columns, D / 32 groups of four
  // warps sharing the chunk's W and kg rows in shared memory (the plan knob `state` = 1), else
  // one per 32 columns (each reading W and kg itself).
  bool head_state = false;
  // The state launch with the state transposed in registers, each warp running the recurrence
  // for 16 value columns alone, one barrier per chunk (kda_state_rows.cuh; the plan knob
  // `state` = 2; always pipelined). Takes precedence over head_state.
  bool state_rows = false;
  // With state_rows: two CTAs per (sequence, value head), the sequences with more chunks than a
  // balanced share split over both, D / 2 columns each, so their chains of chunks run on two SMs
  // (the plan knob `state` = 3; persistent.cuh's rows_split).
  bool split_state_rows = false;
  // The prepare launch's compact layout (the plan knob `prepare` = 1): q and k stay in shared
  // memory as their 16-bit input rows with a scale per row, Aqk as 16-bit, and the rows come in
  // by cp.async, so a kda CTA takes about 112 KB and two fit an SM where the wide layout's
  // 190 KB holds one (the prepare is latency-bound at 8 warps per SM). Same arithmetic, same
  // results. Used only when q, k, v, g (and b, w) start 16-byte aligned, else the wide one.
  bool compact_prepare = false;
  // The compact prepare writes W and U through shared memory, each warp's 16-row tile staged
  // (XOR-swizzled, conflict-free) where G was and stored in 16-byte pieces, a warp's stores
  // covering two whole rows (the plan knob `stores` = 1); else straight from the mma fragments,
  // 4 bytes a lane (ncu: 30% of the prepare's global sectors were excess). The output launch
  // stores o the same way (staged in the warp's own q e^G rows) where o starts 16-byte aligned.
  bool staged_stores = false;
  // The compact prepare's intra-chunk products with each warp building its mma fragments in
  // registers from G, q and k (a fixed share of the 20 key tiles per warp, no staging and no
  // barrier until all are in; the plan knob `prepare` = 2), instead of staging each block row's
  // scaled rows and keys in shared memory, two barriers per 32 keys.
  bool fragment_products = false;
  // The backward's decay-weighted products (its dqkg launch) on the tensor cores through a
  // reference row per 16-row block, as the prepare takes A (knob `intra` of native_kda_bwd = 1);
  // false: exactly per channel on CUDA cores.
  bool tensor_core_backward = false;
  // The backward's dstate launch copies the previous chunk's tiles by cp.async while it computes
  // this one (knob `dstate` of native_kda_bwd = 1), as the forward's pipelined state loop.
  bool pipelined_dstate = false;
  // The backward's dstate launch with dh transposed in registers, each warp running the reverse
  // recurrence for 16 value columns alone (kda_bwd_dstate_rows.cuh; knob `dstate` of
  // native_kda_bwd = 2). Needs d_o 16-byte aligned (else the launch above).
  bool dstate_rows = false;
  // With dstate_rows: two CTAs per (sequence, value head), the sequences past a balanced share
  // split over both, D / 2 columns each (knob `dstate` = 3; as split_state_rows).
  bool split_dstate_rows = false;
  // The persistent schedule: a launch runs as many CTAs as are resident at once, each looping
  // over its tasks, instead of one CTA per task of the capacity (flat), whose CTAs past the batch
  // return at once. Per stage: `persistent` for the chunk launches (prepare, output; knob
  // `schedule` 1 or 3), `persistent_state` for the state launch over slots (`schedule` 1 or 2).
  bool persistent = false;
  bool persistent_state = false;
};

struct FwdArgs {
  Shape shape;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const float* g = nullptr;
  const float* beta = nullptr;           // kda
  const float* b = nullptr;              // gdn2
  const float* w = nullptr;              // gdn2
  const float* initial_state = nullptr;  // or null: zeros
  void* o = nullptr;
  float* final_state = nullptr;  // or null: not written
  // The chunk offsets of cu for chunk kChunk ([slots + 1] i32, device, built before the
  // launch) and the flat grid's capacity ragged::chunk_capacity(T, N, kChunk).
  const int32_t* chunk_offsets = nullptr;
  int64_t capacity_chunks = 0;
};

// Whether this build has kernels for the shape (bf16/f16, D in {64, 128}, sm_90a builds).
bool served(const Shape& shape);
// Device workspace of a forward over capacity_chunks chunks, a 256-byte multiple.
std::size_t workspace_bytes(const Shape& shape, int64_t capacity_chunks);
// Enqueues the three launches on `stream` (a cudaStream_t); `workspace` holds
// workspace_bytes(shape, capacity_chunks) bytes, 256-byte aligned, and needs no clearing.
// False when no kernel serves the shape or a launch failed (the CUDA error left for the
// caller's cudaGetLastError).
bool forward(const FwdArgs& args, void* workspace, void* stream) noexcept;

// The forward's chunk quantities as the backward reads them, each [chunk][HV][...] (chunk-major,
// value head next): w, u, qg (q e^G), kg (k e^{G_last - G}), vn (v') [C, D] bf16; aqk and t
// ((I + A)^-1) [C, C] bf16; h [D, D] bf16 (the state before the chunk); gl [D] f32
// (e^{G_last}).
struct ChunkViews {
  void *w, *u, *qg, *kg, *vn, *aqk, *h, *t;
  float* gl;
};
// Device workspace of recompute, a 256-byte multiple.
std::size_t recompute_bytes(const Shape& shape, int64_t capacity_chunks);
// The prepare and state launches of a forward (no o, no final state) keeping T too; `views`
// receives where each quantity lies in `workspace` (recompute_bytes of it).
bool recompute(const FwdArgs& args, void* workspace, void* stream, ChunkViews* views) noexcept;

}  // namespace eagle::native::kda
