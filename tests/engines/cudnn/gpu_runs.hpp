// Running a graph on the cuDNN backend and on the reference engine, for the GPU tests.
#pragma once

#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "eagle/engines/cudnn.hpp"
#include "engines/cudnn/loader.hpp"
#include "test_util.hpp"

namespace eagle::test::cudnn {

using Arrays = std::map<int64_t, Array>;  // by uid

inline const Device kGpu = Device::cuda(0);

// Skips without a GPU or without cuDNN; prints where cuDNN came from.
class CudnnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
    if (!::eagle::cudnn::cudnn_library().loaded) GTEST_SKIP() << engines::cudnn_backend_status();
    std::cout << engines::cudnn_backend_status() << "\n";
  }
};

// The graph's outputs (the node results the caller receives).
inline std::vector<op::Tensor> outputs(const op::Graph& g) {
  std::vector<op::Tensor> out;
  for (const op::Tensor& t : g.tensors())
    if (t.producer() >= 0 && !t.is_virtual()) out.push_back(t);
  return out;
}

// Runs a planned graph: inputs copied to `device`, outputs poisoned there, one handle of the
// plan's library and a workspace; returns the outputs on the host, by uid.
inline Arrays execute(const plan::ExecutionPlans& plans, const Arrays& host_in, Device device) {
  plan::VariantPack pack(plans.layout());
  std::vector<Array> keep;
  for (const auto& [uid, a] : host_in) {
    keep.push_back(a.to(device));
    pack.set(uid, plan::Operand(keep.back()));
  }
  Arrays out;
  for (const op::Tensor& t : outputs(plans.graph())) {
    out[t.uid()] = test::poisoned(t.dims(), t.dtype(), device);
    pack.set(t.uid(), plan::Operand(out[t.uid()]));
  }
  const Stream stream(device);
  const std::size_t ws_bytes = plans.workspace_size();
  const Array ws =
      ws_bytes ? Array::empty({static_cast<int64_t>(ws_bytes)}, DType::u8, device) : Array();
  const Library* lib = plans.compiled()->library();
  void* handle = lib ? lib->create(device, stream.native()) : nullptr;
  plan::ExecutionContext ctx{stream.native(), handle, ws_bytes ? ws.data() : nullptr, ws_bytes};
  ctx.device = device;
  plans.execute(pack, ctx);
  stream.synchronize();
  if (lib) lib->destroy(handle);
  for (auto& [uid, a] : out) a = a.to(Device::cpu());
  return out;
}

inline Arrays reference(const op::Graph& g, const Arrays& in) {
  plan::ExecutionPlans ref = engines::create_execution_plans(g.clone(), Device::cpu());
  ref.build_plans();
  EXPECT_EQ(ref.name_at(ref.selected()), "reference");
  return execute(ref, in, Device::cpu());
}

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
