#include "engines/cudnn/backend.hpp"

#include <mutex>

#include "eagle/core/error.hpp"
#include "engines/cudnn/frontend.hpp"
#include "engines/cudnn/loader.hpp"
#include "engines/cudnn/lowering.hpp"

namespace eagle::cudnn {

namespace {

// Why entries() gave [] for a graph, kept with the frozen graph for explain/describe.
struct DeclineNote {
  mutable std::mutex mutex;
  mutable std::string why;
};
const char kNoteKey = 0;

const DeclineNote* note_of(const op::Graph& graph) {
  if (!graph.frozen()) return nullptr;
  return static_cast<const DeclineNote*>(
      graph.memo(&kNoteKey, [] { return std::make_shared<const DeclineNote>(); }).get());
}

void note(const op::Graph& graph, plan::HeurMode mode, const std::string& why) {
  if (const DeclineNote* n = note_of(graph)) {
    std::lock_guard<std::mutex> lock(n->mutex);
    const std::string line = "mode " + std::string(plan::heur_mode_name(mode)) + ": " + why;
    if (n->why.find(line) == std::string::npos) n->why += (n->why.empty() ? "" : "; ") + line;
  }
}

class CudnnBackend final : public plan::Backend {
 public:
  std::string name() const override { return "cudnn"; }

  std::vector<plan::PlanConfig> entries(const op::Graph& graph, plan::HeurMode mode,
                                        const DeviceProperties& device) const override {
    try {
      const Lowered lowered = lower(graph);
      std::vector<plan::PlanConfig> out;
      for (EngineConfig& c : query(lowered, mode, device))
        out.push_back({c.engine_id, std::move(c.knobs), mode, ""});
      if (out.empty()) note(graph, mode, "cuDNN's heuristics returned no config it can replay");
      return out;
    } catch (const NotSupported& e) {
      note(graph, mode, e.what());
      return {};
    }
  }

  // Offered when cuDNN is loaded and the graph lowers; the family hook places it only beside
  // entries of the backend's own (which say the device can run it).
  bool delegates(const op::Graph& graph) const override {
    try {
      lower(graph);  // first: it declines most graphs without touching the loader
    } catch (const NotSupported&) {
      return false;
    }
    return cudnn_library().loaded;
  }

  std::shared_ptr<const plan::CompiledPlan> build(const op::Graph& graph,
                                                  const plan::PlanConfig& config,
                                                  const plan::BuildContext& ctx) const override {
    return cudnn::build(graph, lower(graph), config, ctx);
  }
};

}  // namespace

std::shared_ptr<const plan::Backend> make_backend() {
  return std::make_shared<CudnnBackend>();
}

std::string recorded_decline(const op::Graph& graph) {
  const DeclineNote* n = note_of(graph);
  if (!n) return "";
  std::lock_guard<std::mutex> lock(n->mutex);
  return n->why;
}

}  // namespace eagle::cudnn
