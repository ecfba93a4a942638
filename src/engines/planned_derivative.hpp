// Internal: the derivative rule of a planned operation (engines::planned_kernel). Its
// vector-Jacobian product is the backward op::Graph of the operation (op::backward), recorded
// as calls of planned kernels, so it is planned over the same engines when the graph holding it
// is built.
#pragma once

#include <memory>
#include <vector>

#include "eagle/engines/builtin.hpp"
#include "eagle/engines/planned_kernel.hpp"
#include "eagle/kernel/kernel.hpp"
#include "eagle/op/graph.hpp"

namespace eagle::engines::detail {

std::shared_ptr<const Derivative> planned_derivative(const op::Graph& graph,
                                                     const PlanningOptions& options,
                                                     const plan::Manifest& manifest);

}  // namespace eagle::engines::detail
