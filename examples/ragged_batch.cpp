// One graph captured for a capacity (T token rows, N sequence slots) serves every smaller packed
// batch: bind a new cu_seqlens and the kernels read the real batch from the device.
// Shows: chunk_capacity, ragged::validate (g() throws for a broken batch), chunk_offsets,
// mask_rows.
// Pitfalls: padding rows (past cu_seqlens[N]) hold anything, NaN included: mask them before an
// op that mixes rows; a bad cu_seqlens never reads out of bounds, but only g() says so (launch()
// checks nothing).
#include <cmath>
#include <cstdio>
#include <vector>

#include "eagle/eagle.hpp"

using namespace eagle;

bool run(Device device) {
  const int64_t T = 12, N = 3, C = 4, width = 2;
  std::vector<float> rows(T * width, NAN);  // padding rows hold NaN
  for (int64_t i = 0; i < 7 * width; ++i) rows[i] = static_cast<float>(i + 1);
  const Array x = Array::from(rows, {T, width}, device);
  const Array cu0 = Array::from(std::vector<int32_t>{0, 3, 7, 7}, {N + 1}, device);

  // [readme:ragged]
  // Sized by the capacity, never by a max_seqlen: at most 3 + (12 - 3) / 4 = 5 chunks of 4.
  std::printf("chunk capacity %lld\n", static_cast<long long>(ragged::chunk_capacity(T, N, C)));
  Graph g = Graph::record([&](Recorder& r) {
    const Value cu = r.param("cu_seqlens", cu0);
    ragged::validate(r, cu, T);  // g() throws for a broken batch
    const Value offsets = r.call(ragged::chunk_offsets(), {cu, T, C});
    const Value masked = r.call(ragged::mask_rows(), {r.param("x", x), cu});
    r.result({offsets, masked});
  });
  g.build(device);
  std::vector<int32_t> first = g()[0].to_vector<int32_t>();  // lengths 3, 4, 0: {0, 1, 2, 2}
  g.bind("cu_seqlens", Array::from(std::vector<int32_t>{0, 9, 5, 9}, {N + 1}, device));
  try {
    g();
  } catch (const InvalidArgument& e) {
    std::printf("refused: %s\n", e.what());  // entry 2 is less than the one before
  }
  // [/readme]
  // The graph still replays the broken batch, clamped: the results are in bounds.
  g.launch();
  g.synchronize();
  const std::vector<float> masked = g.results()[1].to_vector<float>();
  bool ok = first == std::vector<int32_t>{0, 1, 2, 2};
  // The clamped batch ends at row 9: rows 0-6 are x, rows 7-8 its NaN, rows 9-11 zero.
  for (int64_t i = 9 * width; i < T * width; ++i) ok = ok && masked[i] == 0.0f;
  for (int64_t i = 0; i < 7 * width; ++i) ok = ok && masked[i] == rows[i];
  return ok && g.results()[0].to_vector<int32_t>() == std::vector<int32_t>{0, 3, 3, 3};
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    if (!run(device)) {
      std::printf("ragged_batch: wrong result on %s\n", device.str().c_str());
      return 1;
    }
  }
  return 0;
}
