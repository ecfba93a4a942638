// What the training-job tests share: the names they use and the smallest model worth training.
#pragma once

#include "eagle/eagle.hpp"
#include "train/trainer.hpp"

namespace eagle::test_train {

using train::BatchArrays;
using train::BatchStaging;
using train::Model;
using train::ModelConfig;
using train::StepInputs;
using train::TrainState;

inline const Device cpu = Device::cpu();

// One block, dim 16, two heads: seconds of CPU per test.
inline ModelConfig tiny() {
  ModelConfig c;
  c.dim = 16;
  c.heads = 2;
  c.layers = 1;
  return c;
}

}  // namespace eagle::test_train
