// Running a graph on the cuDNN backend and on the reference engine, for the GPU tests.
#pragma once

#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "eagle/engines/cudnn.hpp"
#include "engines/cudnn/loader.hpp"
#include "planned_runs.hpp"
#include "test_util.hpp"

namespace eagle::test::cudnn {

using test::Arrays;
using test::execute;
using test::kGpu;
using test::outputs;
using test::reference;

// Skips without a GPU or without cuDNN; prints where cuDNN came from.
class CudnnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
    if (!::eagle::cudnn::cudnn_library().loaded) GTEST_SKIP() << engines::cudnn_backend_status();
    std::cout << engines::cudnn_backend_status() << "\n";
  }
};

// Plans for the GPU with modes A and FALLBACK and builds the first cuDNN entry of the list that
// builds (other GPU engines of the family may rank ahead of cuDNN's).
inline plan::ExecutionPlans cudnn_plans(const op::Graph& g) {
  plan::ExecutionPlans plans = engines::create_execution_plans(
      g.clone(), kGpu, {plan::HeurMode::A, plan::HeurMode::FALLBACK});
  std::string declines;
  for (int i = 0; i < plans.count(); ++i) {
    if (plans.at(i).engine_id >= plan::kBackendIdEnd) continue;
    plans.select_plan(i);
    try {
      plans.build_plans();
      return plans;
    } catch (const NotSupported& e) {
      declines += std::string("\n") + e.what();
    }
  }
  ADD_FAILURE() << "no cuDNN entry built: " << plans.describe()
                << engines::cudnn_decline_reason(plans.graph()) << declines;
  throw NotSupported("no cuDNN entry built");
}

}  // namespace eagle::test::cudnn
