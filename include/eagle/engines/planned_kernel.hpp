// A planned operation as a kernel a recording can call: the builder records the call, the
// planner chooses the engine and config when the graph is built, and capture records whatever
// that plan launches.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "eagle/engines/builtin.hpp"
#include "eagle/kernel/kernel.hpp"
#include "eagle/op/graph.hpp"
#include "eagle/plan/autotune.hpp"

namespace eagle::engines {

// How a planned kernel picks its plan on a device: the modes of its plan list, and whether the
// entries that build are timed there first (plan::autotune, on scratch operands of the declared
// shapes and dtypes, zero-filled: zero ids, offsets and lengths are valid for every op), the
// fastest kept, instead of the list's first. Zero-filled operands time dense ops (matmuls,
// norms, losses) as they run; a graph reading sequence offsets (a cu_seqlens port or a ragged
// offset: varlen and linear attention) would see an empty batch, so it keeps the list's order.
// Timing costs the device time of warmup + reps runs of each timed entry and scratch memory for
// every operand, once per device, when a graph holding the kernel is built; the derivative's
// kernels are planned the same way.
struct PlanningOptions {
  std::vector<plan::HeurMode> modes = {plan::HeurMode::A};
  std::optional<plan::AutotuneOptions> autotune;  // unset: the first entry that builds
  // Matmul epilogues (planned_segments and the derivatives of planned kernels): a matmul and the
  // pointwise chain right after it as one segment, planned whole where an engine fuses them
  // (cuDNN's fused matmul) and as its pieces in one call elsewhere; a derivative's last matmul
  // handed to the next derivative, whose backward starts with the pointwise node it fuses with.
  // Off by default: cuDNN's fused kernels measured slower than cuBLASLt's GEMM and eagle's
  // pointwise kernel apart on the H100 (bench/python/epilogue.py, bf16 [4096, 512] x [512, 512]:
  // with gelu 9.33 against 8.03 us, with gelu_backward 11.46 against 8.55 us), and issue 12's
  // MLP step with them 201.9 us against 127.0 without (gradients.py, 2026-12-07).
  bool fuse_epilogues = false;
  // Engine names tried first, in this order, before the ranked list (and before autotune): the
  // first entry of a named engine that builds is kept. An engine's own name ("native_attention",
  // "cublaslt") or the backend's ("cudnn", for its entries). A named engine that does not serve
  // the graph (another family, or it declines) leaves the choice to the ranked list, so one list
  // can name the engines of a kernel and of its derivative's kernels. A name no engine of the
  // manifest or its backend has is refused (InvalidArgument) when the kernel is made.
  std::vector<std::string> prefer = {};
};

// A Kernel calling `graph` (which stays unplanned: the kernel keeps its own copy). Its array
// parameters are the graph's operands in ascending uid order, named after the tensors: graph
// inputs are read, outputs (set_output) are written; no scalars. When a graph recording it is
// built for a device (or it is launched eagerly there), a copy is planned for that device against
// `manifest` with `modes` and the first plan that builds is kept, once per device. In a CUDA graph
// the plan enters as its own nodes (when it populates them) or stream-captured, and bind()
// patches it in place. Throws InvalidArgument when the graph fails validate().
Kernel planned_kernel(const op::Graph& graph,
                      const std::vector<plan::HeurMode>& modes = {plan::HeurMode::A},
                      const plan::Manifest& manifest = builtin_manifest());
// As above, planned as `options` say. Throws InvalidArgument also for autotune options out of
// range (plan::autotune's rules), when the kernel is made.
Kernel planned_kernel(const op::Graph& graph, const PlanningOptions& options,
                      const plan::Manifest& manifest = builtin_manifest());

// One piece of an operation graph cut for planning (planned_segments): a planned kernel, and the
// uids in the whole graph of what it reads and writes (its parameters, in order).
struct PlannedSegment {
  Kernel kernel;
  std::vector<int64_t> inputs, outputs;
};

// `graph` cut into segments one engine family serves on its own (each run of consecutive
// pointwise nodes of one output dims is one segment, every other node a segment of its own),
// each a planned_kernel, in an order that respects the data flow. A segment's outputs are the
// tensors the whole graph outputs or another segment reads. For a forward mixing families (a
// norm, matmuls, a mask) that no one engine serves on a GPU: record the segments' calls in order
// (their derivatives are each segment's backward). Throws InvalidArgument when the graph fails
// validate().
std::vector<PlannedSegment> planned_segments(
    const op::Graph& graph, const std::vector<plan::HeurMode>& modes = {plan::HeurMode::A},
    const plan::Manifest& manifest = builtin_manifest());
std::vector<PlannedSegment> planned_segments(const op::Graph& graph, const PlanningOptions& options,
                                             const plan::Manifest& manifest = builtin_manifest());

}  // namespace eagle::engines
