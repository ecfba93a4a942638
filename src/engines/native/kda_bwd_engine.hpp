// The native kda / gdn / gdn2 backward engine: one kda_bwd, gdn_bwd or gdn2_bwd node in the THD
// layout (q, k [T, H, D], v and d_o [T, HV, D] bf16 or f16, f32 gates, cu_seqlens [N + 1] i32),
// D = K = V in {64, 128}, GQA, scale, use_qk_l2norm, an f32 initial_state and d_final_state, as
// our chunked Hopper kernels (src/engines/native/linear_attention/kda_bwd_kernels.hpp); gdn_bwd
// (with safe_gate and use_beta_sigmoid, f32 a_log and dt_bias) as kda_bwd with its gate broadcast
// over K (gdn_bwd_kernels.hpp). It recomputes the forward's chunk quantities itself; grids come
// from the capacity bound of the ragged schedule, never from a host read of cu_seqlens.
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"

namespace eagle::native {

std::unique_ptr<plan::Engine> make_kda_bwd_engine(int64_t id, const std::string& name);

}  // namespace eagle::native
