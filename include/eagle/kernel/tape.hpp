// Kernels of the per-turn tape that reverse mode keeps for a device loop: a tape is an array
// [cap, ...] holding one row per turn, and the row is chosen by a one-cell u32 index computed
// on the device (the turn number), so neither kernel reads anything on the host.
#pragma once

#include "eagle/kernel/kernel.hpp"

namespace eagle::kernels {

// src, index (read), tape (read-write): tape[index] = src when index < cap (else nothing).
// tape is [cap] + src's shape, src's dtype; src may be a strided view (the row is stored
// contiguous).
const Kernel& tape_write();
// tape, index (read) -> out: out = tape[index] (index < cap; else out is left as it was).
const Kernel& tape_read();

}  // namespace eagle::kernels
