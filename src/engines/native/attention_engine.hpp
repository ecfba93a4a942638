// The native varlen attention engines: one sdpa (forward, with the logsumexp statistics when
// asked) or sdpa_bwd node in the THD layout (q [Tq, H, D], k and v [Tk, Hk, D], cu_seqlens_q
// and cu_seqlens_kv [N + 1] i32), bf16 or f16, D = Dv in {64, 128}, as our Hopper kernels
// (src/engines/native/attention). Grids come from the capacity bound of the ragged schedule
// (knob `schedule`: 0 flat, 1 persistent), never from a max_seqlen; the backward's knob
// `deterministic` (0, 1) trades float atomics on dq for a separate dq pass.
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"

namespace eagle::native {

std::unique_ptr<plan::Engine> make_attention_engine(int64_t id, const std::string& name);
std::unique_ptr<plan::Engine> make_attention_bwd_engine(int64_t id, const std::string& name);

}  // namespace eagle::native
