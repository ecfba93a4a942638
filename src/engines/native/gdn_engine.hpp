// The native gdn engine: one `gdn` node (the chunked gated delta rule forward) in the THD layout
// as our Hopper kernels (src/engines/native/linear_attention): q, k [T, H, K], v [T, HV, V] bf16
// or f16, K = V in {64, 128}, HV a multiple of H; g, beta, a_log, dt_bias and the states f32,
// bf16 or f16; every option of the op (scale, use_qk_l2norm, safe_gate, use_beta_sigmoid,
// initial_state, output_final_state). Grids come from the capacity (T rows, N slots), chunk
// offsets are built on the device: graph-replay safe, no max_seqlen, no host sync.
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"

namespace eagle::native {

std::unique_ptr<plan::Engine> make_gdn_engine(int64_t id, const std::string& name);

}  // namespace eagle::native
