// Internal: the reverse pass over the top-level nodes of a recording, recorded into a recorder
// (the same recording, or a new one reading the forward's built arrays).
#pragma once

#include <functional>
#include <vector>

#include "eagle/graph/recording.hpp"

namespace eagle::diff::detail {

struct Seed {
  NodeArgInfo view;  // of the forward; its contents after the walked nodes
  Value cotangent;
};
struct Target {
  NodeArgInfo view;  // of the forward
  int start = -1;    // the node whose output it is (-1: what it holds before the walked nodes)
};
// A forward view as a value of the recorder recorded into.
using ViewMap = std::function<Value(const NodeArgInfo&)>;

// The first of `order` (top-level nodes) writing `buffer`, or -1 (saves do not count).
int first_writer(const Recording& forward, const std::vector<int>& order, int buffer);

// Records into `r` the reverse of the nodes `order` of `forward` (top level, program order) and
// returns the gradients of `wrt`, in order. Nothing is recorded when it throws (run it inside
// Recorder::atomically).
std::vector<Value> record_reverse(Recorder& r, const Recording& forward,
                                  const std::vector<int>& order, const std::vector<Seed>& seeds,
                                  const std::vector<Target>& wrt, const ViewMap& map,
                                  const std::string& who);

}  // namespace eagle::diff::detail
