// The reference engine's per-op evaluators: each reads its node's inputs from the call's values
// (float64), computes with the reference math, and stores its outputs.
#pragma once

#include <vector>

#include "eagle/op/graph.hpp"
#include "engines/reference/math/dense.hpp"

namespace eagle::reference {

// The values of a graph's tensors during one call, by tensor index.
struct Env {
  std::vector<Dense> values;
};
using Eval = void (*)(const op::Node& node, Env& env);

// The evaluator of an op, or nullptr for an op the reference does not know.
Eval evaluator_for(const std::string& op);
Eval basic_evaluator(const std::string& op);      // pointwise and structured ops
Eval attention_evaluator(const std::string& op);  // sdpa and linear attention

// Helpers the evaluators share.
const Dense& input(const op::Node& node, const Env& env, const char* port);
const Dense* optional_input(const op::Node& node, const Env& env, const char* port);
// Stores an output; ports the node does not produce are dropped.
void store(const op::Node& node, Env& env, const char* port, Dense value);
// A real attribute, or `fallback` when the node leaves it unset (derived defaults: scale).
double real_attr(const op::Node& node, const char* name, double fallback);

}  // namespace eagle::reference
