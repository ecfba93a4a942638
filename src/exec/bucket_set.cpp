#include "eagle/exec/bucket_set.hpp"

#include <algorithm>

#include "eagle/core/error.hpp"

namespace eagle {

const Array& BucketResults::operator[](std::size_t i) const {
  if (i >= arrays_.size())
    throw InvalidArgument("BucketResults: result " + std::to_string(i) + " of " +
                          std::to_string(arrays_.size()));
  if (!valid())
    throw InvalidArgument("BucketResults: stale result of bucket " + std::to_string(bucket_) +
                          " (capacity " + std::to_string(capacity_) + ", generation " +
                          std::to_string(generation_) + "): a later launch of the bucket set " +
                          "(generation " + std::to_string(current_ ? current_->load() : 0) +
                          ") has reused its memory; copy results before launching again");
  return arrays_[i];
}

bool BucketResults::valid() const {
  return current_ && current_->load() == generation_;
}

Array BucketSet::Bucket::input(const std::string& name) const {
  const std::size_t i = set->input_index(name, "BucketSet");
  const Array& whole = set->backing_[i];
  return set->inputs_[i].follows_capacity ? whole.slice(0, 0, capacity) : whole;
}

std::size_t BucketSet::input_index(const std::string& name, const char* who) const {
  for (std::size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i].name == name) return i;
  throw InvalidArgument(std::string(who) + ": no input named '" + name + "'");
}

BucketSet::BucketSet(std::vector<int64_t> capacities, std::vector<Input> inputs, Device device,
                     const Body& body, const RecordOptions& options,
                     const BuildOptions& build_options)
    : capacities_(std::move(capacities)),
      inputs_(std::move(inputs)),
      device_(device),
      generation_(std::make_shared<std::atomic<uint64_t>>(0)) {
  if (capacities_.empty()) throw InvalidArgument("BucketSet: capacities must not be empty");
  for (std::size_t i = 0; i < capacities_.size(); ++i)
    if (capacities_[i] < 1 || (i > 0 && capacities_[i] <= capacities_[i - 1]))
      throw InvalidArgument(
          "BucketSet: capacities must be positive and strictly increasing, "
          "got " +
          std::to_string(capacities_[i]) + " at index " + std::to_string(i));
  if (!body) throw InvalidArgument("BucketSet: the recording function is empty");
  const int64_t largest = capacities_.back();
  for (const Input& in : inputs_) {
    if (in.follows_capacity && (in.shape.empty() || in.shape[0] != largest))
      throw InvalidArgument("BucketSet: input '" + in.name + "' follows the capacity, so its " +
                            "leading dimension must be the largest capacity " +
                            std::to_string(largest));
    if (std::count_if(inputs_.begin(), inputs_.end(),
                      [&](const Input& o) { return o.name == in.name; }) > 1)
      throw InvalidArgument("BucketSet: input '" + in.name + "' is declared twice");
    backing_.push_back(Array::empty(in.shape, in.dtype, device));
  }
  std::vector<std::shared_ptr<const Recording>> recordings;
  std::size_t arena = MemoryArena::kAlignment;
  for (std::size_t i = 0; i < capacities_.size(); ++i) {
    const Bucket b{static_cast<int>(i), capacities_[i], this};
    recordings.push_back(Recording::record([&](Recorder& r) { body(r, b); }, options));
    arena = std::max(arena, MemoryArena::bytes_for(*recordings.back(), device));
  }
  arena_ = std::make_shared<MemoryArena>(device, arena);
  BuildOptions build = build_options;
  build.arena = arena_;
  // One stream for the set: a bucket launched after another waits for it on the device, so two
  // graphs never use the shared arena at once, whoever launches them. (Graph::build refuses a
  // stream on another device.)
  if (!build.stream) build.stream = std::make_shared<Stream>(device);
  for (auto& rec : recordings) {
    graphs_.push_back(Graph::from(rec));
    graphs_.back().build(device, build);
  }
}

int BucketSet::select(int64_t active) const {
  if (active < 0 || active > capacities_.back())
    throw InvalidArgument("BucketSet::select: active = " + std::to_string(active) +
                          " rows is outside [0, " + std::to_string(capacities_.back()) +
                          "], the largest capacity");
  const auto it = std::lower_bound(capacities_.begin(), capacities_.end(), active);
  return static_cast<int>(it - capacities_.begin());
}

const Array& BucketSet::backing(const std::string& name) const {
  return backing_[input_index(name, "BucketSet::backing")];
}

Graph& BucketSet::graph(int bucket) {
  if (bucket < 0 || bucket >= static_cast<int>(graphs_.size()))
    throw InvalidArgument("BucketSet::graph: bucket " + std::to_string(bucket) + " of " +
                          std::to_string(graphs_.size()));
  return graphs_[static_cast<std::size_t>(bucket)];
}

BucketResults BucketSet::run(int64_t active) {
  const int b = select(active);
  // The generation moves before the launch: results of earlier runs are stale from here on,
  // also when the launch throws.
  const uint64_t generation = generation_->fetch_add(1) + 1;
  const std::vector<Array>& results = graphs_[static_cast<std::size_t>(b)]();
  BucketResults out;
  out.arrays_ = results;
  out.bucket_ = b;
  out.capacity_ = capacities_[static_cast<std::size_t>(b)];
  out.generation_ = generation;
  out.current_ = generation_;
  return out;
}

int BucketSet::launch(int64_t active) {
  const int b = select(active);
  generation_->fetch_add(1);
  graphs_[static_cast<std::size_t>(b)].launch(1);
  return b;
}

std::size_t BucketSet::backing_bytes() const {
  std::size_t total = 0;
  for (const Array& a : backing_) total += a.nbytes();
  return total;
}

std::size_t BucketSet::largest_alone_bytes() const {
  return graphs_.back().allocated_bytes() + graphs_.back().workspace_bytes() + backing_bytes();
}

}  // namespace eagle
