// What native_kda and native_kda_bwd both read off their node (kda, gdn2, kda_bwd, gdn_bwd or
// gdn2_bwd): the kernels' problem (kda::Shape) and the gates' rule.
#pragma once

#include <string>

#include "eagle/op/graph.hpp"
#include "engines/native/linear_attention/kda_kernels.hpp"

namespace eagle::native {

// Sizes from q and v, the slots from cu_seqlens, scale (1 / sqrt(K) unless given), l2norm, dtype
// and the gates: gdn2's per-channel erase for gdn2 and gdn2_bwd, kda's otherwise (gdn_bwd is kda
// with its gate broadcast over K).
kda::Shape kda_shape_of(const op::Node& node);

// Declines unless the node's gates are f32: g and beta, or gdn2's g, b and w.
void require_f32_gates(const op::Node& node, const std::string& engine);

}  // namespace eagle::native
