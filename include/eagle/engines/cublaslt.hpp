// cuBLASLt, which eagle opens at run time (never links): where it was loaded from, or why not.
#pragma once

#include <string>

namespace eagle::engines {

// One line: "cuBLASLt <version> loaded from <path>", or why the cublaslt engine is absent (no
// library found, a symbol missing, a build without CUDA). Loads the library on first use.
std::string cublaslt_status();

}  // namespace eagle::engines
