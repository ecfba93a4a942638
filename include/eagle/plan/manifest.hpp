// The manifest: the one table of engine families and their slots. A family is a kind of graph,
// named by anchor node types; the manifest classifies a graph (a pure function of it), hands out
// engine ids, and gates opt-in engines. There is no registration call: an engine exists because
// a manifest lists it (tests build their own manifest with stand-in families).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "eagle/plan/engine.hpp"

namespace eagle::plan {

// One flat id space: the backend's engines [0, 10000), [10000, 20000) reserved, ours from
// 20000 in blocks of kFamilyBlock per family (id = 20000 + block * kFamilyBlock + slot).
inline constexpr int64_t kBackendIdEnd = 10000;
inline constexpr int64_t kOwnIdBegin = 20000;
inline constexpr int64_t kFamilyBlock = 100;
// The backend's delegating entry: the backend picks among candidates it never lists.
inline constexpr int64_t kBackendHeuristicEngineId = kBackendIdEnd - 1;

// The backend (a vendor library's planner) as one participant of the ranking, not a dependency.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // The backend's recommendation for one mode (engine ids below kBackendHeuristicEngineId), or
  // [] when it declines the graph or is not installed.
  virtual std::vector<PlanConfig> entries(const op::Graph& graph, HeurMode mode,
                                          const DeviceProperties& device) const = 0;
  // Whether it offers the delegating entry for this graph.
  virtual bool delegates(const op::Graph& graph) const = 0;
  virtual std::shared_ptr<const CompiledPlan> build(const op::Graph& graph,
                                                    const PlanConfig& config,
                                                    const BuildContext& ctx) const = 0;
};

// What a family's heuristics hook is handed. What it returns IS the plan list, position for
// position: nothing reorders it. It must name concrete configs (every declared knob axis), and
// must not list one (engine_id, knobs) twice (dedupe() keeps the first).
struct RankInput {
  std::vector<HeurMode> modes;
  const Facts* facts = nullptr;
  const DeviceProperties* device = nullptr;
  std::vector<const Engine*> offered;  // the family's offered engines, in slot order
  std::vector<PlanConfig> backend;     // tagged with their mode; the delegating entry last
};
using Heuristics = std::vector<PlanConfig> (*)(const RankInput& input);
// Keeps the first of every (engine_id, knobs).
void dedupe(std::vector<PlanConfig>& plans);
// The hook of a family that declares none: the offered engines whose capabilities match, each at
// its first knob point, then the backend's entries.
std::vector<PlanConfig> unranked(const RankInput& input);

using EngineFactory = std::unique_ptr<Engine> (*)(int64_t id, const std::string& name);

struct EngineSlot {
  std::string name;
  EngineFactory make;
  // Opt-in engines are offered only when the manifest's opt-in variable is set to 1.
  bool opt_in = false;
};

struct EngineFamily {
  std::string name;
  int block;                         // its id block; fixed, so ids survive edits of the table
  std::vector<std::string> anchors;  // node ops that name this family
  Analyzer analyzer = nullptr;       // none: the base facts
  Heuristics heuristics = nullptr;   // none: unranked
  std::vector<EngineSlot> slots;
};

struct ManifestSpec {
  std::vector<EngineFamily> families;
  std::string unanchored_family;  // the family of a graph naming no anchor ("" = none)
  std::string mixed_family;       // of a graph naming anchors of two families ("" = none)
  std::shared_ptr<const Backend> backend;
  std::string opt_in_variable = "EAGLE_ENABLE_OPT_IN_ENGINES";
};

class Manifest {
 public:
  // Instantiates every slot's engine with the id the manifest hands it. Throws InvalidArgument
  // on a malformed table (duplicate names or blocks, an anchor claimed twice, too many slots).
  explicit Manifest(ManifestSpec spec);

  // The family of a graph, or nullptr: a pure function of the graph's node ops.
  const EngineFamily* family_for(const op::Graph& graph) const;
  const EngineFamily& family(const std::string& name) const;  // InvalidArgument when absent
  int64_t engine_id(const std::string& family, int slot) const;

  struct Decoded {
    bool backend = false;
    const EngineFamily* family = nullptr;
    int slot = -1;
  };
  // Any id back to its family and slot (or the backend); InvalidArgument for an id no one holds.
  Decoded decode(int64_t engine_id) const;
  // Our engine with this id, or nullptr for a backend id.
  const Engine* engine(int64_t engine_id) const;
  // The family's engines on offer now (opt-in slots only when enabled), in slot order.
  std::vector<const Engine*> offered(const EngineFamily& family) const;
  bool opt_in_enabled() const;

  const std::vector<EngineFamily>& families() const { return spec_.families; }
  const Backend* backend() const { return spec_.backend.get(); }

 private:
  ManifestSpec spec_;
  std::vector<std::vector<std::unique_ptr<Engine>>> engines_;  // [family][slot]
};

}  // namespace eagle::plan
