// What an eagle operation graph becomes in cuDNN's graph API, decided without cuDNN: which
// cuDNN node, every tensor in cuDNN's [B, H, S, D] order with its strides and the eagle uid it
// keeps, and the small arrays the plan derives on the device before cuDNN runs (sequence
// lengths and ragged offsets from cu_seqlens, statistics re-laid out). A pure function of the
// graph, so its declines are testable on any machine.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "eagle/core/dtype.hpp"
#include "eagle/op/graph.hpp"

namespace eagle::cudnn {

// A tensor of the cuDNN graph. `uid` is eagle's own IR uid for an operand, or one eagle left
// free for an array the plan keeps in its workspace.
struct TensorDesc {
  std::string name;  // attention: eagle's port name (q, k, v, o, stats, d_o, dq, dk, dv)
  int64_t uid = -1;
  DType dtype = DType::f32;
  int rank = 4;                      // 4 for attention, 3 for matmul graphs ([B, M, N])
  std::array<int64_t, 4> dims{};     // [B, H, S, D] (stats: D = 1); matmul [B, rows, cols]
  std::array<int64_t, 4> strides{};  // elements, same order
  bool output = false;
  bool in_workspace = false;  // backed by the plan's workspace, not by a caller buffer
  int64_t ragged_uid = -1;    // its ragged offset tensor, or -1 (dense)
};

// A ragged offset array: element offset of each sequence's first row ([B+1] int64). Either the
// plan derives it from cu_seqlens (cu * row_elems, in its workspace) or it is the tensor's own
// ragged offset from the IR (a caller buffer, read as is).
struct RaggedOffsets {
  int64_t uid = -1;
  bool kv_side = false;   // derived from cu_seqlens_kv (else cu_seqlens_q)
  int64_t row_elems = 0;  // elements per row of the tensors it serves
  bool derived = true;    // false: an IR ragged offset operand
  DType dtype = DType::i64;
};

// One pointwise node after a matmul: it reads the chain's value (and `other`, a graph input
// broadcast to the result) and its result is the chain's next value.
struct PointwiseStep {
  std::string op;           // eagle's pointwise op (add, relu, gelu, ...)
  int other = -1;           // index in Lowered::tensors of the second operand, or -1 (unary)
  bool chain_first = true;  // the chain's value is the op's first operand (else its second)
  int out = -1;             // index in Lowered::tensors when the caller receives it, else -1
};

struct Lowered {
  enum class Op : uint8_t { sdpa, sdpa_bwd, matmul, layer_norm, rms_norm };
  Op op = Op::sdpa;
  DType io = DType::f16;  // f16 or bf16
  bool ragged = false;    // THD with cu_seqlens
  bool causal = false;    // bottom-right aligned
  bool stats = false;     // sdpa forward: writes statistics; norms: training (writes them)
  double scale = 1.0;
  double epsilon = 0.0;  // norms
  int64_t batch = 0, heads = 0, kv_heads = 0, head_dim = 0, value_dim = 0;
  int64_t s_q = 0, s_kv = 0;  // dense: the sequence lengths; ragged: rows of q and k (bounds)
  // cuDNN's S, what its grids are sized by: dense s_q and s_kv; ragged the bound on a sequence's
  // rows, the node's max_seqlen_q / max_seqlen_kv when set (at most the rows), else the rows.
  int64_t seq_q = 0, seq_kv = 0;
  std::vector<TensorDesc> tensors;
  // Ragged: the cu_seqlens operands, their dtype (i32 or i64) and the derived arrays.
  int64_t cu_q_uid = -1, cu_kv_uid = -1;
  DType cu_dtype = DType::i64;
  int64_t seq_len_q_uid = -1, seq_len_kv_uid = -1;  // [B] int32, in the workspace
  std::vector<RaggedOffsets> offsets;
  // Dense backward: eagle's statistics [B, S, H] are copied to packed [B, H, S] (the only
  // layout cuDNN 9.19 reads them in) under `stats_copy_uid`; -1 otherwise.
  int64_t stats_source_uid = -1;
  std::array<int64_t, 3> stats_source_strides{};  // of the eagle tensor, [B, S, H] order
  int64_t stats_copy_uid = -1;

  // Matmul graphs: tensors[0] = a, tensors[1] = b; the product is tensors[product] when the
  // caller receives it (a matmul without bias whose c is an output), else virtual; then the
  // epilogue (the bias add first, when the matmul has one).
  int product = -1;
  std::vector<PointwiseStep> epilogue;

  const TensorDesc* find(const std::string& name) const;
  // One line for messages and describe(): the op, layout, dtype, sizes and flags.
  std::string summary() const;
};

// Lowers `graph` or throws NotSupported naming the reason (an op, dtype, layout or attribute
// the cuDNN backend does not take). Reads a frozen or unfrozen graph; changes nothing.
Lowered lower(const op::Graph& graph);
// The matmul case of lower() (lowering_matmul.cpp).
Lowered lower_matmul(const op::Graph& graph);
// The layer_norm / rms_norm case of lower() (lowering_norm.cpp).
Lowered lower_norm(const op::Graph& graph);

}  // namespace eagle::cudnn
