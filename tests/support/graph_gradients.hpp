// Gradients of a built CPU graph by float64 central differences: the oracle reverse-mode tests
// compare against.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "eagle/eagle.hpp"

namespace eagle::test {

// d result[index][0] / d param at `at`, by central differences (h = 1e-6) of the built graph,
// the param rebound for each evaluation and bound back to `at` afterwards.
std::vector<double> graph_finite_difference(Graph& g, const std::string& param, const Array& at,
                                            std::size_t index = 0);

}  // namespace eagle::test
