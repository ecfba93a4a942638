// cuDNN opened at run time: eagle links no cuDNN, so a machine without it plans everything else
// and says why the backend is absent. Also makes cudnn-frontend's own loads work: it reads
// cuDNN through the handle set here, and opens a CUDA runtime (libcudart.so.12/13) for its
// graph wrappers, which on a machine with CUDA 13 only from pip is not on the loader's path.
#pragma once

#include <cstddef>
#include <string>

namespace eagle::cudnn {

// cuDNN's C entry points the backend calls itself (the rest go through cudnn-frontend).
struct CudnnApi {
  int (*create)(void** handle) = nullptr;
  int (*destroy)(void* handle) = nullptr;
  int (*set_stream)(void* handle, void* stream) = nullptr;
  const char* (*error_string)(int status) = nullptr;
};

struct CudnnLibrary {
  bool loaded = false;
  std::size_t version = 0;  // cudnnGetVersion(): major * 10000 + minor * 100 + patch
  std::string status;       // loaded from where and which version, or why not
  CudnnApi api;
};

// The library as EAGLE_CUDNN_LIBRARY now asks (unset: the usual search, see
// engines/loader/dynamic_library.hpp). Memoized per value of that variable, so a program (or a
// test) that points it elsewhere gets an answer for that value; never throws.
const CudnnLibrary& cudnn_library();

// "9.19.0" from cudnnGetVersion()'s number.
std::string version_string(std::size_t version);

}  // namespace eagle::cudnn
