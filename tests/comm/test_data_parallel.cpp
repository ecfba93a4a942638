// Data parallelism on the CPU group: a training step whose gradients are averaged across ranks
// inside the step graph (diff::gradients, then all_reduce(avg)) equals the step of one rank over
// the concatenated batch, and leaves every rank with bitwise the same weights.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "arrays.hpp"
#include "compare.hpp"
#include "random.hpp"
#include "ranks.hpp"

namespace eagle::test {
namespace {

constexpr int64_t kIn = 6, kClasses = 5;

// A linear classifier's mean cross entropy over a batch of `rows`: loss(x [rows, 6], w [6, 5],
// t [rows]) as one planned kernel (its derivative comes with it).
Kernel linear_loss(int64_t rows) {
  op::Graph og("linear_ce_" + std::to_string(rows));
  op::Tensor x = og.tensor({"x", {rows, kIn}, DType::f32});
  op::Tensor w = og.tensor({"w", {kIn, kClasses}, DType::f32});
  op::Tensor t = og.tensor({"t", {rows}, DType::i64});
  og.op("cross_entropy", {{"logits", og.matmul(x, w)}, {"targets", t}}).at("loss").set_output(true);
  return engines::planned_kernel(og);
}

// One SGD step of `w` in place over (x, t): with a communicator, the gradient is averaged over
// its ranks before the update. Returns the step graph, built on the CPU.
Graph sgd_step(const Kernel& loss, const Array& w, const Array& x, const Array& t,
               const comm::Communicator* comm) {
  Graph g = Graph::record(
      [&](Recorder& r) {
        Value wv = r.external(w, "w");
        Value l = r.call(loss, {r.param("x", x), wv, r.param("t", t)});
        Value dw = diff::gradients(r, {l}, {wv})[0];
        if (comm) dw = r.call(comm::all_reduce(*comm, comm::ReduceOp::avg), {dw});
        r.call(kernels::axpy(), {dw, wv, -0.5}, buffer(wv));  // w -= 0.5 dw
        r.result({l, dw});
      },
      RecordOptions{.record = true});
  g.build(Device::cpu());
  return g;
}

TEST(CommDataParallel, TwoRanksEqualOneRankOverTheWholeBatch) {
  const int k = 2, steps = 5;
  const int64_t rows = 8, per_rank = rows / k;
  const Array x = random_array({rows, kIn}, DType::f32, Device::cpu());
  const Array t = from_ints(random_targets(rows, kClasses), {rows}, DType::i64, Device::cpu());
  const Array w0 = random_array({kIn, kClasses}, DType::f32, Device::cpu(), -0.5, 0.5);

  // One rank, the whole batch.
  const Array w_one = w0.to(Device::cpu());
  Graph one = sgd_step(linear_loss(rows), w_one, x, t, nullptr);
  std::vector<std::vector<double>> grads_one;
  for (int s = 0; s < steps; ++s) grads_one.push_back(values(one()[1]));

  // Two ranks, half the batch each, their own copy of the weights.
  const auto group = comm::cpu_group(k);
  const Kernel half_loss = linear_loss(per_rank);
  std::vector<Array> ws;
  for (int r = 0; r < k; ++r) ws.push_back(w0.to(Device::cpu()));
  std::vector<std::vector<std::vector<double>>> grads(k);
  const auto errors = on_ranks(k, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    const Array xr = x.slice(0, r * per_rank, (r + 1) * per_rank);
    const Array tr = t.slice(0, r * per_rank, (r + 1) * per_rank);
    Graph step = sgd_step(half_loss, ws[ur], xr, tr, &group[ur]);
    for (int s = 0; s < steps; ++s) grads[ur].push_back(values(step()[1]));
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");

  for (int s = 0; s < steps; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    // The averaged gradient of the halves is the gradient of the whole batch (its mean loss).
    expect_all_near(grads[0][static_cast<std::size_t>(s)], grads_one[static_cast<std::size_t>(s)],
                    1e-5, "rank 0's averaged gradient");
    EXPECT_EQ(grads[1][static_cast<std::size_t>(s)], grads[0][static_cast<std::size_t>(s)]);
  }
  EXPECT_TRUE(same_bytes(ws[0], ws[1])) << "the ranks' weights drifted apart";
  expect_all_near(values(ws[0]), values(w_one), 1e-5, "weights after the steps");
  EXPECT_NE(values(w_one), values(w0)) << "the steps changed nothing";
}

}  // namespace
}  // namespace eagle::test
