// Derivatives of kernels as recorded calls. The reverse pass (eagle/diff/reverse.hpp) records, for
// each kernel node on a path from what is differentiated to the seeds, the vector-Jacobian
// product its rule records with the same Recorder: a derivative is itself made of kernels and
// runs wherever the forward runs.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "eagle/graph/recording.hpp"

namespace eagle {

// What a rule sees of one forward call, as values of the recording the reverse is recorded into.
struct VjpArgs {
  // Per array parameter, in the kernel's order: what it held at the forward call (a read or
  // read-write parameter before the call, a write-only one after it). Only the parameters the
  // rule reads (VjpRule::reads) are guaranteed to hold those contents (the forward saved them if
  // it overwrote them later); the others have the right shape and dtype only.
  std::vector<Value> arrays;
  std::vector<ScalarArg> scalars;
  // Per array parameter: for a written one, the cotangent of what it held after the call
  // (nullopt: zero); nullopt for a read-only one.
  std::vector<std::optional<Value>> cotangents;
  // Per array parameter: whether the gradient of this read or read-write parameter is wanted.
  std::vector<bool> wanted;
};

class VjpRule : public Derivative {
 public:
  // Records the vector-Jacobian product. Returns, per array parameter, the cotangent contribution
  // to a read or read-write parameter (its shape and dtype), or nullopt (zero, or not wanted);
  // entries of write-only parameters are ignored. A returned value may be a cotangent passed in.
  virtual std::vector<std::optional<Value>> vjp(Recorder& r, const VjpArgs& a) const = 0;
  // Whether vjp reads the contents of array parameter `slot`: a forward recorded with
  // RecordOptions::record saves such an array before a later node overwrites it.
  virtual bool reads(int slot) const = 0;
};

using VjpFn = std::function<std::vector<std::optional<Value>>(Recorder&, const VjpArgs&)>;
// A rule from a function and the array parameters whose contents it reads: set it as
// KernelDef::derivative.
std::shared_ptr<const Derivative> vjp_rule(VjpFn fn, std::vector<int> reads);

// The rule of `kernel`: its own (KernelDef::derivative), or, for the standard kernels
// (eagle/kernel/standard.hpp, defined in the layer below), the one this layer gives them;
// nullptr when it has none.
const VjpRule* derivative_of(const Kernel& kernel);

}  // namespace eagle
