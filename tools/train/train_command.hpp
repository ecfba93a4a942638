#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace eagle::tools {

// `eagle train`: trains the small model of tools/train/model.hpp on packed batches of real
// documents, one recorded graph per step. Returns the exit code.
int run_train(const std::vector<std::string>& args);
void train_usage(std::FILE* to);

}  // namespace eagle::tools
