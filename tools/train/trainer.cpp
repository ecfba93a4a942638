// The training loop: one graph recorded and built once, then per step a batch copied into its
// params, one launch and the loss read back; with several ranks, one thread per rank doing the
// same, their gradients averaged inside the step graphs.
#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "train/export.hpp"

namespace eagle::train {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::vector<data::Segment> paragraphs(const std::vector<data::Segment>& documents, int64_t cap) {
  if (cap < 1)
    throw InvalidArgument("train: the segment cap must be >= 1, got " + std::to_string(cap));
  std::vector<data::Segment> out;
  for (const data::Segment& d : documents) {
    const std::vector<int32_t>& t = d.tokens;
    std::size_t begin = 0;
    int part = 0;
    auto emit = [&](std::size_t end) {
      data::Segment s;
      s.tokens.assign(t.begin() + static_cast<std::ptrdiff_t>(begin),
                      t.begin() + static_cast<std::ptrdiff_t>(end));
      s.source = d.source + "#" + std::to_string(part++);
      out.push_back(std::move(s));
      begin = end;
    };
    for (std::size_t i = 0; i < t.size(); ++i) {
      const bool blank_line = i > begin && t[i] == '\n' && t[i - 1] == '\n';
      if (blank_line || i + 1 - begin == static_cast<std::size_t>(cap)) emit(i + 1);
    }
    if (begin < t.size()) emit(t.size());
  }
  return out;
}

namespace {

// Every bucket graph's trace in one file; with several buckets each scope starts with "T<b>".
void write_trace(const std::string& path, BucketSet& steps, const std::vector<int64_t>& caps) {
  std::vector<TraceEvent> events;
  for (std::size_t b = 0; b < caps.size(); ++b)
    for (TraceEvent& e : steps.graph(static_cast<int>(b)).trace()) {
      if (caps.size() > 1)
        e.scope = "T" + std::to_string(caps[b]) + (e.scope.empty() ? "" : "/") + e.scope;
      events.push_back(std::move(e));
    }
  write_chrome_trace(path, events, "eagle train step");
}

}  // namespace

namespace {

// The most tokens a batch packs: --fill, or T when it is not given.
int64_t batch_fill(const TrainOptions& o) {
  return o.fill > 0 ? o.fill : o.capacity.tokens;
}

// One rank's part: who it is and what it meets the other ranks through.
struct Rank {
  int index = 0;
  const comm::Communicator* comm = nullptr;  // null: a single rank
  Device device = Device::cpu();
  int threads = 0;
};

// One rank's training over `segments` (its shard): its loader, state, bucket set and steps.
// Fills `report`'s graph numbers and steps.
void train_rank(const TrainOptions& o, const std::vector<data::Segment>& segments, const Rank& rank,
                TrainState& state, TrainReport& report,
                const std::function<void(const TrainReport&)>& on_ready,
                const std::function<void(const StepLog&)>& on_step) {
  // Batches of at most `fill` tokens, widened to T rows (padding) for the graphs.
  const int64_t fill = batch_fill(o);
  data::PackedLoader loader(data::cycle_segments(&segments), {fill, o.capacity.slots}, o.lookahead);
  const auto next_batch = [&] {
    std::optional<data::PackedBatch> b = loader.next();
    if (b && fill < o.capacity.tokens) b = data::with_capacity(std::move(*b), o.capacity.tokens);
    return b;
  };
  Model model(o.model);
  report.params = state.param_count();
  // Before any step: the params exported are the initial ones (rank 0's run, with several ranks).
  std::optional<RunExport> exported;
  if (!o.export_dir.empty() && rank.index == 0) exported.emplace(o.export_dir, o, state);
  const BatchArrays batch = BatchArrays::allocate(o.capacity, rank.device);
  BatchStaging staging = BatchStaging::allocate(o.capacity);
  // The first batch fills the params before the graph is built (their contents are the batch's).
  std::optional<data::PackedBatch> next = next_batch();
  load_batch(*next, staging, batch, nullptr);

  StepInputs inputs{&o.model, &state, &batch, o.adamw};
  inputs.average_gradients = rank.comm;
  // One graph per capacity, T last; the batch arrays are the same for all (a step for capacity
  // T_b reads their first T_b rows), the graphs' own arrays share one arena.
  std::vector<int64_t> capacities;
  for (int64_t c : o.buckets)
    if (c < o.capacity.tokens) capacities.push_back(c);
  std::sort(capacities.begin(), capacities.end());
  capacities.erase(std::unique(capacities.begin(), capacities.end()), capacities.end());
  capacities.push_back(o.capacity.tokens);
  auto t0 = std::chrono::steady_clock::now();
  BucketSet steps(
      capacities, {}, rank.device,
      [&](Recorder& r, const BucketSet::Bucket& b) {
        r.result(model.record_step(r, inputs, b.capacity));
      },
      RecordOptions{.record = true}, BuildOptions{.threads = rank.threads});
  report.record_seconds = seconds_since(t0);  // recording and building, every bucket
  Graph& largest = steps.graph(static_cast<int>(capacities.size()) - 1);
  report.graph_nodes = static_cast<int64_t>(largest.nodes().size());
  report.native_nodes = largest.native_node_count();
  report.graph_bytes = largest.allocated_bytes() + largest.workspace_bytes();
  report.capacities = capacities;
  report.set_bytes = steps.arena_bytes();
  report.alone_bytes = steps.largest_alone_bytes();
  const bool trace = !o.trace.empty() && rank.index == 0;
  if (trace)  // on a GPU through CUPTI: NotSupported, with the reason, without it
    for (std::size_t b = 0; b < capacities.size(); ++b)
      steps.graph(static_cast<int>(b)).set_tracing(true);
  if (on_ready) on_ready(report);

  for (int64_t s = 1; s <= o.steps; ++s) {
    StepLog log;
    log.step = s;
    const auto start = std::chrono::steady_clock::now();
    if (s > 1) {
      // On the stream of the bucket that runs this batch: the launch is ordered after the copies.
      const int chosen = steps.select(next->active_tokens);
      load_batch(*next, staging, batch, &steps.graph(chosen).stream());
    }
    log.active_tokens = next->active_tokens;
    log.sequences = next->active_sequences;
    for (float w : next->loss_mask) log.loss_tokens += w > 0 ? 1 : 0;
    const auto launch_start = std::chrono::steady_clock::now();
    const int b = steps.launch(next->active_tokens);  // L is known on the host
    log.launch_seconds = seconds_since(launch_start);
    // The next batch is packed while the device runs this step (a loader's prefetch): on a GPU
    // the host's packing hides behind the step; on the CPU the step ran inside launch.
    std::optional<data::PackedBatch> upcoming;
    if (s < o.steps) {
      const auto pack_start = std::chrono::steady_clock::now();
      upcoming = next_batch();
      log.pack_seconds = seconds_since(pack_start);
    }
    Graph& step = steps.graph(b);
    step.synchronize();
    log.capacity = capacities[static_cast<std::size_t>(b)];
    log.loss = step.results()[0].to_vector<double>()[0];
    log.seconds = seconds_since(start);
    report.steps.push_back(log);
    if (on_step) on_step(log);
    if (exported) exported->batch(s, *next);  // outside the step's timing
    if (upcoming) next = std::move(upcoming);
  }
  if (exported) exported->finish(report);
  if (trace) write_trace(o.trace, steps, capacities);
}

// The ranks' logs of one step as one: the mean loss, summed counts, the slowest rank's times.
StepLog combine(const std::vector<StepLog>& logs) {
  StepLog all;
  all.step = logs.front().step;
  for (const StepLog& l : logs) {
    all.loss += l.loss / static_cast<double>(logs.size());
    all.seconds = std::max(all.seconds, l.seconds);
    all.launch_seconds = std::max(all.launch_seconds, l.launch_seconds);
    all.pack_seconds = std::max(all.pack_seconds, l.pack_seconds);
    all.active_tokens += l.active_tokens;
    all.sequences += l.sequences;
    all.capacity += l.capacity;
    all.loss_tokens += l.loss_tokens;
  }
  return all;
}

// Compares every rank's params with rank 0's, bit for bit and by the largest difference.
void compare_params(const std::vector<TrainState>& states, TrainReport& report) {
  for (std::size_t i = 0; i < states[0].params.size(); ++i) {
    const std::vector<float> first = states[0].params[i].to_vector<float>();
    for (std::size_t r = 1; r < states.size(); ++r) {
      const std::vector<float> other = states[r].params[i].to_vector<float>();
      if (std::memcmp(first.data(), other.data(), first.size() * sizeof(float)) != 0)
        report.params_bitwise_equal = false;
      for (std::size_t e = 0; e < first.size(); ++e) {
        const double d = std::abs(static_cast<double>(first[e]) - static_cast<double>(other[e]));
        // NaN in one rank only counts as the largest difference.
        report.max_param_difference =
            std::isnan(d) && !(std::isnan(first[e]) && std::isnan(other[e]))
                ? std::numeric_limits<double>::infinity()
                : std::max(report.max_param_difference, d);
      }
    }
  }
}

// The devices of the ranks: the CPU for each, or cuda:(d + r) from o.device = cuda:d.
std::vector<Device> rank_devices(const TrainOptions& o) {
  std::vector<Device> devices;
  for (int r = 0; r < o.ranks; ++r)
    devices.push_back(o.device.is_cpu() ? o.device : Device::cuda(o.device.ordinal() + r));
  const int last = devices.back().ordinal();
  if (o.device.is_cuda() && last >= cuda_device_count())
    throw InvalidArgument("train: " + std::to_string(o.ranks) + " GPU ranks from " +
                          o.device.str() + " need cuda:" + std::to_string(last) + ", but " +
                          std::to_string(cuda_device_count()) + " GPUs are visible");
  return devices;
}

// What the rank threads hand the calling thread, under one mutex: rank 0's built graph, every
// rank's step logs, errors and how many ranks finished. (Each rank's own report stays its
// thread's until the join.)
class Relay {
 public:
  explicit Relay(int ranks) : ranks_(ranks), logged_(static_cast<std::size_t>(ranks)) {}
  void built(const TrainReport& report) {
    const std::lock_guard<std::mutex> lock(mutex_);
    built_ = report;
    ready_ = true;
    changed_.notify_all();
  }
  void stepped(int rank, const StepLog& log) {
    const std::lock_guard<std::mutex> lock(mutex_);
    logged_[static_cast<std::size_t>(rank)].push_back(log);
    changed_.notify_all();
  }
  void finished(const std::exception_ptr& error) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (error) errors_.push_back(error);
    ++finished_;
    changed_.notify_all();
  }
  // On the calling thread: relays rank 0's readiness, then each step once every rank logged it
  // (combined into `report`), until every rank finished or one failed.
  void run(TrainReport& report, const std::function<void(const TrainReport&)>& on_ready,
           const std::function<void(const StepLog&)>& on_step) {
    bool told_ready = false;
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] {
        return !errors_.empty() || finished_ == ranks_ || (ready_ && !told_ready) ||
               steps_logged() > report.steps.size();
      });
      if (!errors_.empty()) return;
      if (ready_ && !told_ready) {
        TrainReport built = built_;
        lock.unlock();
        told_ready = true;
        built.ranks = report.ranks;
        built.rank_kind = report.rank_kind;
        built.corpus = report.corpus;
        built.segments = report.segments;
        if (on_ready) on_ready(built);
      } else if (steps_logged() > report.steps.size()) {
        std::vector<StepLog> logs;
        for (const std::vector<StepLog>& l : logged_) logs.push_back(l[report.steps.size()]);
        lock.unlock();
        report.steps.push_back(combine(logs));
        if (on_step) on_step(report.steps.back());
      } else {
        return;  // every rank finished and every step was relayed
      }
    }
  }
  // After the join: the first cause, a rank's own error rather than the timeouts it caused in
  // the others.
  void rethrow_first_cause() const {
    std::exception_ptr timeout;
    for (const std::exception_ptr& e : errors_) {
      try {
        std::rethrow_exception(e);
      } catch (const comm::TimeoutError&) {
        if (!timeout) timeout = e;
      } catch (...) {
        std::rethrow_exception(e);
      }
    }
    if (timeout) std::rethrow_exception(timeout);
  }

 private:
  std::size_t steps_logged() const {
    std::size_t n = logged_[0].size();
    for (const std::vector<StepLog>& l : logged_) n = std::min(n, l.size());
    return n;
  }
  int ranks_;
  std::mutex mutex_;
  std::condition_variable changed_;
  TrainReport built_;
  bool ready_ = false;
  std::vector<std::vector<StepLog>> logged_;
  std::vector<std::exception_ptr> errors_;  // in the order the ranks failed
  int finished_ = 0;
};

