// The native fused pointwise engine: a graph of any number of pointwise nodes (a DAG, with
// broadcasting graph inputs): the ops of our kernel table, comparisons, logical ops, where and
// cast, over tensors of f32, f16, bf16 or boolean (each its own), dense row-major, every output
// the full broadcast shape, as ONE launch of our interpreter kernel (fused_kernels.hpp).
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"

namespace eagle::native {

std::unique_ptr<plan::Engine> make_fused_engine(int64_t id, const std::string& name);

}  // namespace eagle::native
