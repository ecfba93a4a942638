// What the training-job tests share: the names they use and the smallest model worth training.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>

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

// A run of at least ten steps learns: every loss finite, and the mean of the last five steps
// below 0.8 of the first five's.
inline void expect_loss_falls(const train::TrainReport& r) {
  ASSERT_GE(r.steps.size(), 10u);
  auto mean = [&](std::size_t begin, std::size_t end) {
    double s = 0;
    for (std::size_t i = begin; i < end; ++i) {
      EXPECT_TRUE(std::isfinite(r.steps[i].loss)) << "step " << i + 1;
      s += r.steps[i].loss;
    }
    return s / static_cast<double>(end - begin);
  };
  const std::size_t n = r.steps.size();
  const double first = mean(0, 5), last = mean(n - 5, n);
  EXPECT_LT(last, 0.8 * first) << "first five steps " << first << ", last five " << last;
}

}  // namespace eagle::test_train
