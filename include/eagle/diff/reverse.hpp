// Reverse mode over recorded graphs: gradients as graphs of kernels, built once and replayed.
//
// A forward recorded with RecordOptions{.record = true} keeps a name map (params, externals,
// labeled Recorder::empty arrays, results) and saves what a derivative reads that a later node
// overwrites in place. The reverse pass walks the top-level nodes last to first and records each
// kernel's vector-Jacobian product (eagle/graph/derivative.hpp); cotangents of an array read by
// several nodes are summed; only nodes on a path from `wrt` to the seeds are differentiated.
// Device constructs reverse on the device: an if / switch as the same construct on its saved
// condition, a fork as a fork of its branches reversed (waits on shared cotangents), a capped loop
// (for_, or while_ with max_turns; loops inside loops too) as a while_ counting the forward's
// turns down and reading each turn's row of the per-turn tapes. Refused (and nothing is
// recorded): a name that is not in the map, a kernel without a derivative on such a path
// (NotSupported naming the node and the kernel), a while_ without max_turns on such a path
// (NotSupported naming the node and the fix), a value overwritten and not saved (RecordError).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "eagle/core/array.hpp"
#include "eagle/exec/graph.hpp"
#include "eagle/graph/derivative.hpp"
#include "eagle/graph/recording.hpp"

namespace eagle::diff {

// A name of the forward's name map whose final contents are differentiated, with its cotangent
// (undefined: ones). The reverse graph takes a given cotangent as a param named "seed.<name>",
// which bind() swaps.
struct Seed {
  Seed(std::string n) : name(std::move(n)) {}  // NOLINT(google-explicit-constructor)
  Seed(const char* n) : name(n) {}             // NOLINT(google-explicit-constructor)
  Seed(std::string n, Array c) : name(std::move(n)), cotangent(std::move(c)) {}
  std::string name;
  Array cotangent;
};

// The reverse of a built forward graph (recorded with RecordOptions{.record = true}) as a new
// graph, built on the forward's device, whose results are the gradients of the `wrt` names, in
// order: of a param or external, with respect to what it holds when a launch starts; of a
// graph-owned array, with respect to what its first writer wrote. It reads the forward's arrays
// as they are now: run forward() then reverse() for each step; after forward.bind() or a
// rebuild, make the reverse again. For a training step in one launch, see gradients().
Graph reverse(const Graph& forward, const std::vector<Seed>& seeds,
              const std::vector<std::string>& wrt);

// One graph per training step: inside a recording made with RecordOptions{.record = true}, at
// the top level, records the reverse of everything recorded so far and returns the gradients of
// `wrt` (same meaning as above), in order. `seeds` are values whose current contents are
// differentiated; `cotangents` (empty, or one per seed) their cotangents (default: ones).
// Values recorded after it (an optimizer step updating the weights in place) no longer save what
// the reverse read (Recorder::release_saves).
std::vector<Value> gradients(Recorder& r, const std::vector<Value>& seeds,
                             const std::vector<Value>& wrt,
                             const std::vector<Value>& cotangents = {});

}  // namespace eagle::diff
