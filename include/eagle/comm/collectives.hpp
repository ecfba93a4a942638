// Collectives as kernels: a recording calls them like any kernel, and a built graph runs them as
// one node each (the CPU group's rendezvous on the CPU, an NCCL call on the node's stream on a
// GPU, captured into the CUDA graph). Every rank records the same collectives in the same order.
// The kernel holds its communicator: a graph using it must be built on the communicator's device
// (else InvalidArgument at build). Arrays must be contiguous.
//
// dtypes: f32, f64, f16, bf16 (the CPU group reduces 16-bit floats in f32 and rounds once; NCCL
// reduces in the dtype itself), i32, i64 (sum, max, min: avg needs a floating dtype).
// A CPU group checks at each call that every rank passed the same collective, dtype and shape,
// and throws the same InvalidArgument on every rank when not; NCCL cannot check that.
#pragma once

#include <cstdint>
#include <string_view>

#include "eagle/comm/communicator.hpp"
#include "eagle/kernel/kernel.hpp"

namespace eagle::comm {

enum class ReduceOp : uint8_t { sum, avg, max, min };
std::string_view reduce_op_name(ReduceOp op);

// out = op over ranks of x (out has x's shape; out may be x itself: r.call(k, {x}, buffer(x))).
Kernel all_reduce(const Communicator& comm, ReduceOp op = ReduceOp::sum);
// x [K * n, ...] on each of K ranks -> out [n, ...]: rank r gets rows [r n, (r + 1) n) of the
// reduction. x's first dimension must be a multiple of K.
Kernel reduce_scatter(const Communicator& comm, ReduceOp op = ReduceOp::sum);
// x [n, ...] on each of K ranks -> out [K * n, ...]: rows [r n, (r + 1) n) hold rank r's x.
Kernel all_gather(const Communicator& comm);
// out = rank root's x on every rank (out has x's shape; out may be x itself). Throws
// InvalidArgument when root is outside [0, K).
Kernel broadcast(const Communicator& comm, int root);

}  // namespace eagle::comm
