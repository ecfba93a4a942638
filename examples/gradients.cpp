// Gradients: reverse mode over a recorded graph, as a graph of its own or inside the same graph.
// Shows: RecordOptions{.record = true}, the name map, diff::reverse, saved_bytes, the reverse of a
// capped loop (its per-turn tape), and a training step (forward, reverse, an in-place SGD update)
// recorded once and replayed as one launch.
// Pitfalls: a plain temporary has no name (give it a buffer= to differentiate it); a reverse
// graph reads the forward's arrays, so run the forward first; a while_ on the differentiated path
// needs max_turns.
#include <cmath>
#include <cstdio>
#include <vector>

#include "eagle/eagle.hpp"

using namespace eagle;

bool run(Device device) {
  // [readme:reverse]
  Array x0 = Array::from(std::vector<float>{1, 2, 3}, {3}, device);
  Array w0 = Array::from(std::vector<float>{0.5f, -1, 2}, {3}, device);
  Graph f = Graph::record(
      [&](Recorder& r) {
        Value x = r.param("x", x0), w = r.param("w", w0);
        Value h = r.empty({3}, DType::f32, "h");    // labeled: "h" is in the name map
        r.call(kernels::mul(), {x, w}, buffer(h));  // h = x w
        r.call(kernels::mul(), {h, h}, buffer(h));  // h = h^2 in place: the old h is saved
        r.result(r.call(kernels::sum(), {h}));      // "result"
      },
      RecordOptions{.record = true});
  f.build(device);
  Graph grad = diff::reverse(f, {"result"}, {"x", "w"});  // built once, replayable
  f();                                                    // the forward, then
  const std::vector<Array>& g = grad();                   // d result / dx, d result / dw
  std::size_t saved = f.saved_bytes();                    // 12: the h that h^2 overwrote
  // [/readme]
  const bool reverse_ok = g[0].to_vector<float>() == std::vector<float>{0.5f, 4, 24} &&
                          g[1].to_vector<float>() == std::vector<float>{1, -8, 36} && saved == 12;

  // [readme:reverse-loop]
  Array on = Array::from(std::vector<uint32_t>{1}, {1}, device);
  Graph loop = Graph::record(
      [&](Recorder& r) {
        Value y = r.param("x", x0), w = r.param("w", w0);
        r.for_(3, [&] {                        // at most 3 turns
          y = r.call(kernels::mul(), {y, w});  // y = y w, merged in place: y is taped
          r.continue_if(r.param("skip", on));  // skips the rest of the turn while skip != 0
          y = r.call(kernels::scale(), {y, 2.0});
        });
        r.result(r.call(kernels::sum(), {y}));
      },
      RecordOptions{.record = true});
  loop.build(device);
  Graph loop_grad = diff::reverse(loop, {"result"}, {"x"});  // a while_ counting turns down
  loop();
  const std::vector<Array>& dx = loop_grad();  // w^3: three turns of y = y w
  std::size_t tape = loop.saved_bytes();       // 48: 3 rows of y (12 bytes), of the guard cell
  // [/readme]
  const bool loop_ok = dx[0].to_vector<float>() == std::vector<float>{0.125f, -1, 8} && tape == 48;

  // [readme:train]
  Array w = Array::from(std::vector<float>{0, 0, 0}, {3}, device);  // updated by every step
  Array x = Array::from(std::vector<float>{1, 2, 3}, {3}, device);
  Array t = Array::from(std::vector<float>{2, 4, 6}, {3}, device);
  Graph step = Graph::record(
      [&](Recorder& r) {
        Value wv = r.external(w, "w");  // state that persists across launches
        Value wx = r.call(kernels::mul(), {wv, r.param("x", x)});
        Value err = r.call(kernels::axpy(), {r.param("t", t), wx, -1.0});  // w x - t
        Value loss = r.call(kernels::sum(), {r.call(kernels::mul(), {err, err})});
        Value dw = diff::gradients(r, {loss}, {wv})[0];        // the reverse, in this graph
        r.call(kernels::axpy(), {dw, wv, -0.02}, buffer(wv));  // w -= 0.02 dw, in place
        r.result(loss);
      },
      RecordOptions{.record = true});
  step.build(device);
  step(200);  // 200 training steps, one launch each
  // [/readme]
  bool train_ok = true;
  for (float v : w.to_vector<float>()) train_ok = train_ok && std::abs(v - 2.0f) < 1e-3f;
  std::printf("%s: reverse %s, loop %s, training %s (w -> 2)\n", device.str().c_str(),
              reverse_ok ? "ok" : "WRONG", loop_ok ? "ok" : "WRONG", train_ok ? "ok" : "WRONG");
  return reverse_ok && loop_ok && train_ok;
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    if (!run(device)) {
      std::printf("gradients: wrong result on %s\n", device.str().c_str());
      return 1;
    }
  }
  return 0;
}
