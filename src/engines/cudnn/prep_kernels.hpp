// The device work a cuDNN attention plan does before cuDNN runs, from eagle's operands:
// - ragged (THD): per-sequence lengths [B] int32 and ragged offsets (elements) [B+1] int64 from
//   cu_seqlens, the form cuDNN's padding mask and ragged tensors read;
// - dense backward: statistics [B, S, H] copied to packed [B, H, S], the only layout cuDNN 9.19
//   reads backward statistics in.
// Each is one small kernel, issued on the plan's stream or added as a node of its CUDA graph.
#pragma once

#include <cstdint>

namespace eagle::cudnn {

inline constexpr int kMaxRaggedOffsets = 8;

struct RaggedPrepArgs {
  const void* cu_q = nullptr;  // [B+1] i32 or i64
  const void* cu_kv = nullptr;
  int cu_is64 = 0;
  int64_t batch = 0;
  int64_t rows_q = 0, rows_kv = 0;  // buffer rows: entries are clamped into [0, rows]
  // cuDNN's S (a max_seqlen, else the rows): lengths are clamped to it, so a sequence longer than
  // the caller promised has only its first S rows computed and nothing is read or written past.
  int64_t max_len_q = 0, max_len_kv = 0;
  int32_t* seq_len_q = nullptr;  // [B]
  int32_t* seq_len_kv = nullptr;
  int n_offsets = 0;
  int64_t* offsets[kMaxRaggedOffsets] = {};  // [B+1] each
  int64_t row_elems[kMaxRaggedOffsets] = {};
  int kv_side[kMaxRaggedOffsets] = {};
  // Backward: cuDNN writes nothing for a sequence with no query rows, but its keys and values
  // have gradient 0. The kv rows of such sequences are zeroed in these buffers (dk, dv): each
  // row's first zero_row_bytes, rows zero_row_pitch bytes apart (wider in a packed [T, 3, H, D]).
  int n_zero = 0;
  void* zero[2] = {};
  int64_t zero_row_bytes[2] = {};
  int64_t zero_row_pitch[2] = {};
};

struct StatsCopyArgs {
  const float* src = nullptr;  // [B, S, H] at its strides
  float* dst = nullptr;        // packed [B, H, S]
  int64_t batch = 0, heads = 0, seq = 0;
  int64_t stride_b = 0, stride_s = 0, stride_h = 0;
};

// A launch of one of the kernels: the __global__ function and its geometry; its one parameter
// is the args struct.
struct PrepLaunch {
  const void* kernel = nullptr;
  unsigned grid = 1, block = 256;
  unsigned grid_y = 1;  // ragged backward: one row of blocks per sequence, for the zeroing
};

PrepLaunch ragged_prep_launch(const RaggedPrepArgs& args);
PrepLaunch stats_copy_launch(const StatsCopyArgs& args, int multiprocessors);

// Issues the launch on `stream` with `args` (a RaggedPrepArgs or StatsCopyArgs); false on a
// launch error. Never throws.
bool launch_prep(const PrepLaunch& launch, const void* args, void* stream) noexcept;

}  // namespace eagle::cudnn