// Several ranks, one thread each; the calling thread relays their progress.
void train_ranks(const TrainOptions& o, const std::vector<data::Segment>& segments,
                 TrainReport& report, const std::function<void(const TrainReport&)>& on_ready,
                 const std::function<void(const StepLog&)>& on_step) {
  const int k = o.ranks;
  const auto uk = static_cast<std::size_t>(k);
  std::vector<std::vector<data::Segment>> shards(uk);
  for (std::size_t i = 0; i < segments.size(); ++i) shards[i % uk].push_back(segments[i]);
  const std::vector<Device> devices = rank_devices(o);
  if (o.device.is_cuda()) setenv("NCCL_NVLS_ENABLE", "0", 0);  // unless the caller chose
  const std::vector<comm::Communicator> group =
      o.device.is_cpu() ? comm::cpu_group(k) : comm::nccl_group(devices);
  report.ranks = k;
  report.rank_kind = group[0].kind();
  // The ranks share the CPU: by default each gets its share of the hardware threads.
  const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int threads = o.threads > 0 ? o.threads : std::max(1, hardware / k);
  std::vector<TrainState> states;
  for (const Device& d : devices)  // the same seed: the same initial params on every rank
    states.push_back(TrainState::init(o.model, o.seed, d));

  Relay relay(k);
  std::vector<TrainReport> reports(uk);
  std::vector<std::thread> rank_threads;
  for (int r = 0; r < k; ++r)
    rank_threads.emplace_back([&, r] {
      const auto ur = static_cast<std::size_t>(r);
      std::exception_ptr error;
      try {
        train_rank(
            o, shards[ur], Rank{r, &group[ur], devices[ur], threads}, states[ur], reports[ur],
            [&](const TrainReport& built) {
              if (r == 0) relay.built(built);
            },
            [&](const StepLog& log) { relay.stepped(r, log); });
      } catch (...) {
        error = std::current_exception();
      }
      relay.finished(error);
    });
  relay.run(report, on_ready, on_step);
  for (std::thread& t : rank_threads) t.join();
  relay.rethrow_first_cause();

  const TrainReport& zero = reports[0];
  report.params = zero.params;
  report.graph_nodes = zero.graph_nodes;
  report.native_nodes = zero.native_nodes;
  report.graph_bytes = zero.graph_bytes;
  report.capacities = zero.capacities;
  report.set_bytes = zero.set_bytes;
  report.alone_bytes = zero.alone_bytes;
  report.record_seconds = zero.record_seconds;
  compare_params(states, report);
}

}  // namespace

