// Kernels over a ragged batch description: `cu_seqlens` is an i32 array of N + 1 entries on the
// batch's device (sequence s holds rows [cu_seqlens[s], cu_seqlens[s + 1]); an unused tail
// repeats the active end, [0, ..., L, L, L]). Each has a CPU and a CUDA implementation and is
// recorded into a graph like any kernel, so a captured graph reads the real batch from the device
// at every replay.
//
// Reverse mode (eagle/diff/reverse.hpp): mask_rows and gradient_barrier carry a derivative (the
// cotangent's active rows, 0 in its padding rows); the others write integers or flags and declare
// no_gradient, so the reverse pass treats what they write as constants.
//
// Bad metadata never makes a ragged kernel read or write out of bounds: every kernel clamps what
// it reads to [0, T] (chunk_offsets also keeps the boundaries non-decreasing, so its lengths are
// >= 0 and sum to at most T), and validate_cu_seqlens says what was wrong. With valid metadata
// the clamps change nothing.
#pragma once

#include <cstdint>
#include <string>

#include "eagle/core/array.hpp"
#include "eagle/kernel/kernel.hpp"

namespace eagle::ragged {

// cu_seqlens [N+1] i32, scalar T -> error u32 [2]: {rule, index}, {0, 0} when the rules hold.
// Rules in the order they are checked: 1 cu_seqlens[0] != 0; 2 cu_seqlens[i] < cu_seqlens[i-1]
// (the first such i); 3 cu_seqlens[N] > T (index N). One block (1024 threads) checks the N + 1
// entries on the GPU.
const Kernel& validate_cu_seqlens();

enum class Rule : uint32_t { ok = 0, first_not_zero = 1, decreasing = 2, past_capacity = 3 };

// Throws InvalidArgument naming the rule and the first bad index when `error` (the u32 [2] that
// validate_cu_seqlens wrote; read to the host here) holds a violation. `what` names the batch.
void throw_if_invalid(const Array& error, const std::string& what = "cu_seqlens");

// cu_seqlens [N+1] i32, scalars T and C -> chunk_offsets [N+1] i32: the exclusive scan of each
// sequence's chunk count ceil(len / C) (never ceil(cu_seqlens / C)), over lengths read with the
// boundaries b[s] = min(max(cu_seqlens[s], b[s - 1]), T), b[0] = 0.
// The batch's chunks are [0, chunk_offsets[N]); chunk j belongs to sequence
// upper_bound(chunk_offsets, j) - 1 (empty sequences own none). chunk_offsets[N] never exceeds
// chunk_capacity(T, N, C).
const Kernel& chunk_offsets();

// cu_seqlens [N+1] i32, chunk_offsets [N+1] i32, scalars T, C and G -> tasks [G, 3] i32: row j
// is {sequence, row_begin, row_end} of chunk j (ragged::chunk_task, eagle/ragged/schedule.hpp),
// {-1, 0, 0} past the batch's chunks. With G = chunk_capacity(T, N, C) it is the flat schedule's
// task list as the device sees it (for inspection and tests; kernels call chunk_task directly).
const Kernel& chunk_tasks();

// cu_seqlens [N+1] i32, scalars T and S0 -> bucket u32 [1]: the index of the first bound of
// seqlen_buckets(T, S0) (eagle/ragged/capacity.hpp) that the batch's longest sequence fits, each
// length read as max(0, min(cu[s + 1], T) - max(cu[s], 0)) (so never past T: the last bound).
// The cell a device switch over per-sequence bounds reads (Recorder::switch_), so that an
// engine sized by a max_seqlen runs the smallest size the batch fits, with no host read.
// One block (1024 threads) on the GPU.
const Kernel& seqlen_bucket();

// cu_seqlens [N+1] i32, scalar T -> mask [T] u8: 1 for the active rows [0, L), 0 for the padding
// rows (L = cu_seqlens[N] clamped to [0, T]).
const Kernel& active_rows();

// x [T, ...] (f32, f64, f16, bf16), cu_seqlens [N+1] i32 -> y like x: the active rows of x, and
// 0 in the padding rows. Where ragged output meets an ordinary op that mixes or reduces rows
// (padding rows hold anything, NaN included). Derivative: dx = mask_rows(dy).
const Kernel& mask_rows();

// x [T, ...], cu_seqlens [N+1] i32 -> y = x. Forward identity; its derivative zeroes the padding
// rows of the gradient, dx = mask_rows(dy) (where an ordinary producer feeds a ragged kernel whose
// gradient leaves anything, NaN included, in the padding rows).
const Kernel& gradient_barrier();

}  // namespace eagle::ragged
