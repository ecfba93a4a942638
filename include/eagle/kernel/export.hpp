// Kernels written in C++ in a shared library of their own, for a program that loads them at run
// time (Python's eagle.load_kernels): the library lists its kernels with EAGLE_EXPORT_KERNELS,
// once, at namespace scope, and links eagle (the same libeagle the loader uses).
//
//   const eagle::Kernel& my_kernel();  // defined as any kernel (kernel.hpp, typed.hpp)
//   EAGLE_EXPORT_KERNELS(my_kernel())
#pragma once

#include <vector>

#include "eagle/kernel/kernel.hpp"

namespace eagle {

// The symbol a loader looks up, and its type: it appends the library's kernels to `out`.
inline constexpr const char* kExportKernelsSymbol = "eagle_export_kernels";
using ExportKernelsFn = void (*)(std::vector<Kernel>* out);

}  // namespace eagle

#define EAGLE_EXPORT_KERNELS(...)                                              \
  extern "C" __attribute__((visibility("default"))) void eagle_export_kernels( \
      std::vector<eagle::Kernel>* out) {                                       \
    for (const eagle::Kernel& eagle_exported_kernel : {__VA_ARGS__})           \
      out->push_back(eagle_exported_kernel);                                   \
  }
