// Recorder::constant: scalars the graph fills once per device construct and arm, shared by every
// call that asks for the same value there (the constants of planned derivatives, above all).
#include <bit>
#include <string>
#include <tuple>

#include "eagle/core/error.hpp"
#include "eagle/kernel/standard.hpp"
#include "graph/state.hpp"

namespace eagle {

Value Recorder::constant(double value, DType dtype) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::constant");
  // The innermost construct and arm, fork branches included: a constant filled there is written
  // before any later read in the same list of nodes, and nowhere else is that sure.
  const std::pair<int, int> where = s.open.empty() ? std::pair{-1, -1} : s.open.back();
  const auto key = std::make_tuple(std::bit_cast<uint64_t>(value), static_cast<int>(dtype),
                                   where.first, where.second);
  if (auto it = s.constants.find(key); it != s.constants.end()) return s.handle(it->second);
  Transaction t(s);
  const Value out = empty({}, dtype, "constant " + std::to_string(value));
  const auto b = static_cast<std::size_t>(out.buffer());
  s.labeled[b] = false;  // named in messages, not in a recording's name map
  call(kernels::fill(), {value}, buffer(out));
  s.buffers[b].constant = true;
  s.constants[key] = out.id();
  t.commit();
  return out;
}

}  // namespace eagle
