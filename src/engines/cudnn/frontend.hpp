// cuDNN's side of the backend, through cudnn-frontend's graph API (the one translation unit
// that includes it): a Lowered description becomes a cudnn_frontend graph with eagle's uids,
// cuDNN's heuristics are asked one mode at a time, and a (engine id, knobs) config becomes a
// compiled plan that runs, populates and updates CUDA graphs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "eagle/plan/engine.hpp"
#include "engines/cudnn/lowering.hpp"

namespace eagle::cudnn {

// cuDNN's own engine id (its global engine index) and knobs by name.
struct EngineConfig {
  int64_t engine_id = -1;
  plan::Knobs knobs;
};

// Whether cuDNN (the loaded library's version, for `device`'s sm) takes the lowered graph:
// cudnn-frontend's validation, which needs no GPU. Throws NotSupported with cuDNN's reason.
void validate(const Lowered& lowered, const DeviceProperties& device);

// cuDNN's recommendation for one heuristic mode (A or FALLBACK), in cuDNN's order. Needs the
// GPU `device` names. Throws NotSupported when cuDNN declines.
std::vector<EngineConfig> query(const Lowered& lowered, plan::HeurMode mode,
                                const DeviceProperties& device);

// The plan for exactly `config` (kBackendHeuristicEngineId: cuDNN's own pick over modes A then
// FALLBACK). Throws NotSupported when cuDNN cannot build it.
// `graph` is the graph `lowered` came from (its tensors give the operand rules).
std::shared_ptr<const plan::CompiledPlan> build(const op::Graph& graph, const Lowered& lowered,
                                                const plan::PlanConfig& config,
                                                const plan::BuildContext& ctx);

// For benchmarks, which compare eagle's per-call work with cudnn-frontend's execute called
// directly: the variant pack a built cuDNN plan hands cuDNN for `operands` (in cuDNN's slot
// order), and that execute with those pointers and nothing else. False when `plan` is not a
// cuDNN plan (or cuDNN fails).
bool frontend_pointers(const plan::CompiledPlan& plan, const plan::OperandBuffer* operands,
                       void* workspace, std::vector<void*>& pointers);
bool frontend_execute(const plan::CompiledPlan& plan, void* handle, void** pointers,
                      void* workspace);

}  // namespace eagle::cudnn
