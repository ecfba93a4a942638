// The native loss engine: one cross_entropy node (ignore_index, label smoothing, reductions
// none, sum and mean, the lse output) or cross_entropy_bwd (from the forward's lse when wired),
// f32, f16 or bf16 logits, i32 or i64 targets, f32 dloss and lse, dense row-major. A target
// outside [0, C) other than ignore_index gives NaN (loss_kernels.hpp says why).
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"

namespace eagle::native {

std::unique_ptr<plan::Engine> make_loss_engine(int64_t id, const std::string& name);

}  // namespace eagle::native
