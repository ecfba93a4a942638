// Kernels over one-cell u32 arrays (device conditions): what the recorder uses to build capped
// loops, break/continue guards and elif chains. Each has a CPU and a CUDA implementation.
#pragma once

#include "eagle/kernel/kernel.hpp"

namespace eagle::kernels {

const Kernel& cell_or();    // out = (a != 0 || b != 0)
const Kernel& cell_none();  // out = (a == 0 && b == 0)
// remaining (read-write), stop (read) -> going: remaining -= 1 (if > 0);
// going = remaining > 0 && stop == 0.
const Kernel& loop_next();
// a (read) -> out = a + 1 (a turn counter: call it with buffer= the counter itself).
const Kernel& cell_increment();
// a, b, c (read) -> out = a * b + c (the row of a nested loop's turn: outer row * cap + turn).
const Kernel& cell_mad();
// The most conditions first_true (and so an elif chain) takes.
inline constexpr int kMaxFirstTrue = 32;
// conds c0..c{n-1} (read) -> index of the first non-zero one, or n if none.
// 1 <= n <= kMaxFirstTrue.
const Kernel& first_true(int n);

}  // namespace eagle::kernels
