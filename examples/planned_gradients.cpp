// A training step over a planned operation graph: an MLP with cross_entropy as one planned
// kernel, its derivative recorded by diff::gradients (op-IR rules: two matmuls per matmul, gelu by
// formula, cross_entropy through cross_entropy_bwd), an SGD update, all in one graph.
// Shows: engines::planned_kernel's derivative, planned backward calls, one launch per step.
// Pitfalls: the backward recomputes what the forward op graph keeps to itself (the hidden layer);
// expose it with set_output to have it read instead.
#include <cstdio>
#include <vector>

#include "eagle/eagle.hpp"

using namespace eagle;

bool run(Device device) {
  std::vector<float> xs(64 * 32), w1s(32 * 128), w2s(128 * 10);
  std::vector<int64_t> ts(64);
  uint64_t state = 11;
  auto uniform = [&] { return static_cast<float>(data::splitmix64(state) % 2001) / 1000.0f - 1; };
  for (float& v : xs) v = uniform();
  for (float& v : w1s) v = 0.2f * uniform();
  for (float& v : w2s) v = 0.2f * uniform();
  for (int64_t& t : ts) t = static_cast<int64_t>(data::splitmix64(state) % 10);
  const Array x0 = Array::from(xs, {64, 32}, device), t0 = Array::from(ts, {64}, device);
  const Array w1_array = Array::from(w1s, {32, 128}, device);
  const Array w2_array = Array::from(w2s, {128, 10}, device);

  // [readme:planned_gradients]
  op::Graph og("mlp");
  op::Tensor x = og.tensor({"x", {64, 32}, DType::f32});
  op::Tensor w1 = og.tensor({"w1", {32, 128}, DType::f32});
  op::Tensor w2 = og.tensor({"w2", {128, 10}, DType::f32}), t = og.tensor({"t", {64}, DType::i64});
  op::Tensor logits = og.matmul(og.pointwise("gelu", og.matmul(x, w1)), w2);
  og.op("cross_entropy", {{"logits", logits}, {"targets", t}}).at("loss").set_output(true);
  const Kernel mlp = engines::planned_kernel(og);  // its derivative comes with it

  // x0 [64, 32] f32, t0 [64] i64 class ids, w1_array [32, 128], w2_array [128, 10]: on `device`
  Graph step = Graph::record(
      [&](Recorder& r) {
        Value wv1 = r.external(w1_array, "w1"), wv2 = r.external(w2_array, "w2");
        Value loss = r.call(mlp, {r.param("x", x0), wv1, wv2, r.param("t", t0)});
        std::vector<Value> g = diff::gradients(r, {loss}, {wv1, wv2});  // planned backward calls
        r.call(kernels::axpy(), {g[0], wv1, -0.1}, buffer(wv1));
        r.call(kernels::axpy(), {g[1], wv2, -0.1}, buffer(wv2));
        r.result(loss);
      },
      RecordOptions{.record = true});
  step.build(device);  // plans the forward and every backward segment for the device
  const float first = step()[0].to_vector<float>()[0];
  step(100);  // 100 training steps, one launch each
  // [/readme]
  const float last = step()[0].to_vector<float>()[0];
  std::printf("%s: loss %.4f -> %.4f\n", device.str().c_str(), first, last);
  return last < 0.5f * first;
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    try {
      if (!run(device)) {
        std::printf("planned_gradients: the loss did not fall on %s\n", device.str().c_str());
        return 1;
      }
    } catch (const NotSupported& e) {
      // On a GPU every backward segment must find an engine; say which did not.
      std::printf("planned_gradients: %s: %s\n", device.str().c_str(), e.what());
      return 1;
    }
  }
  return 0;
}
