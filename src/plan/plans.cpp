#include "eagle/plan/plans.hpp"

#include <optional>
#include <stdexcept>

#include "eagle/core/error.hpp"

namespace eagle::plan {

struct ExecutionPlans::State {
  op::Graph graph;
  const Manifest* manifest = nullptr;
  DeviceProperties device;
  std::optional<Device> target;  // the attached device planned for, when there is one
  const EngineFamily* family = nullptr;
  std::shared_ptr<const Facts> facts;
  OperandLayout layout;
  std::vector<PlanConfig> plans;
  std::vector<PlanConfig> backend_entries;  // what the backend offered (to check the hook)
  std::vector<std::shared_ptr<const CompiledPlan>> compiled;
  std::vector<std::string> declined;
  int pinned = -1;
  int selected = -1;
  std::mutex build_mutex;
};

namespace {

std::string knobs_str(const Knobs& k) {
  std::string out;
  for (const auto& [name, v] : k) out += (out.empty() ? "" : ",") + name + "=" + std::to_string(v);
  return out;
}

std::string plan_name(const Manifest& m, const PlanConfig& p) {
  std::string base;
  if (const Engine* e = m.engine(p.engine_id)) {
    base = e->name();
  } else {
    base = (m.backend() ? m.backend()->name() : std::string("backend")) + ":" +
           (p.engine_id == kBackendHeuristicEngineId ? std::string("heuristic")
                                                     : std::to_string(p.engine_id));
  }
  return p.knobs.empty() ? base : base + "[" + knobs_str(p.knobs) + "]";
}

// The hook's list must be concrete, known and free of duplicates: anything else is a bug in the
// hook, not an answer for the caller.
void check_hook_result(const ExecutionPlans::State& s, const std::vector<const Engine*>& offered,
                       const std::vector<PlanConfig>& plans) {
  const std::string who = "heuristics of family '" + (s.family ? s.family->name : "") + "': ";
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const PlanConfig& p = plans[i];
    for (std::size_t j = 0; j < i; ++j)
      if (plans[j].same_config(p))
        throw std::logic_error(who + "lists " + plan_name(*s.manifest, p) + " twice");
    const Engine* e = nullptr;
    try {
      e = s.manifest->engine(p.engine_id);
    } catch (const InvalidArgument& unknown) {  // an id no one holds: the hook's bug
      throw std::logic_error(who + "names " + unknown.what());
    }
    if (e) {
      bool on_offer = false;
      for (const Engine* o : offered) on_offer = on_offer || o == e;
      if (!on_offer) throw std::logic_error(who + "names engine " + e->name() + ", not on offer");
      const std::string bad = e->capabilities().knob_error(p.knobs);
      if (!bad.empty()) throw std::logic_error(who + e->name() + ": " + bad);
    } else {
      bool given = false;
      for (const PlanConfig& b : s.backend_entries) given = given || b.same_config(p);
      if (!given)
        throw std::logic_error(who + "names backend entry " + std::to_string(p.engine_id) +
                               " the backend did not offer");
    }
  }
}

// Validates, claims and freezes the graph, then attaches its facts. Validation runs first so a
// graph that fails it is left unplanned and unfrozen.
std::unique_ptr<ExecutionPlans::State> start(op::Graph graph, const Manifest& manifest,
                                             const DeviceProperties& device, const char* who) {
  graph.validate();
  graph.claim_for_planning(who);
  graph.freeze();
  auto s = std::make_unique<ExecutionPlans::State>();
  s->graph = graph;
  s->manifest = &manifest;
  s->device = device;
  s->family = manifest.family_for(graph);
  s->facts = facts_for(graph, s->family && s->family->analyzer ? s->family->analyzer : &base_facts);
  s->layout = OperandLayout(graph);
  return s;
}

}  // namespace

