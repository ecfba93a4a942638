// The native normalization engine: one softmax (last axis, or an axis with only size-1 dims
// after it), layer_norm or rms_norm node (forward, training statistics when asked), or their
// backward (softmax_bwd, layer_norm_bwd, rms_norm_bwd with dscale and dbias), f32, f16 or bf16
// with f32 statistics, dense row-major, as our CUDA kernels (one launch; the backward's
// parameter gradients add a deterministic second pass).
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"

namespace eagle::native {

std::unique_ptr<plan::Engine> make_normalization_engine(int64_t id, const std::string& name);

}  // namespace eagle::native
