// The manifest tests build to set stand-in engines beside the reference.
#pragma once

#include <utility>
#include <vector>

#include "eagle/plan/manifest.hpp"
#include "engines/reference/reference_engine.hpp"

namespace eagle::test {

// One family serving pointwise graphs (unanchored): the reference engine first (slot order ranks
// it first), then `stand_ins`, the engines a test sets beside it.
inline plan::ManifestSpec pointwise_beside_reference(std::vector<plan::EngineSlot> stand_ins) {
  std::vector<plan::EngineSlot> slots = {{"reference", &reference::make_reference_engine, false}};
  slots.insert(slots.end(), stand_ins.begin(), stand_ins.end());
  plan::ManifestSpec spec;
  spec.families = {{"pointwise", 0, {}, nullptr, nullptr, std::move(slots)}};
  spec.unanchored_family = "pointwise";
  return spec;
}

}  // namespace eagle::test