ExecutionPlans ExecutionPlans::create(const op::Graph& graph, const Manifest& manifest,
                                      const DeviceProperties& device,
                                      const std::vector<HeurMode>& modes) {
  if (modes.empty())
    throw InvalidArgument("create_execution_plans: modes must name at least one heuristic mode");
  auto s = start(graph, manifest, device, "create_execution_plans");
  // One backend query per mode, each entry tagged with the mode that produced it. OPENSOURCE is
  // mode A without the backend. A mode the backend declines contributes nothing.
  bool asked_backend = false;
  if (const Backend* b = manifest.backend()) {
    for (HeurMode mode : modes) {
      if (mode == HeurMode::OPENSOURCE) continue;
      asked_backend = true;
      try {
        for (PlanConfig p : b->entries(s->graph, mode, device)) {
          p.mode = mode;
          s->backend_entries.push_back(std::move(p));
        }
      } catch (const NotSupported&) {
      }
    }
    if (asked_backend && b->delegates(s->graph))
      s->backend_entries.push_back({kBackendHeuristicEngineId, {}, std::nullopt, ""});
  }
  RankInput in;
  in.modes = modes;
  in.facts = s->facts.get();
  in.device = &s->device;
  if (s->family) in.offered = manifest.offered(*s->family);
  in.backend = s->backend_entries;
  const Heuristics hook = s->family && s->family->heuristics ? s->family->heuristics : &unranked;
  s->plans = hook(in);
  check_hook_result(*s, in.offered, s->plans);
  for (PlanConfig& p : s->plans) p.name = plan_name(manifest, p);
  s->compiled.resize(s->plans.size());
  s->declined.resize(s->plans.size());
  return ExecutionPlans(std::move(s));
}

ExecutionPlans ExecutionPlans::create(const op::Graph& graph, const Manifest& manifest,
                                      Device device, const std::vector<HeurMode>& modes) {
  ExecutionPlans plans = create(graph, manifest, DeviceProperties::query(device), modes);
  plans.s_->target = device;
  return plans;
}

ExecutionPlans ExecutionPlans::create_for(const op::Graph& graph, const Manifest& manifest,
                                          Device device, int64_t engine_id, const Knobs& knobs) {
  ExecutionPlans plans =
      create_for(graph, manifest, DeviceProperties::query(device), engine_id, knobs);
  plans.s_->target = device;
  return plans;
}

ExecutionPlans ExecutionPlans::create_for(const op::Graph& graph, const Manifest& manifest,
                                          const DeviceProperties& device, int64_t engine_id,
                                          const Knobs& knobs) {
  const Manifest::Decoded d = manifest.decode(engine_id);
  const EngineFamily* family = manifest.family_for(graph);
  if (d.backend && !manifest.backend())
    throw InvalidArgument("create_execution_plan: engine id " + std::to_string(engine_id) +
                          " is a backend id and the manifest has no backend");
  if (!d.backend && d.family != family)
    throw InvalidArgument("create_execution_plan: engine id " + std::to_string(engine_id) +
                          " belongs to family '" + d.family->name + "'; the graph is " +
                          (family ? "of family '" + family->name + "'" : "of no family"));
  if (const Engine* e = manifest.engine(engine_id)) {
    const std::string bad = e->capabilities().knob_error(knobs);
    if (!bad.empty()) throw InvalidArgument("create_execution_plan: " + e->name() + ": " + bad);
  }
  auto s = start(graph, manifest, device, "create_execution_plan");
  PlanConfig p{engine_id, knobs, std::nullopt, ""};
  if (d.backend) s->backend_entries.push_back(p);
  p.name = plan_name(manifest, p);
  s->plans.push_back(p);
  s->compiled.resize(1);
  s->declined.resize(1);
  return ExecutionPlans(std::move(s));
}

ExecutionPlans::ExecutionPlans(std::unique_ptr<State> s) : s_{std::move(s)} {}

ExecutionPlans::State* ExecutionPlans::Holder::operator->() const {
  if (!state)
    throw InvalidArgument(
        "ExecutionPlans: this object was moved from and holds no plans; use the one it moved to");
  return state.get();
}
ExecutionPlans::ExecutionPlans(ExecutionPlans&&) noexcept = default;
ExecutionPlans& ExecutionPlans::operator=(ExecutionPlans&&) noexcept = default;
ExecutionPlans::~ExecutionPlans() = default;

