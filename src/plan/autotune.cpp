#include "eagle/plan/autotune.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include "eagle/core/array.hpp"
#include "eagle/core/error.hpp"
#include "util/stream_timer.hpp"

namespace eagle::plan {

void check_autotune_options(const AutotuneOptions& o) {
  auto need = [](bool ok, const std::string& rule) {
    if (!ok) throw InvalidArgument("autotune: options." + rule);
  };
  need(o.max_entries >= 1, "max_entries must be >= 1, got " + std::to_string(o.max_entries));
  need(o.warmup >= 0, "warmup must be >= 0, got " + std::to_string(o.warmup));
  need(o.reps >= 1, "reps must be >= 1, got " + std::to_string(o.reps));
}

namespace {

// The library handles autotune made, one per library, on the caller's stream; destroyed at the
// end whatever happens.
class Handles {
 public:
  Handles(Device device, void* stream) : device_(device), stream_(stream) {}
  ~Handles() {
    for (auto& [library, handle] : made_) library->destroy(handle);
  }
  Handles(const Handles&) = delete;
  Handles& operator=(const Handles&) = delete;
  void* for_library(const Library* library) {
    if (!library) return nullptr;
    auto it = made_.find(library);
    if (it == made_.end()) it = made_.emplace(library, library->create(device_, stream_)).first;
    return it->second;
  }

 private:
  Device device_;
  void* stream_;
  std::map<const Library*, void*> made_;
};

}  // namespace

std::vector<AutotuneTiming> autotune(ExecutionPlans& plans, const VariantPack& pack,
                                     const ExecutionContext& ctx, const AutotuneOptions& options) {
  check_autotune_options(options);
  if (!pack.layout().same_as(plans.layout()))
    throw InvalidArgument("autotune: the variant pack was made for another plan's layout");
  Handles handles(ctx.device, ctx.stream);
  detail::StreamTimer timer(ctx.device, ctx.stream);
  Array workspace;
  std::vector<AutotuneTiming> timed;
  for (int i = 0; i < plans.count() && static_cast<int>(timed.size()) < options.max_entries; ++i) {
    try {
      plans.build_plan_at_index(i);
    } catch (const NotSupported&) {
      continue;  // declines() keeps the reason
    }
    const std::shared_ptr<const CompiledPlan> plan = plans.compiled_at(i);
    ExecutionContext run = ctx;
    run.handle = handles.for_library(plan->library());
    run.workspace_bytes = plan->workspace_bytes();
    if (run.workspace_bytes > 0 &&
        (!workspace.defined() || run.workspace_bytes > workspace.nbytes()))
      workspace = Array::empty({static_cast<int64_t>(run.workspace_bytes)}, DType::u8, ctx.device);
    run.workspace = run.workspace_bytes ? workspace.data() : nullptr;
    for (int w = 0; w < options.warmup; ++w) plans.execute_plan_at_index(i, pack, run);
    std::vector<double> ms;
    for (int r = 0; r < options.reps; ++r) {
      timer.start();
      plans.execute_plan_at_index(i, pack, run);
      ms.push_back(timer.stop_ms());
    }
    std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
    timed.push_back({i, ms[ms.size() / 2]});
  }
  if (timed.empty()) {
    std::string why = "autotune: no entry of graph '" + plans.graph().name() + "' builds";
    for (const auto& [index, reason] : plans.declines())
      why += "; " + std::to_string(index) + " " + plans.name_at(index) + ": " + reason;
    throw NotSupported(why);
  }
  const auto best = std::min_element(timed.begin(), timed.end(), [](const auto& a, const auto& b) {
    return a.median_ms < b.median_ms;
  });
  plans.select_plan(best->index);
  plans.build_plans();
  return timed;
}

}  // namespace eagle::plan
