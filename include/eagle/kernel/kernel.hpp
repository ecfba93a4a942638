// A kernel is a value: its name, parameters with their access, traits, and implementations.
// Kernels of any arity: the argument block is sized per kernel (eagle/kernel/args.hpp). For a
// shorter way to write one, see eagle/kernel/typed.hpp.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "eagle/core/array.hpp"
#include "eagle/core/device.hpp"
#include "eagle/kernel/arg_block.hpp"
#include "eagle/kernel/args.hpp"
#include "eagle/kernel/call.hpp"

namespace eagle {

class ThreadTeam;

enum class Access : uint8_t { read, write, read_write };
std::string_view access_name(Access access);
inline bool writes(Access a) {
  return a != Access::read;
}
inline bool reads(Access a) {
  return a != Access::write;
}

struct ArrayParam {
  std::string name;
  Access access;
  // The implementation reads the strides of this argument: a strided view may be passed as is.
  // Otherwise only contiguous (row-major) arrays are accepted.
  bool strided = false;
};

enum class ScalarKind : uint8_t { real, integer };

struct ScalarParam {
  std::string name;
  ScalarKind kind = ScalarKind::real;
};

// Shape and dtype of an array, without storage.
struct ArrayMeta {
  Shape shape;
  DType dtype;
};

using CpuFn = void (*)(const KernelArgs& args, const ThreadTeam& team);
using CudaShapeFn = CudaLaunchShape (*)(const KernelArgs& args, const DeviceProperties& device);
// An opaque sequence of GPU work (e.g. a library call) issued on `stream` (a cudaStream_t). A
// graph captures it as a whole, and captures it again when bind() moves its arrays.
using CudaCaptureFn = void (*)(const KernelArgs& args, void* workspace, void* stream);
using CudaWorkspaceFn = std::size_t (*)(const KernelArgs& args);

// A `__global__ void f(eagle::KernelArgsN<A, S>)` of the program that compiled it. Made by
// eagle::cuda_function(&f) (eagle/kernel/cuda_function.hpp) in a CUDA source: `resolve`, compiled
// there, turns the host stub into a handle any CUDA runtime can launch (a cudaKernel_t), since
// the program and eagle each carry their own runtime.
struct CudaFunction {
  const void* stub = nullptr;
  const void* (*resolve)(const void* stub) = nullptr;
  int arrays = -1;  // the A and S of the KernelArgsN the function takes
  int scalars = -1;
  explicit operator bool() const { return stub != nullptr; }
};

// The implementations of a kernel for one combination of dtypes.
struct KernelImpl {
  CpuFn cpu = nullptr;
  // A kernel function and how to size its grid; or, instead, a captured sequence with an
  // optional workspace.
  CudaFunction cuda_function;
  CudaShapeFn cuda_shape = nullptr;
  CudaCaptureFn cuda_capture = nullptr;
  CudaWorkspaceFn cuda_workspace = nullptr;