const op::Graph& ExecutionPlans::graph() const {
  return s_->graph;
}
const std::string& ExecutionPlans::family() const {
  static const std::string none;
  return s_->family ? s_->family->name : none;
}
const Facts& ExecutionPlans::facts() const {
  return *s_->facts;
}
const OperandLayout& ExecutionPlans::layout() const {
  return s_->layout;
}
int ExecutionPlans::count() const {
  return static_cast<int>(s_->plans.size());
}

namespace {
void check_index(const char* who, int index, int count) {
  if (index < 0 || index >= count)
    throw InvalidArgument(std::string(who) + ": index " + std::to_string(index) +
                          " is outside the plan list [0, " + std::to_string(count) + ")");
}
}  // namespace

const PlanConfig& ExecutionPlans::at(int index) const {
  check_index("ExecutionPlans::at", index, count());
  return s_->plans[index];
}
const std::string& ExecutionPlans::name_at(int index) const {
  return at(index).name;
}

void ExecutionPlans::build_plan_at_index(int index) {
  check_index("build_plan_at_index", index, count());
  std::lock_guard<std::mutex> lock(s_->build_mutex);
  if (s_->compiled[index]) return;
  const PlanConfig& p = s_->plans[index];
  BuildContext ctx{s_->device, &s_->layout, s_->target};
  try {
    std::shared_ptr<const CompiledPlan> built;
    if (const Engine* e = s_->manifest->engine(p.engine_id)) {
      const std::string why = e->capabilities().mismatch(*s_->facts, s_->device);
      if (!why.empty()) throw NotSupported(e->name() + ": " + why);
      e->check_support(s_->graph, *s_->facts, s_->device);
      built = e->build_plan(s_->graph, *s_->facts, p, ctx);
    } else {
      built = s_->manifest->backend()->build(s_->graph, p, ctx);
    }
    if (!built) throw std::logic_error(p.name + ": build returned no plan");
    s_->compiled[index] = std::move(built);
    s_->declined[index].clear();
  } catch (const NotSupported& e) {
    s_->declined[index] = e.what();
    throw;
  }
}

bool ExecutionPlans::is_built(int index) const {
  check_index("is_built", index, count());
  return s_->compiled[index] != nullptr;
}

namespace {
// The compiled plan of entry `index`, which the at-index call `who` needs built.
const std::shared_ptr<const CompiledPlan>& built_entry(
    const char* who, int index, const std::vector<std::shared_ptr<const CompiledPlan>>& compiled) {
  check_index(who, index, static_cast<int>(compiled.size()));
  if (!compiled[index])
    throw InvalidArgument(std::string(who) + ": plan " + std::to_string(index) +
                          " is not built; call build_plan_at_index first");
  return compiled[index];
}
}  // namespace

std::size_t ExecutionPlans::workspace_size_at_index(int index) const {
  return built_entry("workspace_size_at_index", index, s_->compiled)->workspace_bytes();
}

std::shared_ptr<const CompiledPlan> ExecutionPlans::compiled_at(int index) const {
  return built_entry("compiled_at", index, s_->compiled);
}

void ExecutionPlans::execute_plan_at_index(int index, const VariantPack& pack,
                                           const ExecutionContext& ctx) const {
  const auto& plan = built_entry("execute_plan_at_index", index, s_->compiled);
  if (!pack.layout().same_as(s_->layout))
    throw InvalidArgument("execute: the variant pack was made for another plan's layout");
  run_or_explain(*plan, pack, ctx);
}

void ExecutionPlans::select_plan(int index) {
  check_index("select_plan", index, count());
  s_->pinned = index;
  s_->selected = s_->compiled[index] ? index : -1;
}

int ExecutionPlans::selected() const {
  return s_->selected;
}

