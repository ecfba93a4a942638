#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace eagle::tools {

// `eagle pack`: how a length distribution packs into token budgets T with candidate buffers B,
// and what T, N and buckets to capture. Returns the exit code.
int run_pack(const std::vector<std::string>& args);
void pack_usage(std::FILE* to);

}  // namespace eagle::tools
