// eagle's own manifest: the built-in families and their engines, and planning against it.
#pragma once

#include <vector>

#include "eagle/core/device.hpp"
#include "eagle/plan/manifest.hpp"
#include "eagle/plan/plans.hpp"

namespace eagle::engines {

// Families (block, anchors): pointwise (0, none: graphs of pointwise and reduction nodes only),
// gemm (1, matmul), normalization (2, softmax, layer_norm, rms_norm and their _bwd),
// embedding (3, embedding, embedding_bwd), loss (4, cross_entropy, cross_entropy_bwd), sdpa (5),
// sdpa_bwd (6), linear_attention (7, gdn, kda, gdn2), linear_attention_bwd (8, their _bwd),
// composite (9, anchors of two families). Slot 0 of every family is the reference engine (CPU);
// pointwise slot 1 is the native CUDA engine, gemm slot 1 cuBLASLt (opened at run time:
// eagle::engines::cublaslt_status() says from where, or why not).
const plan::Manifest& builtin_manifest();

// Plans `graph` for `device` against the built-in manifest.
plan::ExecutionPlans create_execution_plans(const op::Graph& graph, Device device,
                                            const std::vector<plan::HeurMode>& modes = {
                                                plan::HeurMode::A});
// Replays a known (engine_id, knobs) for `graph` on `device`.
plan::ExecutionPlans create_execution_plan(const op::Graph& graph, Device device, int64_t engine_id,
                                           const plan::Knobs& knobs = {});

}  // namespace eagle::engines
