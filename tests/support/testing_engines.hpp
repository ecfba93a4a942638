// An engine written against the plan layer's contract, as a library integration would be: it
// serves a one-node `identity` graph by copying the input, declares a library handle and a
// workspace, and builds its own CUDA graph nodes (a memcpy node it updates on bind).
#pragma once

#include <atomic>

#include "eagle/plan/manifest.hpp"

namespace eagle::test {

struct EngineCounts {
  std::atomic<int> runs{0}, populates{0}, updates{0}, handles_made{0}, handles_freed{0};
  std::atomic<bool> handle_seen{false};
  std::atomic<int> workspace_bytes_seen{0};
};
EngineCounts& engine_counts();  // reset by the caller

// A manifest whose only family (unanchored: pointwise graphs) has that one engine, on the CPU
// and on CUDA (sm 80+).
const plan::Manifest& populating_manifest();
// The same whose GPU engine nests the copy in a child graph of its own between two memsets of
// the workspace (as the cuDNN engine nests cuDNN's graph); it is never patched on bind.
const plan::Manifest& nesting_populating_manifest();

}  // namespace eagle::test
