// BuildOptions::prioritize_chains: which top-level nodes later nodes wait on (they get the
// greatest priority, the sinks the least), and a graph built with priorities computing what one
// built without does, through kernel nodes, captured library calls and bind.
#include <gtest/gtest.h>

#include "eagle/eagle.hpp"
#include "eagle/engines/planned_kernel.hpp"
#include "exec/executor.hpp"
#include "test_util.hpp"
#include "testing_calls.hpp"

namespace eagle {
namespace {

using detail::PlannedNode;

TEST(NodePriority, TheNodesLaterNodesWaitOnAreTheChainTheRestAreSinks) {
  // 0 -> 1 -> 3, 0 -> 2 (a sink), 3 waits on a fork branch's item 4 (not in top).
  std::vector<PlannedNode> nodes(5);
  nodes[1].deps = {0};
  nodes[2].deps = {0};
  nodes[3].deps = {1};
  nodes[3].waits = {4};
  const std::vector<char> waited = detail::waited_on(nodes, {0, 1, 2, 3});
  EXPECT_EQ(waited, (std::vector<char>{1, 1, 0, 0, 1}));
  // Only the list's own nodes wait: with 3 out of it, 1 is a sink too.
  EXPECT_EQ(detail::waited_on(nodes, {0, 1, 2}), (std::vector<char>{1, 0, 0, 0, 0}));
}

// A chain of matmuls (h = x w0, y = h w1, their planned cuBLASLt calls) and each step's sink (a
// scale of it, a graph result no node reads), as a backward's chain and its weight gradients;
// and a light second root (a scale of w1, as a loss cotangent's seed) recorded last.
Graph record_chain(const Array& x0, const Array& w0, const Array& w1) {
  op::Graph og("mm");
  // Made apart: the kernel's arguments follow the order the tensors were made in.
  const op::Tensor a = og.tensor({"a", x0.shape(), DType::f32});
  const op::Tensor b = og.tensor({"b", w0.shape(), DType::f32});
  og.matmul(a, b).set_output(true).set_name("c");
  const Kernel mm = engines::planned_kernel(og);
  return Graph::record([&](Recorder& r) {
    const Value x = r.param("x", x0);
    const Value h = r.call(mm, {x, r.param("w0", w0)});
    const Value w1v = r.param("w1", w1);
    const Value y = r.call(mm, {h, w1v});
    r.result({y, r.call(kernels::scale(), {h, 2.0}), r.call(kernels::scale(), {y, 3.0}),
              r.call(kernels::scale(), {w1v, 5.0})});
  });
}

// Priorities (and, with `defer`, the side roots after the heaviest) compute what a plain build
// does, as built and after bind.
void prioritized_matches_plain(const Array& x0, const Array& w0, const Array& w1, bool defer) {
  const Device gpu = x0.device();
  Graph plain = record_chain(x0, w0, w1), prioritized = record_chain(x0, w0, w1);
  plain.build(gpu);
  BuildOptions options;
  options.prioritize_chains = true;
  options.defer_side_roots = defer;
  prioritized.build(gpu, options);
  // Two roots (the first matmul, the scale of w1); deferred, the scale follows the matmul.
  EXPECT_EQ(test::root_node_count(plain.native_graph()), 2);
  EXPECT_EQ(test::root_node_count(prioritized.native_graph()), defer ? 1 : 2);
  auto same = [&](const char* when) {
    SCOPED_TRACE(when);
    const auto& want = plain();
    const auto& got = prioritized();
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < got.size(); ++k)
      EXPECT_EQ(got[k].to_vector<float>(), want[k].to_vector<float>()) << "result " << k;
  };
  same("as built");
  const Array x1 = test::random_array({64, 32}, DType::f32, gpu);
  plain.bind("x", x1);
  prioritized.bind("x", x1);
  same("after bind");
  // Patched in place as the plain graph is (its children keep their priorities through the
  // update: an H100 run without that rebuilt the graph with a warning).
  EXPECT_EQ(prioritized.rebuild_count(), plain.rebuild_count());
}

TEST(NodePriority, APrioritizedGraphComputesWhatAPlainOneDoesAndFollowsBind) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  const Array x0 = test::random_array({64, 32}, DType::f32, gpu);
  const Array w0 = test::random_array({32, 32}, DType::f32, gpu);
  const Array w1 = test::random_array({32, 32}, DType::f32, gpu);
  for (const bool defer : {false, true}) {
    SCOPED_TRACE(defer ? "with defer_side_roots" : "priorities alone");
    prioritized_matches_plain(x0, w0, w1, defer);
  }
}

}  // namespace
}  // namespace eagle
