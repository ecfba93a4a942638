// cuBLASLt opened at run time: its entry points typed from the toolkit's header (a compile-time
// dependency only) and resolved from whichever libcublasLt the loader finds, so libeagle neither
// links nor needs it, and a machine without it still plans everything on other engines.
#pragma once

#include <cstddef>
#include <string>

#ifdef EAGLE_HAVE_CUDA
#include <cublasLt.h>
#endif

namespace eagle::cublaslt {

#ifdef EAGLE_HAVE_CUDA
// The entry points the engine calls. The *_internal ones initialize descriptors in caller memory
// (the header's inline cublasLt*Init wrap them), which keeps allocation off the per-call path.
struct Api {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtGetVersion) get_version = nullptr;
  decltype(&cublasLtGetStatusName) status_name = nullptr;
  decltype(&cublasLtMatmulDescInit_internal) matmul_desc_init = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) matmul_desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutInit_internal) layout_init = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&cublasLtMatmulPreferenceInit_internal) preference_init = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) get_heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;

  // "CUBLAS_STATUS_NOT_SUPPORTED" (or the number when the library cannot name it).
  std::string name(cublasStatus_t status) const;
};
#else
struct Api {};
#endif

// One attempt to open cuBLASLt and resolve every entry point.
struct Loaded {
  bool ok = false;
  std::size_t version = 0;  // cublasLtGetVersion(): major * 10000 + minor * 100 + patch
  // "cuBLASLt 13.1.0 loaded from <path>", or why it was not: the search and every place tried,
  // a missing symbol, a major version other than the header's.
  std::string status;
  Api api;
};

// Opens the library now, as the environment says (EAGLE_CUBLASLT_LIBRARY, the loader's path, the
// CUDA toolkit, pip's nvidia/cublas/lib and nvidia/cu13/lib). Tests use it to see a library the
// environment hides; the engine uses process().
Loaded load();

// The process's cuBLASLt: load() once, on first use (thread-safe), kept for the process's life.
const Loaded& process();

}  // namespace eagle::cublaslt
