// `eagle train --export DIR`: what a peer (bench/peers/train_step.py) needs to reproduce the run
// exactly — the model and optimizer config with the model's exact semantics (config.json), the
// initial params in TrainState order (params/NAME.npy), every step's batch
// (batches/step_NNNNN.FIELD.npy) and eagle's per-step losses and step times (log.json).
#pragma once

#include <filesystem>
#include <string>

#include "train/trainer.hpp"

namespace eagle::train {

class RunExport {
 public:
  // Creates `dir` (and params/, batches/), writes config.json and the params' current values:
  // call it before the first step updates them. Throws Error when the folder cannot be written.
  RunExport(std::filesystem::path dir, const TrainOptions& options, const TrainState& state);
  // The batch step `step` (1-based) ran.
  void batch(int64_t step, const data::PackedBatch& batch) const;
  // log.json: per-step loss, step time, launch time, bucket, L, M, loss tokens.
  void finish(const TrainReport& report) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

// The config.json text for `options` and `state` (names and shapes of the params).
std::string export_config_json(const TrainOptions& options, const TrainState& state);

}  // namespace eagle::train
