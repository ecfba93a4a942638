// Recording the cu_seqlens check into a graph: one tiny kernel per launch, and a device check that
// makes g() throw InvalidArgument naming the rule and the first bad index.
#pragma once

#include <cstdint>
#include <string>

#include "eagle/graph/recording.hpp"

namespace eagle::ragged {

// Whether this build records the check (CMake option EAGLE_RAGGED_CHECKS, ON by default; OFF
// saves its one tiny kernel per launch, and bad metadata then goes unreported, though every
// ragged kernel still clamps what it reads).
bool checks_enabled();

// Records validate_cu_seqlens(cu_seqlens, T) and a device check on its error word (Recorder::
// check with throw_if_invalid): after each g() a broken batch throws; the graph stays usable and
// a later g() with a valid batch returns normally. `what` names the batch in the message.
// Returns the error word (u32 [2]), or an undefined Value (and records nothing) in a build
// configured with -DEAGLE_RAGGED_CHECKS=OFF.
Value validate(Recorder& r, const Value& cu_seqlens, int64_t tokens,
               const std::string& what = "cu_seqlens");

}  // namespace eagle::ragged
