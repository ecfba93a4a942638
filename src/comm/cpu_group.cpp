// The in-process CPU group: ranks are threads of one process sharing memory. A collective
// publishes each rank's call (its buffers), meets the other ranks at a barrier, checks that all
// ranks called the same thing, computes, and meets them again before returning, so no rank
// reuses a buffer another still reads. Work is split by rank: an all_reduce's rank r reduces
// chunk r of every rank's x (ranks in order 0..K-1) and writes it to every rank's out, so each
// element is read and written by one thread, which makes in-place calls safe and every rank's
// result bitwise the same.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "comm/backend.hpp"
#include "comm/cpu_reduce.hpp"
#include "eagle/comm/communicator.hpp"

namespace eagle::comm {

namespace {

using detail::Collective;
using detail::CollectiveCall;

std::string call_str(const CollectiveCall& c) {
  std::string s(detail::collective_name(c.kind));
  if (c.kind == Collective::all_reduce || c.kind == Collective::reduce_scatter)
    s += "(" + std::string(reduce_op_name(c.op)) + ")";
  if (c.kind == Collective::broadcast) s += "(root " + std::to_string(c.root) + ")";
  return s;
}

// What the ranks share: a reusable barrier with a timeout, and each rank's published call.
class CpuGroupState {
 public:
  CpuGroupState(int size, std::chrono::milliseconds timeout)
      : size_(size),
        timeout_(timeout),
        here_(static_cast<std::size_t>(size), 0),
        slots_(static_cast<std::size_t>(size)) {}

  // Waits until every rank arrived (publishing `call` first when given). Throws TimeoutError
  // when the others do not come in time, or when the group broke before.
  void meet(int rank, const CollectiveCall* call, uint64_t number, const char* where) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!broken_.empty()) throw TimeoutError(broken_);
    if (call) slots_[static_cast<std::size_t>(rank)] = *call;
    here_[static_cast<std::size_t>(rank)] = 1;
    const uint64_t generation = generation_;
    if (++count_ == size_) {
      count_ = 0;
      std::fill(here_.begin(), here_.end(), 0);
      ++generation_;
      cv_.notify_all();
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    if (cv_.wait_until(lock, deadline,
                       [&] { return generation_ != generation || !broken_.empty(); })) {
      if (generation_ != generation) return;
      throw TimeoutError(broken_);
    }
    std::string missing;
    for (int r = 0; r < size_; ++r)
      if (!here_[static_cast<std::size_t>(r)])
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    broken_ = "comm: rank " + std::to_string(rank) + " of a cpu group of " + std::to_string(size_) +
              " waited " + std::to_string(timeout_.count()) + " ms " + where + " collective #" +
              std::to_string(number) + " (" + call_str(slots_[static_cast<std::size_t>(rank)]) +
              ") for rank(s) " + missing +
              ", which never arrived (a rank stopped, or the ranks called different numbers of "
              "collectives); the group is broken";
    cv_.notify_all();
    throw TimeoutError(broken_);
  }

  // Between the two meetings: every rank's call, read-only.
  const CollectiveCall& slot(int r) const { return slots_[static_cast<std::size_t>(r)]; }
  int size() const { return size_; }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  const int size_;
  const std::chrono::milliseconds timeout_;
  int count_ = 0;
  uint64_t generation_ = 0;
  std::vector<char> here_;
  std::string broken_;
  std::vector<CollectiveCall> slots_;
};

class CpuComm final : public detail::CommImpl {
 public:
  CpuComm(std::shared_ptr<CpuGroupState> group, int rank)
      : CommImpl(rank, group->size(), Device::cpu()),
        group_(std::move(group)),
        inputs_(static_cast<std::size_t>(size())),
        outputs_(static_cast<std::size_t>(size())) {}

  const char* kind() const override { return "cpu-group"; }

  void run(const CollectiveCall& call, const CallContext&) const override {
    if (busy_.exchange(true))
      throw InvalidArgument("comm: rank " + std::to_string(rank()) +
                            " got two collectives at "
                            "once (from concurrent fork branches or threads): the collectives of "
                            "one rank must be ordered, in the same order on every rank");
    struct Release {
      std::atomic<bool>& flag;
      ~Release() { flag.store(false); }
    } release{busy_};
    const uint64_t number = ++calls_;
    group_->meet(rank(), &call, number, "at");
    const std::string mismatch = check_same();
    if (mismatch.empty()) compute();
    group_->meet(rank(), nullptr, number, "after");
    if (!mismatch.empty()) throw InvalidArgument(mismatch);
  }

