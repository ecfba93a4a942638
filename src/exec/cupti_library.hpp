// Internal: CUPTI (the CUDA profiling tools interface), opened at run time for GPU traces. eagle
// links none of it: without CUPTI everything runs, and Graph::set_tracing on a GPU says why it
// cannot trace. Needs no CUDA header, so its status is testable in every build.
#pragma once

#include <cstdint>
#include <string>

namespace eagle::detail {

// The entry points eagle uses, as plain addresses; exec/cuda/cupti_tracer.cpp casts each to the
// type cupti.h declares for it (decltype), so a signature is written in one place only.
struct CuptiEntryPoints {
  void* get_version = nullptr;         // cuptiGetVersion
  void* get_result_string = nullptr;   // cuptiGetResultString
  void* activity_enable = nullptr;     // cuptiActivityEnable
  void* activity_disable = nullptr;    // cuptiActivityDisable
  void* register_callbacks = nullptr;  // cuptiActivityRegisterCallbacks
  void* flush_all = nullptr;           // cuptiActivityFlushAll
  void* next_record = nullptr;         // cuptiActivityGetNextRecord
  void* graph_node_id = nullptr;       // cuptiGetGraphNodeId
  void* graph_id = nullptr;            // cuptiGetGraphId
  void* subscribe = nullptr;           // cuptiSubscribe
  void* unsubscribe = nullptr;         // cuptiUnsubscribe
  void* enable_callback = nullptr;     // cuptiEnableCallback
  void* graph_exec_id = nullptr;       // cuptiGetGraphExecId (optional: null when absent)
};

struct CuptiLibrary {
  bool loaded = false;
  uint32_t version = 0;  // cuptiGetVersion(): 130001 is CUDA 13.0 Update 1 (xxyyzz from 13.0 on)
  std::string path;      // the file opened
  std::string status;    // loaded from where and which version, or why not
  CuptiEntryPoints api;
};

// CUPTI's major version eagle reads records of: its activity records are laid out as the CUDA
// toolkit's cupti.h that eagle is built with (CUDA 13) declares them.
constexpr uint32_t kCuptiMajor = 13;

// The library as EAGLE_CUPTI_LIBRARY now asks (a file or a folder; unset: the loader's path
// including LD_LIBRARY_PATH, the CUDA toolkit's lib folders and extras/CUPTI/lib64, then the pip
// packages nvidia-cuda-cupti: nvidia/cu13/lib), memoized per value of that variable; never
// throws.
const CuptiLibrary& cupti_library();

}  // namespace eagle::detail