int ExecutionPlans::build_plans() {
  if (s_->pinned >= 0) {
    try {
      build_plan_at_index(s_->pinned);
    } catch (const NotSupported& e) {
      throw NotSupported("build_plans: pinned plan " + std::to_string(s_->pinned) + " (" +
                         s_->plans[s_->pinned].name + ") declined: " + e.what());
    }
    return s_->selected = s_->pinned;
  }
  for (int i = 0; i < count(); ++i) {
    try {
      build_plan_at_index(i);
      return s_->selected = i;
    } catch (const NotSupported&) {
    }
  }
  std::string why = "build_plans: no plan of graph '" + s_->graph.name() + "' built (family " +
                    (s_->family ? "'" + s_->family->name + "'" : std::string("none")) + ", " +
                    std::to_string(count()) + " plans)";
  for (int i = 0; i < count(); ++i)
    why += "; " + std::to_string(i) + " " + s_->plans[i].name + ": " + s_->declined[i];
  // The family's engines the list leaves out because their capabilities do not match (a dtype,
  // device or sm they do not serve): often the engine the caller expected.
  if (s_->family) {
    std::string unlisted;
    for (const Engine* e : s_->manifest->offered(*s_->family)) {
      bool listed = false;
      for (const PlanConfig& p : s_->plans) listed = listed || p.engine_id == e->id();
      const std::string mismatch = e->capabilities().mismatch(*s_->facts, s_->device);
      if (!listed && !mismatch.empty())
        unlisted += (unlisted.empty() ? "" : ", ") + e->name() + " (" + mismatch + ")";
    }
    if (!unlisted.empty()) why += "; not listed: " + unlisted;
  }
  throw NotSupported(why);
}

std::vector<std::pair<int, std::string>> ExecutionPlans::declines() const {
  std::vector<std::pair<int, std::string>> out;
  for (int i = 0; i < count(); ++i)
    if (!s_->declined[i].empty()) out.emplace_back(i, s_->declined[i]);
  return out;
}

std::size_t ExecutionPlans::workspace_size() const {
  if (s_->selected < 0) throw InvalidArgument("workspace_size: no plan is built; call build_plans");
  return s_->compiled[s_->selected]->workspace_bytes();
}

void ExecutionPlans::execute(const VariantPack& pack, const ExecutionContext& ctx) const {
  if (s_->selected < 0)
    throw InvalidArgument("execute: no plan is built; call build_plans() first");
  if (!pack.layout().same_as(s_->layout))
    throw InvalidArgument("execute: the variant pack was made for another plan's layout");
  run_or_explain(*s_->compiled[s_->selected], pack, ctx);
}

std::shared_ptr<const CompiledPlan> ExecutionPlans::compiled() const {
  if (s_->selected < 0) throw InvalidArgument("compiled: no plan is built; call build_plans");
  return s_->compiled[s_->selected];
}

std::string ExecutionPlans::describe() const {
  std::string out = "graph '" + s_->graph.name() + "', family " +
                    (s_->family ? s_->family->name : std::string("(none)")) + ", " +
                    s_->facts->describe() + "\n";
  for (int i = 0; i < count(); ++i) {
    const PlanConfig& p = s_->plans[i];
    out += (i == s_->selected ? "* " : "  ") + std::to_string(i) + " " + p.name + " id " +
           std::to_string(p.engine_id) + " mode " +
           (p.mode ? std::string(heur_mode_name(*p.mode)) : std::string("-"));
    if (s_->compiled[i]) out += " built";
    if (!s_->declined[i].empty()) out += " declined: " + s_->declined[i];
    out += "\n";
  }
  return out;
}

void run_or_explain(const CompiledPlan& plan, const VariantPack& pack,
                    const ExecutionContext& ctx) {
  if (plan.run(pack.data(), ctx)) return;
  plan.explain(pack.data(), ctx);
  throw std::logic_error("execute: the plan refused the call but its checker names no rule");
}

}  // namespace eagle::plan
