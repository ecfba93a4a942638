// Ranking a plan list by measurement: time the entries that build on the caller's operands and
// pin the fastest (what cudnn-frontend's autotune and torch's cuBLASLt tuning do). The list's
// own order is a heuristic; a shape where it picks a slow entry is found here.
#pragma once

#include <vector>

#include "eagle/plan/plans.hpp"

namespace eagle::plan {

struct AutotuneOptions {
  int max_entries = 8;  // time at most this many entries that build, in list order
  int warmup = 2;       // untimed runs of each entry before its timed ones
  int reps = 10;        // timed runs of each entry; its time is their median
};

struct AutotuneTiming {
  int index = -1;        // the entry in the plan list
  double median_ms = 0;  // per run: device time on a CUDA stream, host time on the CPU
};

// Builds the entries of `plans` in list order (a decline skips the entry; declines() says why),
// times up to options.max_entries of those that build by running them on `pack`, and pins the
// fastest (select_plan, then build_plans), so execute() runs it. The runs write the pack's
// outputs. From `ctx` it takes the stream, device and threads; it makes each entry's library
// handle on that stream and each entry's workspace itself, and frees them before it returns.
// Returns the timed entries in list order.
// Throws InvalidArgument for options out of range or a pack of another layout, and NotSupported
// when no entry builds; on a throw the selection is what it was.
// Throws InvalidArgument naming the first option out of range (what autotune checks first).
void check_autotune_options(const AutotuneOptions& options);

std::vector<AutotuneTiming> autotune(ExecutionPlans& plans, const VariantPack& pack,
                                     const ExecutionContext& ctx,
                                     const AutotuneOptions& options = {});

}  // namespace eagle::plan
