// Capacity buckets (shared/seeds/ragged-cuda-graphs.txt): graphs recorded from one recording
// function for capacities T_1 < ... < T_k, replayed by picking the smallest T_b >= L, with L the
// active token count the host already knows (never a device read).
//
// - Inputs are declared once at their largest shape. Each bucket's graph sees, as its params,
//   prefix views of these backing arrays: rows [0, T_b) of the leading dimension for an input
//   that follows the capacity, the whole array otherwise (e.g. cu_seqlens [N + 1]). Filling the
//   backing array's first rows feeds whichever bucket runs next; nothing is copied between graphs.
// - The graphs' own arrays (intermediates, results, the reverse pass's copies) share one
//   MemoryArena sized for the largest of them: only one bucket runs at a time.
// - So a bucket's results are valid until the next launch of any bucket of the set. run() hands
//   them out with a generation; reading one after a later launch throws InvalidArgument.
//   Externals (r.external: parameters, optimizer state) are the caller's and persist.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "eagle/exec/graph.hpp"

namespace eagle {

class BucketSet;

// The results of one run of a bucket, checked against the set's generation when read.
class BucketResults {
 public:
  // Result i; throws InvalidArgument when another launch of the set has happened since (the
  // memory now holds that launch's values), or i is out of range.
  const Array& operator[](std::size_t i) const;
  std::size_t size() const { return arrays_.size(); }
  int bucket() const { return bucket_; }
  int64_t capacity() const { return capacity_; }
  uint64_t generation() const { return generation_; }
  bool valid() const;

 private:
  friend class BucketSet;
  std::vector<Array> arrays_;
  int bucket_ = -1;
  int64_t capacity_ = 0;
  uint64_t generation_ = 0;
  std::shared_ptr<const std::atomic<uint64_t>> current_;
};

class BucketSet {
 public:
  struct Input {
    std::string name;  // the param name each bucket's graph gets
    Shape shape;       // at the largest capacity
    DType dtype;
    bool follows_capacity = true;  // the leading dimension is the capacity: a prefix per bucket
  };
  // What a bucket's recording sees.
  struct Bucket {
    int index;
    int64_t capacity;
    const BucketSet* set;
    // The input `name` as this bucket's param: r.param(name, b.input(name)).
    Array input(const std::string& name) const;
  };
  using Body = std::function<void(Recorder&, const Bucket&)>;

  // Allocates the backing arrays on `device`, records `body` once per capacity, sizes one arena
  // for the largest graph and builds every graph in it. Capacities must be positive and strictly
  // increasing; an input that follows the capacity must have a leading dimension equal to the
  // largest. Throws InvalidArgument otherwise (naming the argument), or what recording and
  // building throw.
  // `build` is passed to every graph's build with its arena set to the set's, and its stream
  // (when it names none, a new one): every graph of the set launches on that one stream.
  BucketSet(std::vector<int64_t> capacities, std::vector<Input> inputs, Device device,
            const Body& body, const RecordOptions& options = {}, const BuildOptions& build = {});

  // The bucket for `active` rows: the smallest capacity >= active. Throws InvalidArgument when
  // active < 0 or exceeds the largest capacity.
  int select(int64_t active) const;
  // The backing array of input `name` (largest shape): fill its first rows before run().
  const Array& backing(const std::string& name) const;
  // Selects the bucket for `active`, launches its graph once, waits, runs its device checks
  // and returns its results with the new generation.
  BucketResults run(int64_t active);
  // The same without waiting: selects the bucket, moves the generation on (earlier results are
  // stale from here), launches its graph once and returns the bucket. Then graph(b).synchronize()
  // and graph(b).results() (launch() alone runs no device check: run() and Graph::operator()
  // do).
  int launch(int64_t active);

  const std::vector<int64_t>& capacities() const { return capacities_; }
  Graph& graph(int bucket);
  Device device() const { return device_; }
  uint64_t generation() const { return *generation_; }
  // Memory, from eagle's allocator: the shared arena (every bucket's own arrays and calls'
  // workspaces), the backing arrays, and what the largest bucket's graph would take built alone
  // (its own arrays and workspaces allocated, its inputs at full size).
  std::size_t arena_bytes() const { return arena_->bytes(); }
  const MemoryArena& arena() const { return *arena_; }
  // The stream every graph of the set launches on.
  const Stream& stream() const { return graphs_.front().stream(); }
  std::size_t backing_bytes() const;
  std::size_t largest_alone_bytes() const;

 private:
  // The index of input `name`; throws InvalidArgument naming `who` when there is none.
  std::size_t input_index(const std::string& name, const char* who) const;
  std::vector<int64_t> capacities_;
  std::vector<Input> inputs_;
  std::vector<Array> backing_;
  Device device_;
  std::shared_ptr<MemoryArena> arena_;
  std::vector<Graph> graphs_;
  std::shared_ptr<std::atomic<uint64_t>> generation_;
};

}  // namespace eagle
