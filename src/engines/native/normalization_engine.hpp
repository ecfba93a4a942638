// The native normalization engine: one softmax (last axis, or an axis with only size-1 dims
// after it), layer_norm or rms_norm node (forward, training statistics when asked), f32, f16 or
// bf16, dense row-major, as one launch of our CUDA kernels.
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"

namespace eagle::native {

std::unique_ptr<plan::Engine> make_normalization_engine(int64_t id, const std::string& name);

}  // namespace eagle::native
