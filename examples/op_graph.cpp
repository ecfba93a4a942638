// An operation graph planned over eagle's engines and executed with a variant pack.
// Shows: op::Graph, engines::create_execution_plans, the plan list, build_plans, VariantPack,
// execute on a stream (CallContext::on).
// Pitfalls: planning freezes the graph and is one-shot (clone() gives an unplanned copy); the
// pack holds pointers only: the arrays must outlive the call, and on a GPU the call may still be
// running when execute returns.
#include <cstdio>
#include <vector>

#include "eagle/eagle.hpp"

using namespace eagle;

bool run(Device device) {
  Array a = Array::from(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, device);
  Array b = Array::from(std::vector<float>{2, 2, 2, 0.5f, 0.5f, 0.5f}, {2, 3}, device);
  Array y = Array::empty({2, 3}, DType::f32, device);
  // [readme:plan]
  op::Graph og("scale_rows");
  op::Tensor ta = og.tensor({"a", {2, 3}, DType::f32});
  op::Tensor tb = og.tensor({"b", {2, 3}, DType::f32});
  op::Tensor ty = og.pointwise("mul", ta, tb).set_output(true).set_name("y");

  plan::ExecutionPlans plans = engines::create_execution_plans(og, device);
  std::printf("%s", plans.describe().c_str());  // the one plan list, best first
  plans.build_plans();                          // the first entry that builds; declines skip

  plan::VariantPack pack(plans.layout());  // one per call; positions = operands by uid
  pack.set(ta, plan::Operand(a)).set(tb, plan::Operand(b)).set(ty, plan::Operand(y));
  Stream stream(device);
  plans.execute(pack, CallContext::on(stream));  // issued on the stream (CPU: runs now)
  stream.synchronize();
  // [/readme]
  std::printf("%s: ran %s\n", device.str().c_str(), plans.name_at(plans.selected()).c_str());
  return y.to_vector<float>() == std::vector<float>{2, 4, 6, 2, 2.5f, 3};
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    if (!run(device)) {
      std::printf("op_graph: wrong result on %s\n", device.str().c_str());
      return 1;
    }
  }
  return 0;
}
