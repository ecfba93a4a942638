// The training loop: one graph recorded and built once, then per step a batch copied into its
// params, one launch and the loss read back.
#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>

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

TrainReport run_training(const TrainOptions& o,
                         const std::function<void(const TrainReport&)>& on_ready,
                         const std::function<void(const StepLog&)>& on_step) {
  if (o.steps < 1)
    throw InvalidArgument("train: --steps must be >= 1, got " + std::to_string(o.steps));
  if (o.capacity.tokens < 2 || o.capacity.slots < 1)
    throw InvalidArgument("train: --tokens must be >= 2 and --slots >= 1");
  const int64_t cap =
      o.segment_cap > 0 ? o.segment_cap : std::max<int64_t>(2, o.capacity.tokens / 4);
  if (cap > o.capacity.tokens)
    throw InvalidArgument("train: the segment cap (" + std::to_string(cap) +
                          ") must not exceed --tokens (" + std::to_string(o.capacity.tokens) + ")");
  TrainReport report;
  // Whole documents, then paragraphs (split after each blank line) of at most `cap` tokens.
  const std::vector<data::Segment> segments =
      paragraphs(data::read_documents(o.docs, int64_t{1} << 40, o.max_tokens, &report.corpus), cap);
  if (segments.empty())
    throw InvalidArgument("train: no text found under '" + o.docs.string() + "'");
  report.segments = static_cast<int64_t>(segments.size());
  data::PackedLoader loader(data::cycle_segments(&segments), o.capacity, o.lookahead);

  Model model(o.model);
  TrainState state = TrainState::init(o.model, o.seed, o.device);
  report.params = state.param_count();
  const BatchArrays batch = BatchArrays::allocate(o.capacity, o.device);
  BatchStaging staging = BatchStaging::allocate(o.capacity);
  // The first batch fills the params before the graph is built (their contents are the batch's).
  std::optional<data::PackedBatch> next = loader.next();
  load_batch(*next, staging, batch, nullptr);

  const StepInputs inputs{&o.model, &state, &batch, o.adamw};
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
      capacities, {}, o.device,
      [&](Recorder& r, const BucketSet::Bucket& b) {
        r.result(model.record_step(r, inputs, b.capacity));
      },
      RecordOptions{.record = true}, BuildOptions{.threads = o.threads});
  report.record_seconds = seconds_since(t0);  // recording and building, every bucket
  Graph& largest = steps.graph(static_cast<int>(capacities.size()) - 1);
  report.graph_nodes = static_cast<int64_t>(largest.nodes().size());
  report.native_nodes = largest.native_node_count();
  report.graph_bytes = largest.allocated_bytes();
  report.capacities = capacities;
  report.set_bytes = steps.arena_bytes();
  if (!o.trace.empty())  // on a GPU through CUPTI: NotSupported, with the reason, without it
    for (std::size_t b = 0; b < capacities.size(); ++b)
      steps.graph(static_cast<int>(b)).set_tracing(true);
  if (on_ready) on_ready(report);

  for (int64_t s = 1; s <= o.steps; ++s) {
    StepLog log;
    log.step = s;
    const auto start = std::chrono::steady_clock::now();
    if (s > 1) {
      next = loader.next();
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
    Graph& step = steps.graph(b);
    step.synchronize();
    log.capacity = capacities[static_cast<std::size_t>(b)];
    log.loss = step.results()[0].to_vector<double>()[0];
    log.seconds = seconds_since(start);
    report.steps.push_back(log);
    if (on_step) on_step(log);
  }
  if (!o.trace.empty()) write_trace(o.trace, steps, capacities);
  return report;
}

}  // namespace eagle::train
