// Traces of replays: per launch, when each node of a graph ran, with its label and scope
// (Recorder::scope), as the Chrome / Perfetto trace-event JSON (chrome://tracing, ui.perfetto.dev).
// On the CPU the host schedule times each node with the steady clock. On a GPU, tracing needs
// CUPTI's activity API (not built yet): Graph::set_tracing refuses it with NotSupported.
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
  int thread = 0;      // the worker that ran it (CPU), 0-based in order of first appearance
  int64_t begin_ns = 0, end_ns = 0;  // steady clock
};

// The trace-event JSON of `events` ("X" complete events, microseconds from the first begin):
// name = label, cat = kernel, pid = `process` (a graph's name), tid = thread, args = node, scope,
// launch.
std::string chrome_trace_json(const std::vector<TraceEvent>& events,
                              const std::string& process = "eagle");

// Writes chrome_trace_json to `path`; throws InvalidArgument when it cannot be written.
void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events,
                        const std::string& process = "eagle");

}  // namespace eagle
