// Deferred calls (Recorder::call_deferred): a call recorded right before the first later call
// that depends on it (reads or writes what it writes, or writes what it reads), before a device
// construct, fork or saving region opens or closes, at finish; or never, when the next
// derivative takes it over to fuse it into a kernel of its own (a matmul producing a cotangent
// and the pointwise node reading it). Dependencies are judged by whole buffers, as they stand
// when the later call comes (a merge may have moved a value).
#include <utility>
#include <variant>

#include "eagle/core/error.hpp"
#include "graph/state.hpp"

namespace eagle {

namespace {

// The value ids of a deferred call's array arguments, and of its outputs.
std::vector<int> argument_ids(const DeferredCall& call) {
  std::vector<int> ids;
  for (const Arg& a : call.args)
    if (const Value* v = std::get_if<Value>(&a.get())) ids.push_back(v->id());
  return ids;
}
std::vector<int> output_ids(const DeferredCall& call) {
  std::vector<int> ids;
  for (const BufferArg& b : call.options.buffers) ids.push_back(std::get<Value>(b).id());
  return ids;
}

bool shares_buffer(const Recording::State& s, int value, const std::vector<int>& others) {
  const int b = s.values[static_cast<std::size_t>(value)].buffer;
  for (int o : others)
    if (s.values[static_cast<std::size_t>(o)].buffer == b) return true;
  return false;
}

// The index of the deferred call whose one output is all of `v`'s array, or -1.
int deferred_writing(const Recording::State& s, const Value& v, const char* who) {
  const Recording::State::ValueData& d = s.value(v, who);
  if (!d.strides.empty() || d.byte_offset != 0) return -1;
  for (std::size_t i = 0; i < s.deferred.size(); ++i) {
    const std::vector<int> outputs = output_ids(s.deferred[i]);
    if (outputs.size() != 1) continue;
    const Recording::State::ValueData& out = s.values[static_cast<std::size_t>(outputs[0])];
    if (out.buffer == d.buffer && out.dtype == d.dtype &&
        checked_numel(out.shape, who) == checked_numel(d.shape, who))
      return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

void Recording::State::flush_deferred_before(const std::vector<int>& reads,
                                             const std::vector<int>& writes) {
  for (std::size_t i = 0; i < deferred.size();) {
    const DeferredCall& d = deferred[i];
    bool depends = false;
    for (int o : output_ids(d))
      depends = depends || shares_buffer(*this, o, reads) || shares_buffer(*this, o, writes);
    for (int in : argument_ids(d)) depends = depends || shares_buffer(*this, in, writes);
    if (!depends) {
      ++i;
      continue;
    }
    flush_deferred_at(i);
    i = 0;  // recording it may have recorded others before it
  }
}

void Recording::State::flush_deferred() {
  while (!deferred.empty()) flush_deferred_at(0);
}

void Recording::State::flush_deferred_at(std::size_t index) {
  DeferredCall d = deferred[index];
  deferred.erase(deferred.begin() + static_cast<std::ptrdiff_t>(index));
  std::vector<std::string> now = std::exchange(scopes, d.scopes);
  try {
    Recorder(self).call_all(d.kernel, d.args, d.options);
  } catch (...) {
    scopes = std::move(now);
    deferred.insert(deferred.begin() + static_cast<std::ptrdiff_t>(index), std::move(d));
    throw;
  }
  scopes = std::move(now);
}

const Recorder::DeferredTag* Recorder::deferred_tag(const Value& v) const {
  const Recording::State& s = *rec_->s_;
  const int i = deferred_writing(s, v, "Recorder::deferred_tag");
  return i < 0 ? nullptr : s.deferred[static_cast<std::size_t>(i)].tag.get();
}

std::vector<Arg> Recorder::take_deferred(const Value& v) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::take_deferred");
  const int i = deferred_writing(s, v, "Recorder::take_deferred");
  if (i < 0)
    throw InvalidArgument(
        "Recorder::take_deferred: no deferred call waits to write this value's whole array "
        "(it was recorded already, or never deferred)");
  std::vector<Arg> args = std::move(s.deferred[static_cast<std::size_t>(i)].args);
  s.deferred.erase(s.deferred.begin() + i);
  return args;
}

}  // namespace eagle
