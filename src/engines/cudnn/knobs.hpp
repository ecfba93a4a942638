// cuDNN's knobs by name: eagle's plan list spells a config's knobs as names, cudnn-frontend as
// its KnobType_t numbers (a persisted, append-only enumeration). One table maps the two.
#pragma once

#include <cstdint>
#include <string>

namespace eagle::cudnn {

// "tile_size" for KnobType_t::TILE_SIZE; "" for a number the table does not name.
std::string knob_name(int64_t knob_type);
// The KnobType_t number of a name, or -1.
int64_t knob_type(const std::string& name);

}  // namespace eagle::cudnn
