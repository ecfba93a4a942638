// The cuDNN backend: one participant of the ranking (plan::Backend), set in the built-in
// manifest's spec. Its entries are cuDNN's own (engine id, knobs) per heuristic mode, plus the
// delegating entry that lets cuDNN pick; a graph it cannot lower, or a machine without cuDNN,
// gets [].
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/manifest.hpp"

namespace eagle::cudnn {

std::shared_ptr<const plan::Backend> make_backend();

// What entries() recorded for a frozen graph it declined ("" when none).
std::string recorded_decline(const op::Graph& graph);

}  // namespace eagle::cudnn
