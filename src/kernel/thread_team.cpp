#include "eagle/kernel/thread_team.hpp"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <algorithm>
#include <thread>

namespace eagle {

struct ThreadTeam::Impl {
  explicit Impl(int threads) : arena(threads) {}
  tbb::task_arena arena;
};

ThreadTeam::ThreadTeam(int threads) {
  size_ =
      threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  impl_ = std::make_unique<Impl>(size_);
}

ThreadTeam::~ThreadTeam() = default;

void ThreadTeam::run(int64_t n, int64_t grain, RangeFn fn, const void* ctx) const {
  // blocked_range halves a range while it is longer than its grain size: a grain size of
  // 2 * grain leaves every piece at least `grain` long, as the header promises.
  const int64_t split_above = std::max<int64_t>(2 * grain, 1);
  impl_->arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, split_above),
                      [&](const tbb::blocked_range<int64_t>& r) { fn(ctx, r.begin(), r.end()); });
  });
}

void ThreadTeam::run_tasks(int n, TaskFn fn, const void* ctx) const {
  if (n == 1 || size_ == 1) {
    for (int i = 0; i < n; ++i) fn(ctx, i);
    return;
  }
  impl_->arena.execute([&] { tbb::parallel_for(0, n, [&](int i) { fn(ctx, i); }); });
}

const ThreadTeam& ThreadTeam::serial() {
  static const ThreadTeam team(1);
  return team;
}

}  // namespace eagle
