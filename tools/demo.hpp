#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace eagle::tools {

// `eagle demo`: a 2-D heat-equation solver recorded as one graph; prints eager vs graph
// timing per step. Returns the process exit code (2 for a bad option).
int run_demo(const std::vector<std::string>& args);
void demo_usage(std::FILE* to);

}  // namespace eagle::tools
