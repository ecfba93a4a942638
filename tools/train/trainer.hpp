// The training loop of `eagle train`: documents -> look-ahead packed batches -> one recorded
// step graph (forward, reverse, AdamW) replayed once per batch. With several ranks (data
// parallelism), each rank trains on its own shard of the segments with its own state and bucket
// set, and its step graph averages the gradients across ranks before the update.
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
  int64_t segment_cap = 0;                // paragraphs are cut at this length; 0: fill / 4
  // Pack at most this many tokens per batch (a partial fill of T, e.g. to time a bucket against
  // the worst-case graph on the same batches); 0: T.
  int64_t fill = 0;
  std::filesystem::path docs;      // a folder or a file of text
  int64_t max_tokens = 4'000'000;  // read at most this much of the corpus
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
  // Data-parallel ranks. On the CPU: an in-process group (comm::cpu_group), one thread each; on
  // a GPU (device cuda:d): rank r on cuda:(d + r), NCCL through comm::nccl_group. Each rank packs
  // the segments i with i % ranks == r, starts from the same seed (the same params) and all
  // ranks' gradients are averaged inside each step graph.
  int ranks = 1;
  // Write the run for a peer here (export.hpp): config, initial params, every batch, the log
  // (with several ranks: rank 0's).
  std::filesystem::path export_dir;
};

// One replay's numbers.
// With several ranks: the loss is the mean of the ranks' losses (what the averaged gradient is the
// gradient of), the counts (tokens, sequences, capacity) are sums over the ranks and the times
// are the slowest rank's.
struct StepLog {
  int64_t step = 0;           // 1-based
  double loss = 0;            // the step's loss, before its update
  double seconds = 0;         // wall time of the step: batch copy, launch, wait, loss read
  double launch_seconds = 0;  // time in Graph::launch (host work per replay)
  double pack_seconds = 0;    // packing the next batch, on the host while the step runs
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
  std::size_t graph_bytes = 0;      // device bytes of the largest graph: own arrays, workspaces
  std::vector<int64_t> capacities;  // of the buckets (T alone without buckets)
  std::size_t set_bytes = 0;        // the bucket set's arena (what every bucket shares)
  std::size_t alone_bytes = 0;      // what the largest bucket's graph would take built alone
  double record_seconds = 0;        // recording and building every bucket's graph
  // Data parallelism (the graph numbers above are rank 0's).
  int ranks = 1;
  std::string rank_kind;             // "cpu-group" or "nccl" with several ranks
  bool params_bitwise_equal = true;  // every rank's final params hold the same bits as rank 0's
  double max_param_difference = 0;   // the largest |p_r - p_0| over ranks and elements
};

// What counts as the ranks' params matching at the end: bitwise on the CPU group (its reductions
// give every rank the same bits); on GPUs at most kGpuParamTolerance apart (a bound chosen, not a
// measurement: NCCL's ring and tree all_reduce also give every rank the same bits).
constexpr double kGpuParamTolerance = 1e-5;
bool params_match(const TrainReport& report);

// Documents cut into paragraphs: a segment ends after each blank line ("\n\n") and after `cap`
// tokens, whichever comes first (code and prose give a ragged mix of lengths). Throws
// InvalidArgument when cap < 1.
std::vector<data::Segment> paragraphs(const std::vector<data::Segment>& documents, int64_t cap);

// Reads the corpus, records and builds the step graph, runs `steps` replays. `on_step` (may be
// empty) sees each step as it completes; `on_ready` once the graph is built (rank 0's). With
// several ranks they are called on the calling thread while the ranks run on their own, and a
// rank's error is rethrown here once every rank stopped (the others stop at their next
// collective: CPU-group ranks after its timeout; NCCL ranks may hang). Throws InvalidArgument
// for ranks < 1, fewer segments than ranks, or GPUs that do not exist.
TrainReport run_training(const TrainOptions& options,
                         const std::function<void(const TrainReport&)>& on_ready,
                         const std::function<void(const StepLog&)>& on_step);

}  // namespace eagle::train
