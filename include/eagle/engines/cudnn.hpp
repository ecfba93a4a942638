// The cuDNN backend as a user sees it: whether cuDNN was found (and where, which version), and
// why it offers nothing for a graph. cuDNN is opened at run time; without it every graph still
// plans on the other engines.
#pragma once

#include <string>

#include "eagle/op/graph.hpp"

namespace eagle::engines {

// "cuDNN 9.19.0 loaded from <path>; CUDA runtime for cudnn-frontend: <path>", or why cuDNN is
// not used (not found: every place tried; too old; a build without CUDA). Follows
// EAGLE_CUDNN_LIBRARY (a file or folder; pointing it nowhere hides cuDNN). Never throws.
std::string cudnn_backend_status();

// Why the cuDNN backend offers no entries for `graph`: the lowering's decline (an op, dtype,
// layout or attribute it does not take), else what planning recorded (cuDNN absent, no GPU,
// cuDNN's own refusal, per heuristic mode); "" when it offered entries or was never asked.
std::string cudnn_decline_reason(const op::Graph& graph);

}  // namespace eagle::engines
