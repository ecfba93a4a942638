// Recorder::scope: names on the nodes recorded while a scope is open (traces, to_json).
#include "eagle/core/error.hpp"
#include "graph/state.hpp"

namespace eagle {

Recorder::Scope Recorder::scope(const std::string& name) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::scope");
  if (name.empty() || name.find('/') != std::string::npos)
    throw InvalidArgument("Recorder::scope: a scope name must be non-empty and hold no '/', got '" +
                          name + "'");
  s.scopes.push_back(name);
  return Scope(rec_);
}

void Recorder::close_scope(Recording* rec) {
  Recording::State& s = *rec->s_;
  if (!s.scopes.empty()) s.scopes.pop_back();
}

Recorder::Scope::~Scope() {
  close_scope(rec_);
}

}  // namespace eagle
