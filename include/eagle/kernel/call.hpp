// The one interface every node of a graph runs through: ordinary kernels, planned operations and
// library calls are three producers of it. A Call runs with an explicit context (stream, library
// handle, workspace, threads) owned by whoever issues it (a built graph or the eager launch path),
// enters a CUDA graph as one kernel node, a child graph it populates itself, or a stream capture,
// and is patched in place when bind() moves its arrays.
#pragma once

#include <cstddef>
#include <memory>

#include "eagle/core/device.hpp"
#include "eagle/kernel/arg_block.hpp"
#include "eagle/kernel/args.hpp"

namespace eagle {

class Stream;
class ThreadTeam;

// Explicit per-call resources; nothing is read from ambient state.
struct CallContext {
  void* stream = nullptr;  // the cudaStream_t work is issued on (CUDA devices)
  void* handle = nullptr;  // the handle of the library the call declares (Call::library)
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  const ThreadTeam* team = nullptr;  // CPU: the threads to split work over (none: this thread)
  Device device = Device::cpu();

  // A context issuing on `stream` (its device and native handle), with no handle or workspace.
  static CallContext on(const Stream& stream, const ThreadTeam* team = nullptr);
};

// An engine library whose calls need a handle (cuDNN, cuBLASLt). Whoever issues calls creates
// one handle per library and stream, when the first call needs it, and destroys it at the end.
struct Library {
  const char* name;
  // Creates a handle for `device` whose work goes on `stream` (a cudaStream_t); throws on failure.
  void* (*create)(Device device, void* stream);
  void (*destroy)(void* handle) noexcept;
  // Binds a handle to another stream (cuDNN's; a no-op for cuBLASLt, which takes the stream per
  // call), so that one handle serves every stream of a thread. Null: a handle serves the stream
  // it was made for only. Throws on failure.
  void (*set_stream)(void* handle, void* stream) = nullptr;
};

// CUDA launch geometry for one call.
struct CudaLaunchShape {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;
};

// One CUDA kernel launch: the kernel (a cudaKernel_t as void*, see eagle/kernel/cuda_function.hpp)
// and its geometry; the parameter is the call's argument block.
struct CudaLaunch {
  const void* kernel = nullptr;
  CudaLaunchShape shape;
};

class Call {
 public:
  virtual ~Call() = default;

  // The library whose handle run() expects in ctx.handle, or none.
  virtual const Library* library() const { return nullptr; }
  // Device (CUDA) or host (CPU) bytes run() needs in ctx.workspace for these arguments.
  virtual std::size_t workspace_bytes(const ArgBlock& args, Device device) const {
    (void)args, (void)device;
    return 0;
  }
  // Runs the call: on the CPU now, over ctx.team; on a GPU issued on ctx.stream (it may still
  // be running on return). Throws InvalidArgument for a call it refuses; then nothing ran.
  virtual void run(const ArgBlock& args, const CallContext& ctx) const = 0;

  // How the call enters a CUDA graph, in order of preference:
  // 1. exactly one kernel of known geometry: fill `out`, return true. It becomes one kernel node
  //    whose parameters bind() patches. The kernel and its geometry must follow from the
  //    arguments' shapes, dtypes and strides, never their addresses: bind() keeps them and sets
  //    only the moved argument block (a call choosing by alignment enters by 2 or 3 instead).
  virtual bool cuda_kernel(const ArgBlock& args, const DeviceProperties& device,
                           CudaLaunch& out) const {
    (void)args, (void)device, (void)out;
    return false;
  }
  // 2. its own nodes: add them to `graph`, an empty cudaGraph_t that becomes a child graph node;
  //    return false when it cannot (capture is used instead).
  virtual bool populate_cuda_graph(const ArgBlock& args, const CallContext& ctx,
                                   void* graph) const {
    (void)args, (void)ctx, (void)graph;
    return false;
  }
  //    After bind() moved arrays: bring `graph` (populated by this call) up to date in place;
  //    return false when it cannot (the graph is populated anew).
  virtual bool update_cuda_graph(const ArgBlock& args, const CallContext& ctx, void* graph) const {
    (void)args, (void)ctx, (void)graph;
    return false;
  }
  // 3. otherwise run() is stream-captured once (and captured again when bind() moves arrays).
};

// Issues `call` eagerly on `stream`: the library handle the call needs (eager_handle) and a
// workspace for this call (stream-ordered on a GPU).
void run_on_stream(const Call& call, const ArgBlock& args, const Stream& stream,
                   const ThreadTeam* team);

// The handle of `library` for a call issued eagerly on `stream`. With set_stream: one per
// thread, library and device, made on first use and bound to `stream` before each call, so a
// stream first seen inside a CUDA graph capture (torch.cuda.graph's side stream) reuses the handle
// made before the capture, where creating one would allocate and break the capture, and a
// borrowed stream made per call does not make a handle per call. Without: kept by the stream.
std::shared_ptr<void> eager_handle(const Library& library, const Stream& stream);

}  // namespace eagle
