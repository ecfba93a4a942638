// The native fused pointwise engine: a graph of any number of pointwise nodes of our kernel
// table (a DAG, with broadcasting graph inputs), one float dtype (f32, f16, bf16), dense
// row-major operands, every output the full broadcast shape, as ONE launch of our interpreter
// kernel (fused_kernels.hpp).
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"

namespace eagle::native {

std::unique_ptr<plan::Engine> make_fused_engine(int64_t id, const std::string& name);

}  // namespace eagle::native
