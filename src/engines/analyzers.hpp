// The analyzers of the built-in families: each reads a frozen graph once and records what every
// engine of its family needs to judge it. Facts describe; they never reject.
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"

namespace eagle::engines {

struct PointwiseFacts : plan::Facts {
  bool single_node = false;
  std::string op;              // the single node's op
  int arity = 0;               // its wired inputs
  bool same_dims = false;      // every operand has the output's dims (no broadcasting)
  bool uniform_dtype = false;  // every operand has one dtype
  bool row_major = false;      // every operand is declared dense row-major
  int64_t numel = 0;           // of the output
  std::string describe() const override;
};
std::shared_ptr<const plan::Facts> analyze_pointwise(const op::Graph& graph);

struct AttentionFacts : plan::Facts {
  bool single_node = false;
  bool packed = false;  // THD with cu_seqlens (else dense BSHD)
  bool ragged_offsets = false;
  bool causal = false;
  bool backward = false;  // sdpa_bwd
  int64_t heads = 0, kv_heads = 0, head_dim = 0, value_dim = 0;
  // THD: the q side's capacity T (buffer rows) and slots N; dense: S and B.
  int64_t rows = 0, slots = 0;
  // The rectangular grid a max-seqlen kernel launches (N x ceil(S_max / 128), S_max = T: the
  // op declares no tighter bound) over the flat capacity bound G_cap(T, N, 128); 1 when dense.
  double grid_ratio = 1;
  std::string describe() const override;
};
std::shared_ptr<const plan::Facts> analyze_attention(const op::Graph& graph);

struct DeltaFacts : plan::Facts {
  bool single_node = false;
  std::string rule;  // gdn, kda, gdn2
  int64_t heads = 0, value_heads = 0, key_dim = 0, value_dim = 0;
  bool has_initial_state = false, use_qk_l2norm = false, safe_gate = false;
  std::string describe() const override;
};
std::shared_ptr<const plan::Facts> analyze_delta(const op::Graph& graph);

}  // namespace eagle::engines
