#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace eagle::tools {

// `eagle ops [NAME]`: lists the ops of the tables, or describes one. Returns the exit code.
int run_ops(const std::vector<std::string>& args);
void ops_usage(std::FILE* to);

}  // namespace eagle::tools