 private:
  // The same answer on every rank: all read the same slots.
  std::string check_same() const {
    const CollectiveCall& a = group_->slot(0);
    for (int r = 1; r < size(); ++r) {
      const CollectiveCall& b = group_->slot(r);
      if (a.kind != b.kind || a.op != b.op || a.root != b.root)
        return "comm: rank 0 called " + call_str(a) + " but rank " + std::to_string(r) +
               " called " + call_str(b) +
               " at the same point: every rank must call the same collectives in the same order";
      if (a.dtype != b.dtype || !a.same_shape(b))
        return "comm: " + call_str(a) + ": argument 'x' is " + std::string(dtype_name(a.dtype)) +
               shape_str(a.shape()) + " on rank 0 but " + std::string(dtype_name(b.dtype)) +
               shape_str(b.shape()) + " on rank " + std::to_string(r) +
               ": every rank must pass the same dtype and shape";
    }
    return {};
  }

  void compute() const {
    const int k = size(), r = rank();
    const CollectiveCall& mine = group_->slot(r);
    const auto item = static_cast<int64_t>(itemsize(mine.dtype));
    auto at = [item](const void* p, int64_t elements) -> const void* {
      return static_cast<const char*>(p) + elements * item;
    };
    auto at_out = [item](void* p, int64_t elements) -> void* {
      return static_cast<char*>(p) + elements * item;
    };
    switch (mine.kind) {
      case Collective::all_reduce: {
        // Chunk r of every rank's x, reduced once and written to every rank's out.
        const int64_t n = mine.x_count, begin = n * r / k, end = n * (r + 1) / k;
        for (int j = 0; j < k; ++j) {
          inputs_[static_cast<std::size_t>(j)] = at(group_->slot(j).x, begin);
          outputs_[static_cast<std::size_t>(j)] = at_out(group_->slot(j).out, begin);
        }
        detail::reduce_into(mine.dtype, mine.op, inputs_.data(), k, outputs_.data(), k,
                            end - begin);
        break;
      }
      case Collective::reduce_scatter: {
        const int64_t n = mine.out_count;
        for (int j = 0; j < k; ++j)
          inputs_[static_cast<std::size_t>(j)] = at(group_->slot(j).x, n * r);
        outputs_[0] = mine.out;
        detail::reduce_into(mine.dtype, mine.op, inputs_.data(), k, outputs_.data(), 1, n);
        break;
      }
      case Collective::all_gather: {
        const int64_t n = mine.x_count;
        for (int j = 0; j < k; ++j) {
          void* dst = at_out(mine.out, n * j);
          const void* src = group_->slot(j).x;
          if (dst != src) std::memcpy(dst, src, static_cast<std::size_t>(n * item));
        }
        break;
      }
      case Collective::broadcast: {
        const void* src = group_->slot(mine.root).x;
        if (mine.out != src)
          std::memcpy(mine.out, src, static_cast<std::size_t>(mine.x_count * item));
        break;
      }
    }
  }

  std::shared_ptr<CpuGroupState> group_;
  // Scratch for one call at a time (busy_ guards it): nothing is allocated per call.
  mutable std::vector<const void*> inputs_;
  mutable std::vector<void*> outputs_;
  mutable std::atomic<bool> busy_{false};
  mutable std::atomic<uint64_t> calls_{0};
};

}  // namespace

std::vector<Communicator> cpu_group(int ranks, const CpuGroupOptions& options) {
  if (ranks < 1)
    throw InvalidArgument("comm::cpu_group: argument 'ranks' is " + std::to_string(ranks) +
                          "; a group has at least 1 rank");
  if (options.timeout.count() <= 0)
    throw InvalidArgument("comm::cpu_group: option 'timeout' is " +
                          std::to_string(options.timeout.count()) + " ms; it must be positive");
  auto state = std::make_shared<CpuGroupState>(ranks, options.timeout);
  std::vector<Communicator> out;
  out.reserve(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) out.emplace_back(std::make_shared<CpuComm>(state, r));
  return out;
}

}  // namespace eagle::comm
