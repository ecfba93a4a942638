// A kernel is a value: its name, parameters with their access, traits, and implementations.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "eagle/core/array.hpp"
#include "eagle/core/device.hpp"
#include "eagle/kernel/args.hpp"

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

// CUDA launch geometry for one call.
struct CudaLaunchShape {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;
};

using CpuFn = void (*)(const KernelArgs& args, const ThreadTeam& team);
using CudaShapeFn = CudaLaunchShape (*)(const KernelArgs& args, const DeviceProperties& device);
// An opaque sequence of GPU work (e.g. a library call) issued on `stream` (a cudaStream_t).
// It is captured as a whole; eagle cannot patch its pointers, so bind rebuilds such graphs.
using CudaCaptureFn = void (*)(const KernelArgs& args, void* workspace, void* stream);
using CudaWorkspaceFn = std::size_t (*)(const KernelArgs& args);

// The implementations of a kernel for one combination of dtypes.
struct KernelImpl {
  CpuFn cpu = nullptr;
  // A `__global__ void f(eagle::KernelArgs)` function and how to size its grid; or, instead,
  // a captured sequence with an optional workspace.
  const void* cuda_function = nullptr;
  CudaShapeFn cuda_shape = nullptr;
  CudaCaptureFn cuda_capture = nullptr;
  CudaWorkspaceFn cuda_workspace = nullptr;

  bool has_cuda() const { return cuda_function || cuda_capture; }
};

// A call whose implementation is decided when a graph is built (a planned operation): bound
// once per node for the graph's device, then run with the arrays' addresses.
class BoundCall {
 public:
  virtual ~BoundCall() = default;
  virtual std::size_t workspace_bytes() const { return 0; }
  // `data`: one address per array parameter, in order. On a CUDA device the work is issued on
  // `stream` (a cudaStream_t; a graph captures it once); on the CPU it runs now, on `team`.
  virtual void run(void* const* data, void* workspace, void* stream,
                   const ThreadTeam* team) const = 0;
};
class CallBinder {
 public:
  virtual ~CallBinder() = default;
  // Throws NotSupported when the call cannot be served on `device`.
  virtual std::shared_ptr<const BoundCall> bind(Device device) const = 0;
};
// A bound call takes more arrays than a kernel's argument block holds.
inline constexpr int kMaxBoundCallArrays = 64;

// The whole description of a kernel.
struct KernelDef {
  std::string name;
  std::vector<ArrayParam> arrays;  // order of KernelArgs::arrays
  std::vector<ScalarParam> scalars;
  // Traits: per_sample = element i of every output depends only on element i of the inputs;
  // reduces = combines values across samples (a sum). They decide in-place merging of buffers.
  bool per_sample = true;
  bool reduces = false;
  // Checks the arrays the caller passes (every read or read-write parameter, in order) and
  // returns the shape and dtype of each write-only parameter, in order. Throws InvalidArgument
  // naming the argument and the rule. `scalars` are the call's scalars.
  std::function<std::vector<ArrayMeta>(const std::vector<ArrayMeta>& inputs,
                                       const std::vector<ScalarArg>& scalars)>
      infer;
  // Chooses the implementation for the dtypes of all array parameters, in order. Throws
  // NotSupported naming the dtype it does not serve.
  std::function<KernelImpl(const std::vector<DType>& dtypes)> select;
  // Set for a planned call instead of implementations (select may then be left unset): up to
  // kMaxBoundCallArrays arrays, no scalars.
  std::shared_ptr<const CallBinder> binder;
};

class Kernel {
 public:
  // Validates the definition (names, at most kMaxKernelArrays/Scalars, infer and select set).
  explicit Kernel(KernelDef def);

  const std::string& name() const { return def_->name; }
  const KernelDef& def() const { return *def_; }
  int num_inputs() const;   // read and read-write arrays, passed by the caller
  int num_outputs() const;  // write-only arrays, allocated by the call
  friend bool operator==(const Kernel& a, const Kernel& b) { return a.def_ == b.def_; }

 private:
  std::shared_ptr<const KernelDef> def_;
};

// One scalar argument (a real or an integer).
class Scalar {
 public:
  Scalar(double v) : value_{.f = v}, integer_(false) {}  // NOLINT(google-explicit-constructor)
  Scalar(float v) : Scalar(static_cast<double>(v)) {}    // NOLINT(google-explicit-constructor)
  Scalar(int v) : Scalar(static_cast<int64_t>(v)) {}     // NOLINT(google-explicit-constructor)
  Scalar(int64_t v) : integer_(true) { value_.i = v; }   // NOLINT(google-explicit-constructor)
  bool is_integer() const { return integer_; }
  // The value converted to what the parameter declares.
  ScalarArg as(ScalarKind kind) const;

 private:
  ScalarArg value_;
  bool integer_;
};

// Pack arrays into the argument block; throws InvalidArgument for a non-contiguous array.
ArrayArg make_array_arg(const Array& a, const std::string& what);
// The same for contiguous memory at `data` of the given shape and dtype.
ArrayArg make_array_arg(void* data, const Shape& shape, DType dtype);

// Eager use, without a graph. Arrays (read and read-write parameters, in order) and scalars in
// order; outputs are allocated on the arrays' device and returned. On a CUDA device the kernel is
// issued on `stream` (cudaLaunchKernelEx) and may still be running on return.
std::vector<Array> launch(const Kernel& kernel, const std::vector<Array>& inputs,
                          const std::vector<Scalar>& scalars, const Stream& stream,
                          const ThreadTeam& team);
// As launch, but writes into caller-supplied outputs (shape and dtype must match).
void launch_into(const Kernel& kernel, const std::vector<Array>& inputs,
                 const std::vector<Scalar>& scalars, const std::vector<Array>& outputs,
                 const Stream& stream, const ThreadTeam& team);

}  // namespace eagle
