// The native kda / gdn2 forward engine: one kda or gdn2 node in the THD layout (q, k [T, H, D],
// v [T, HV, D] bf16 or f16, f32 gates, cu_seqlens [N + 1] i32), D = K = V in {64, 128}, GQA,
// scale, use_qk_l2norm, an f32 initial_state and the f32 final_state, as our chunked Hopper
// kernels (src/engines/native/linear_attention). Grids come from the capacity bound of the
// ragged schedule (knob `schedule`: 0 flat), never from a max_seqlen or a host read.
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"

namespace eagle::native {

std::unique_ptr<plan::Engine> make_kda_engine(int64_t id, const std::string& name);

}  // namespace eagle::native
