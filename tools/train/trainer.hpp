// The training loop of `eagle train`: documents -> look-ahead packed batches -> one recorded
// step graph (forward, reverse, AdamW) replayed once per batch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "train/model.hpp"

namespace eagle::train {

struct TrainOptions {
  Device device = Device::cpu();
  int64_t steps = 200;
  data::BatchCapacity capacity{256, 16};  // T, N
  int64_t lookahead = 32;                 // B
  int64_t segment_cap = 0;                // paragraphs are cut at this length; 0: T / 4
  std::filesystem::path docs;             // a folder or a file of text
  int64_t max_tokens = 4'000'000;         // read at most this much of the corpus
  ModelConfig model;
  AdamwConfig adamw;
  uint64_t seed = 1;
  int threads = 0;  // CPU thread team (0: one per hardware thread)
  // Capacity buckets below T (one graph each, sharing one arena; T is always the last); empty:
  // one graph for T.
  std::vector<int64_t> buckets;
  std::string trace;
  // Write every planned op's plan list and choice here ('-': standard output) instead of training.
  std::string plans;  // write a trace-event JSON of every step's nodes here ("" : none; CPU only)
  // Write the run for a peer here (export.hpp): config, initial params, every batch, the log.
  std::filesystem::path export_dir;
};

// One replay's numbers.
struct StepLog {
  int64_t step = 0;           // 1-based
  double loss = 0;            // the step's loss, before its update
  double seconds = 0;         // wall time of the step: batch copy, launch, wait, loss read
  double launch_seconds = 0;  // time in Graph::launch (host work per replay)
  int64_t active_tokens = 0;  // L
  int64_t sequences = 0;      // M
  int64_t capacity = 0;       // the bucket's T that ran the step
  int64_t loss_tokens = 0;    // tokens the loss averages over
};

struct TrainReport {
  std::vector<StepLog> steps;
  data::CorpusStats corpus;
  int64_t segments = 0;
  int64_t params = 0;               // parameter elements
  int64_t graph_nodes = 0;          // nodes recorded in the step graph
  int native_nodes = 0;             // nodes of what was built (CUDA graph / host schedule)
  std::size_t graph_bytes = 0;      // device bytes the graph allocated at build (the largest)
  std::vector<int64_t> capacities;  // of the buckets (T alone without buckets)
  std::size_t set_bytes = 0;        // the bucket set's arena (what every bucket shares)
  double record_seconds = 0;        // recording and building every bucket's graph
};

// Documents cut into paragraphs: a segment ends after each blank line ("\n\n") and after `cap`
// tokens, whichever comes first (code and prose give a ragged mix of lengths). Throws
// InvalidArgument when cap < 1.
std::vector<data::Segment> paragraphs(const std::vector<data::Segment>& documents, int64_t cap);

// Reads the corpus, records and builds the step graph, runs `steps` replays. `on_step` (may be
// empty) sees each step as it completes; `on_ready` once the graph is built.
TrainReport run_training(const TrainOptions& options,
                         const std::function<void(const TrainReport&)>& on_ready,
                         const std::function<void(const StepLog&)>& on_step);

}  // namespace eagle::train
