// `eagle train --plans`: the plan list of every planned operation of the training step (each
// forward segment, its recompute and backward), with the entry the planner keeps.
#pragma once

#include <cstdio>

#include "train/model.hpp"

namespace eagle::train {

// Prints, for the model's op graphs at capacity (T, N) on `device`, each segment's plan list and
// the chosen entry (or why none builds). Returns the number of segments no engine serves.
int print_plans(const ModelConfig& config, int64_t capacity, int64_t slots, Device device,
                std::FILE* to);

}  // namespace eagle::train
