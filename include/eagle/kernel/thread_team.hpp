// A fixed team of worker threads that CPU kernels split their work over (oneTBB underneath).
#pragma once

#include <cstdint>
#include <memory>

namespace eagle {

class ThreadTeam {
 public:
  // threads <= 0: one per hardware thread.
  explicit ThreadTeam(int threads = 0);
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return size_; }
  // A team of one thread: work runs on the calling thread (for callers that pass no team).
  static const ThreadTeam& serial();

  // Runs body(begin, end) over [0, n) in chunks of at least `grain`; work below two grains runs
  // inline on the calling thread, so small kernels pay no task overhead.
  template <class Body>
  void parallel_for(int64_t n, int64_t grain, const Body& body) const {
    if (n <= 0) return;
    if (n < 2 * grain || size_ == 1) {
      body(int64_t{0}, n);
      return;
    }
    run(
        n, grain,
        [](const void* ctx, int64_t b, int64_t e) { (*static_cast<const Body*>(ctx))(b, e); },
        &body);
  }

  // Runs fn(i) for i in [0, n) as separate tasks of the team and waits for all of them.
  template <class Fn>
  void tasks(int n, const Fn& fn) const {
    run_tasks(
        n, [](const void* ctx, int i) { (*static_cast<const Fn*>(ctx))(i); }, &fn);
  }

 private:
  using RangeFn = void (*)(const void*, int64_t, int64_t);
  using TaskFn = void (*)(const void*, int);
  void run(int64_t n, int64_t grain, RangeFn fn, const void* ctx) const;
  void run_tasks(int n, TaskFn fn, const void* ctx) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
  int size_;
};

}  // namespace eagle
