// Running a planned graph on a device and on the reference engine (float64, CPU), for the
// engines' GPU tests: inputs copied over, outputs poisoned, a handle and a workspace as the plan
// asks, outputs back on the host by uid.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "eagle/eagle.hpp"
#include "test_util.hpp"

namespace eagle::test {

using Arrays = std::map<int64_t, Array>;  // by uid

inline const Device kGpu = Device::cuda(0);

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

}  // namespace eagle::test
