// The training loop: one graph recorded and built once, then per step a batch copied into its
// params, one launch and the loss read back.
#include "train/trainer.hpp"

#include <chrono>
#include <memory>

namespace eagle::train {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
  const std::vector<data::Segment> segments =
      data::read_documents(o.docs, cap, o.max_tokens, &report.corpus);
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
  auto t0 = std::chrono::steady_clock::now();
  Graph step =
      Graph::record([&](Recorder& r) { r.result(model.record_step(r, inputs, o.capacity.tokens)); },
                    RecordOptions{.record = true});
  report.record_seconds = seconds_since(t0);
  report.graph_nodes = static_cast<int64_t>(step.nodes().size());
  t0 = std::chrono::steady_clock::now();
  step.build(o.device, BuildOptions{.threads = o.threads});
  report.build_seconds = seconds_since(t0);
  report.native_nodes = step.native_node_count();
  report.graph_bytes = step.allocated_bytes();
  if (on_ready) on_ready(report);

  for (int64_t s = 1; s <= o.steps; ++s) {
    StepLog log;
    log.step = s;
    const auto start = std::chrono::steady_clock::now();
    if (s > 1) {
      next = loader.next();
      load_batch(*next, staging, batch, &step.stream());
    }
    log.active_tokens = next->active_tokens;
    log.sequences = next->active_sequences;
    for (float w : next->loss_mask) log.loss_tokens += w > 0 ? 1 : 0;
    const auto launch_start = std::chrono::steady_clock::now();
    step.launch(1);
    log.launch_seconds = seconds_since(launch_start);
    step.synchronize();
    log.loss = step.results()[0].to_vector<double>()[0];
    log.seconds = seconds_since(start);
    report.steps.push_back(log);
    if (on_step) on_step(log);
  }
  return report;
}

}  // namespace eagle::train
