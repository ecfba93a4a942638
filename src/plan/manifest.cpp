#include "eagle/plan/manifest.hpp"

#include <cstdlib>
#include <set>

#include "eagle/core/error.hpp"

namespace eagle::plan {

void dedupe(std::vector<PlanConfig>& plans) {
  std::vector<PlanConfig> kept;
  for (PlanConfig& p : plans) {
    bool seen = false;
    for (const PlanConfig& k : kept) seen = seen || k.same_config(p);
    if (!seen) kept.push_back(std::move(p));
  }
  plans = std::move(kept);
}

std::vector<PlanConfig> unranked(const RankInput& in) {
  std::vector<PlanConfig> out;
  const HeurMode mode = in.modes.empty() ? HeurMode::A : in.modes.front();
  for (const Engine* e : in.offered)
    if (e->capabilities().mismatch(*in.facts, *in.device).empty())
      out.push_back({e->id(), e->capabilities().first_point(), mode, ""});
  out.insert(out.end(), in.backend.begin(), in.backend.end());
  dedupe(out);
  return out;
}

Manifest::Manifest(ManifestSpec spec) : spec_(std::move(spec)) {
  std::set<std::string> names;
  std::set<int> blocks;
  std::set<std::string> anchors;
  for (const EngineFamily& f : spec_.families) {
    if (!names.insert(f.name).second)
      throw InvalidArgument("Manifest: family '" + f.name + "' is listed twice");
    if (f.block < 0 || !blocks.insert(f.block).second)
      throw InvalidArgument("Manifest: family '" + f.name + "' block " + std::to_string(f.block) +
                            " is negative or taken");
    if (f.slots.size() > static_cast<std::size_t>(kFamilyBlock))
      throw InvalidArgument("Manifest: family '" + f.name + "' has more than " +
                            std::to_string(kFamilyBlock) + " slots");
    for (const std::string& a : f.anchors)
      if (!anchors.insert(a).second)
        throw InvalidArgument("Manifest: anchor '" + a + "' names two families");
  }
  for (const std::string* n : {&spec_.unanchored_family, &spec_.mixed_family})
    if (!n->empty() && !names.count(*n))
      throw InvalidArgument("Manifest: family '" + *n + "' is not in the table");
  for (const EngineFamily& f : spec_.families) {
    engines_.emplace_back();
    for (std::size_t s = 0; s < f.slots.size(); ++s) {
      const int64_t id = kOwnIdBegin + f.block * kFamilyBlock + static_cast<int64_t>(s);
      engines_.back().push_back(f.slots[s].make(id, f.slots[s].name));
      if (!engines_.back().back() || engines_.back().back()->id() != id)
        throw InvalidArgument("Manifest: slot '" + f.slots[s].name + "' of family '" + f.name +
                              "' did not make an engine with the id it was handed");
    }
  }
}

const EngineFamily* Manifest::family_for(const op::Graph& graph) const {
  const EngineFamily* found = nullptr;
  for (const op::Node& n : graph.nodes())
    for (const EngineFamily& f : spec_.families)
      for (const std::string& a : f.anchors) {
        if (a != n.op()) continue;
        if (found && found != &f)
          return spec_.mixed_family.empty() ? nullptr : &family(spec_.mixed_family);
        found = &f;
      }
  if (found) return found;
  return spec_.unanchored_family.empty() ? nullptr : &family(spec_.unanchored_family);
}

const EngineFamily& Manifest::family(const std::string& name) const {
  for (const EngineFamily& f : spec_.families)
    if (f.name == name) return f;
  throw InvalidArgument("Manifest: no family '" + name + "'");
}

int64_t Manifest::engine_id(const std::string& name, int slot) const {
  const EngineFamily& f = family(name);
  if (slot < 0 || slot >= static_cast<int>(f.slots.size()))
    throw InvalidArgument("Manifest: family '" + name + "' has no slot " + std::to_string(slot));
  return kOwnIdBegin + f.block * kFamilyBlock + slot;
}

Manifest::Decoded Manifest::decode(int64_t id) const {
  if (id >= 0 && id < kBackendIdEnd) return {true, nullptr, -1};
  if (id >= kOwnIdBegin) {
    const int64_t block = (id - kOwnIdBegin) / kFamilyBlock;
    const int64_t slot = (id - kOwnIdBegin) % kFamilyBlock;
    for (const EngineFamily& f : spec_.families)
      if (f.block == block && slot < static_cast<int64_t>(f.slots.size()))
        return {false, &f, static_cast<int>(slot)};
  }
  throw InvalidArgument("engine id " + std::to_string(id) +
                        " belongs to no family of the manifest (backend ids are [0, " +
                        std::to_string(kBackendIdEnd) + "), ours start at " +
                        std::to_string(kOwnIdBegin) + ")");
}

const Engine* Manifest::engine(int64_t id) const {
  const Decoded d = decode(id);
  if (d.backend) return nullptr;
  return engines_[static_cast<std::size_t>(d.family - spec_.families.data())][d.slot].get();
}

bool Manifest::opt_in_enabled() const {
  const char* v = std::getenv(spec_.opt_in_variable.c_str());
  return v && std::string(v) == "1";
}

std::vector<const Engine*> Manifest::offered(const EngineFamily& f) const {
  const bool opt_in = opt_in_enabled();
  const auto& engines = engines_.at(static_cast<std::size_t>(&f - spec_.families.data()));
  std::vector<const Engine*> out;
  for (std::size_t s = 0; s < f.slots.size(); ++s)
    if (!f.slots[s].opt_in || opt_in) out.push_back(engines[s].get());
  return out;
}

}  // namespace eagle::plan
