// Internal: what a communicator's backend does for one collective call. The kernels
// (collectives.cpp) describe the call; the backend (the CPU group, NCCL) runs it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "eagle/comm/collectives.hpp"
#include "eagle/core/dtype.hpp"
#include "eagle/core/shape.hpp"
#include "eagle/kernel/args.hpp"
#include "eagle/kernel/call.hpp"

namespace eagle::comm::detail {

enum class Collective : uint8_t { all_reduce, reduce_scatter, all_gather, broadcast };
std::string_view collective_name(Collective c);

// One rank's side of a collective: what it was asked and its buffers (contiguous).
struct CollectiveCall {
  Collective kind = Collective::all_reduce;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  DType dtype = DType::f32;
  int ndim = 0;  // x's shape, kept inline: a call allocates nothing
  int64_t dims[kMaxDims] = {};
  const void* x = nullptr;
  void* out = nullptr;
  int64_t x_count = 0;    // elements of x
  int64_t out_count = 0;  // elements of out
  Shape shape() const { return Shape(dims, dims + ndim); }
  bool same_shape(const CollectiveCall& o) const {
    return ndim == o.ndim && std::equal(dims, dims + ndim, o.dims);
  }
};

class CommImpl {
 public:
  CommImpl(int rank, int size, Device device) : rank_(rank), size_(size), device_(device) {}
  virtual ~CommImpl() = default;
  CommImpl(const CommImpl&) = delete;
  CommImpl& operator=(const CommImpl&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  Device device() const { return device_; }
  virtual const char* kind() const = 0;
  // Runs (CPU) or issues on ctx.stream (GPU) this rank's side of `call`.
  virtual void run(const CollectiveCall& call, const CallContext& ctx) const = 0;
  // Adds `call`'s work to `graph` (an empty cudaGraph_t the executor keeps for the node's
  // life); false when the backend has no CUDA graph form.
  virtual bool populate_cuda_graph(const CollectiveCall& call, const CallContext& ctx,
                                   void* graph) const {
    (void)call, (void)ctx, (void)graph;
    return false;
  }

 private:
  int rank_, size_;
  Device device_;
};

}  // namespace eagle::comm::detail
