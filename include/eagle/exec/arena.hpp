// One block of device memory that the graph-local arrays of several graphs share, for graphs of
// which only one runs at a time (a BucketSet's capacity buckets). A graph built with
// BuildOptions::arena lays its own arrays (outputs, temporaries, saved copies) out in the arena
// from offset 0 instead of allocating them, then one slot per call that asks for a workspace
// (planned operations, library calls); its params and externals stay the caller's.
//
// What the sharing means: a graph's results and intermediates are valid until another graph of
// the same arena launches. BucketSet hands results out with a generation that enforces this.
#pragma once

#include <cstddef>
#include <memory>

#include "eagle/core/array.hpp"
#include "eagle/core/device.hpp"

namespace eagle {

class Recording;

class MemoryArena {
 public:
  // Allocates `bytes` on `device` once. Throws InvalidArgument when bytes is 0.
  MemoryArena(Device device, std::size_t bytes);
  Device device() const { return storage_->device(); }
  std::size_t bytes() const { return storage_->bytes(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Offsets of the graph-local arrays are multiples of this.
  static constexpr std::size_t kAlignment = 256;
  // The bytes a graph of `recording` built on `device` takes in an arena: its own arrays and its
  // calls' workspaces (what Graph::build lays out). Binds planned operations for `device` (each
  // kernel caches its binding, so the build that follows binds nothing again); throws what
  // binding throws (NotSupported when no engine serves a planned operation there).
  static std::size_t bytes_for(const Recording& recording, Device device);

 private:
  std::shared_ptr<Storage> storage_;
};

}  // namespace eagle