  bool has_cuda() const { return cuda_function || cuda_capture; }
  bool has_cpu() const { return cpu != nullptr; }
};

// A call whose implementation is decided when a graph is built (a planned operation): bound
// once per device, then run through the Call interface. Throws NotSupported when the call
// cannot be served on `device`.
class CallBinder {
 public:
  virtual ~CallBinder() = default;
  virtual std::shared_ptr<const Call> bind(Device device) const = 0;
};

// The slot a kernel's derivative fills (reverse mode is built on it): the diff layer defines
// the rule types. A kernel without a rule lying on a path from what is differentiated to the
// seeds is refused by the reverse pass.
class Derivative {
 public:
  virtual ~Derivative() = default;
};

// The whole description of a kernel.
struct KernelDef {
  std::string name;
  std::vector<ArrayParam> arrays;  // order of the argument block's arrays
  std::vector<ScalarParam> scalars;
  // Traits: per_sample = element i of every output depends only on element i of the inputs;
  // reduces = combines values across samples (a sum). They decide in-place merging of buffers.
  bool per_sample = true;
  bool reduces = false;
  // Checks the arrays the caller passes (every read or read-write parameter, in order) and
  // returns the shape and dtype of each write-only parameter, in order (shape {-1}: given by the
  // caller's output array). Throws InvalidArgument naming the argument and the rule. `scalars` are
  // the call's scalars. What it returns is checked (count, shapes, sizes).
  std::function<std::vector<ArrayMeta>(const std::vector<ArrayMeta>& inputs,
                                       const std::vector<ScalarArg>& scalars)>
      infer;
  // Chooses the implementation for the dtypes of all array parameters, in order. Throws
  // NotSupported naming the dtype it does not serve.
  std::function<KernelImpl(const std::vector<DType>& dtypes)> select;
  // Set for a planned call instead of implementations (select may then be left unset): no
  // scalars.
  std::shared_ptr<const CallBinder> binder;
  // The derivative rule, or none (see Derivative). `no_gradient` declares that the outputs carry
  // no gradient at all (condition cells): the reverse pass treats them as constants.
  std::shared_ptr<const Derivative> derivative;
  bool no_gradient = false;
  // Calls of kernels sharing a non-null key run in the order they were recorded: the recorder
  // adds an edge from each to the one before it (through the constructs holding them) and
  // refuses two in concurrent fork branches. Without it a built graph runs independent calls at
  // once. A communicator's collectives share one (every rank must issue them in one order).
  // Only compared, never dereferenced; whoever sets it keeps the object alive with the kernel.
  const void* order_key = nullptr;
};

class Kernel {
 public:
  // Validates the definition (names, at least one array, infer and select set).
  explicit Kernel(KernelDef def);

  const std::string& name() const { return def_->name; }
  const KernelDef& def() const { return *def_; }
  int num_inputs() const;   // read and read-write arrays, passed by the caller
  int num_outputs() const;  // write-only arrays, allocated by the call
  // Runs `infer` and checks what it returns: one meta per write-only parameter, shapes with
  // non-negative sizes (or {-1}) whose element count and byte size fit. Throws InvalidArgument.
  std::vector<ArrayMeta> infer(const std::vector<ArrayMeta>& inputs,
                               const std::vector<ScalarArg>& scalars) const;
  // Runs `select` and checks what it returns against the definition (a CUDA function taking the
  // kernel's KernelArgsN). Throws NotSupported (a decline) or InvalidArgument (a bad impl).
  KernelImpl select(const std::vector<DType>& dtypes) const;
  friend bool operator==(const Kernel& a, const Kernel& b) { return a.def_ == b.def_; }

 private:
  std::shared_ptr<const KernelDef> def_;
};

// The Call of an ordinary kernel `name`: its CPU function, or its CUDA function or captured
// sequence.
std::shared_ptr<const Call> make_kernel_call(const KernelImpl& impl, const std::string& name);

// One scalar argument (a real or an integer).
class Scalar {
 public:
  Scalar(double v) : value_{.f = v}, integer_(false) {}  // NOLINT(google-explicit-constructor)
  Scalar(float v) : Scalar(static_cast<double>(v)) {}    // NOLINT(google-explicit-constructor)
  Scalar(int v) : Scalar(static_cast<int64_t>(v)) {}     // NOLINT(google-explicit-constructor)
  Scalar(int64_t v) : integer_(true) { value_.i = v; }   // NOLINT(google-explicit-constructor)
  bool is_integer() const { return integer_; }
  // The value converted to what the parameter declares: a real to an integer truncates toward
  // zero and saturates at the int64 range, NaN becoming 0.
  ScalarArg as(ScalarKind kind) const;

 private:
  ScalarArg value_;
  bool integer_;
};

// Eager use, without a graph. Arrays (read and read-write parameters, in order) and scalars in
// order; outputs are allocated on the arrays' device and returned. On a CUDA device the kernel is
// issued on `stream` and may still be running on return. Refuses what recording refuses: an
// output overlapping another argument (unless it is the very same view of a per-sample
// kernel), a read-only output, a strided array for a parameter that takes contiguous ones.
std::vector<Array> launch(const Kernel& kernel, const std::vector<Array>& inputs,
                          const std::vector<Scalar>& scalars, const Stream& stream,
                          const ThreadTeam& team);
// As launch, but writes into caller-supplied outputs (shape and dtype must match).
void launch_into(const Kernel& kernel, const std::vector<Array>& inputs,
                 const std::vector<Scalar>& scalars, const std::vector<Array>& outputs,
                 const Stream& stream, const ThreadTeam& team);

}  // namespace eagle
