#pragma once

#include <string>
#include <vector>

namespace eagle::tools {

// `eagle demo`: a 2-D heat-equation solver recorded as one graph; prints eager vs graph
// timing per step. Returns the process exit code.
int run_demo(const std::vector<std::string>& args);

}  // namespace eagle::tools
