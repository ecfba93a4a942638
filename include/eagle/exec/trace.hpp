// Traces of replays: per launch, when each node of a graph ran, with its label and scope
// (Recorder::scope), as the Chrome / Perfetto trace-event JSON (chrome://tracing, ui.perfetto.dev).
// On the CPU the host schedule times each node with the steady clock. On a GPU the times are
// CUPTI's activity records (CUPTI, the CUDA toolkit's profiling library, opened at run time:
// cupti_status()); each kernel, memcpy and memset record of a launch is placed on the eagle node
// whose CUDA graph node ran it. Without CUPTI, Graph::set_tracing on a GPU throws NotSupported
// with cupti_status()'s reason.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace eagle {

struct TraceEvent {
  int node = -1;       // the recording's node id
  std::string label;   // the call's label or the kernel's name
  std::string scope;   // "block0/attention", or "" outside every scope
  std::string kernel;  // kernel name ("copy_in" for a param's copy)
  int64_t launch = 0;  // which launch since tracing was turned on, from 0
  // The worker that ran it (CPU) or the CUDA stream it ran on (GPU), 0-based in order of first
  // appearance.
  int thread = 0;
  // CPU: the steady clock. GPU: CUPTI's timestamps (ns; cuptiGetTimestamp's clock, to which
  // CUPTI converts the GPU's), comparable with each other but not with the steady clock.
  int64_t begin_ns = 0, end_ns = 0;
  // GPU: the CUDA kernel that ran ("memcpy" / "memset" for those); a planned op's node (a child
  // graph) gives one event per kernel of it. Empty on the CPU. A record CUPTI reports for the
  // graph that no node claims has node -1 and this name as its label.
  std::string device_kernel;
};

// Whether CUPTI (GPU traces) was found and where, or why not: "CUPTI 13.0.1 loaded from ...".
std::string cupti_status();

// The trace-event JSON of `events` ("X" complete events, microseconds from the first begin):
// name = label, cat = kernel, pid = `process` (a graph's name), tid = thread, args = node, scope,
// launch (and device_kernel when set).
std::string chrome_trace_json(const std::vector<TraceEvent>& events,
                              const std::string& process = "eagle");

// Writes chrome_trace_json to `path`; throws InvalidArgument when it cannot be written.
void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events,
                        const std::string& process = "eagle");

}  // namespace eagle