bool params_match(const TrainReport& report) {
  return report.rank_kind == "nccl" ? report.max_param_difference <= kGpuParamTolerance
                                    : report.params_bitwise_equal;
}

TrainReport run_training(const TrainOptions& o,
                         const std::function<void(const TrainReport&)>& on_ready,
                         const std::function<void(const StepLog&)>& on_step) {
  if (o.steps < 1)
    throw InvalidArgument("train: --steps must be >= 1, got " + std::to_string(o.steps));
  if (o.capacity.tokens < 2 || o.capacity.slots < 1)
    throw InvalidArgument("train: --tokens must be >= 2 and --slots >= 1");
  if (o.ranks < 1)
    throw InvalidArgument("train: the rank count must be >= 1, got " + std::to_string(o.ranks));
  if (o.fill < 0 || o.fill > o.capacity.tokens)
    throw InvalidArgument("train: --fill must be in 1.." + std::to_string(o.capacity.tokens) +
                          " (--tokens), got " + std::to_string(o.fill));
  const int64_t fill = batch_fill(o);
  const int64_t cap = o.segment_cap > 0 ? o.segment_cap : std::max<int64_t>(2, fill / 4);
  if (cap > fill)
    throw InvalidArgument("train: the segment cap (" + std::to_string(cap) + ") must not exceed " +
                          (o.fill > 0 ? "--fill (" : "--tokens (") + std::to_string(fill) +
                          "): a paragraph that long would not fit a batch");
  TrainReport report;
  // Whole documents, then paragraphs (split after each blank line) of at most `cap` tokens.
  const std::vector<data::Segment> segments =
      paragraphs(data::read_documents(o.docs, int64_t{1} << 40, o.max_tokens, &report.corpus), cap);
  if (segments.empty())
    throw InvalidArgument("train: no text found under '" + o.docs.string() + "'");
  if (static_cast<int64_t>(segments.size()) < o.ranks)
    throw InvalidArgument("train: " + std::to_string(segments.size()) + " segments for " +
                          std::to_string(o.ranks) + " ranks: each rank needs at least one");
  report.segments = static_cast<int64_t>(segments.size());
  if (o.ranks > 1) {
    train_ranks(o, segments, report, on_ready, on_step);
    return report;
  }
  TrainState state = TrainState::init(o.model, o.seed, o.device);
  train_rank(o, segments, Rank{0, nullptr, o.device, o.threads}, state, report, on_ready, on_step);
  return report;
}

}  // namespace eagle::train
