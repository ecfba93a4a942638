// Section 8: a planned single-kernel operation (the native pointwise engine) against the raw
// launch of the same kernel: host cost of execute(), and nodes added inside a captured graph.
// CUDA builds only; skipped without a device.
#include <cstdio>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "bench_common.hpp"
#include "bench_cuda.hpp"
#include "eagle/engines/builtin.hpp"
#include "eagle/engines/planned_kernel.hpp"
#include "engines/native/pointwise_kernels.hpp"

namespace eagle::bench {
namespace {

constexpr int64_t kElements = 4096;  // small, so the host cost is what is measured
constexpr int kBurst = 64;

op::Graph add_graph() {
  op::Graph g("add");
  const op::Tensor a = g.tensor({"a", {kElements}, DType::f32});
  const op::Tensor b = g.tensor({"b", {kElements}, DType::f32});
  g.pointwise("add", a, b).set_output(true).set_name("out");
  return g;
}

std::size_t node_count(cudaGraph_t graph) {
  std::size_t n = 0;
  EAGLE_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  return n;
}

// Nodes a capture of `issue` on `stream` records.
template <class F>
std::size_t captured_nodes(cudaStream_t stream, const F& issue) {
  cudaGraph_t graph = nullptr;
  EAGLE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  issue();
  EAGLE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  const std::size_t n = node_count(graph);
  cudaGraphDestroy(graph);
  return n;
}

}  // namespace

void run_plan_sections(const Options& o, Report& report) {
  if (cuda_device_count() == 0) {
    report.section("8. planned operations: skipped, no CUDA device");
    return;
  }
  report.section("8. GPU: a planned single-kernel op (add, f32[" + std::to_string(kElements) +
                 "], native pointwise engine) against the raw cudaLaunchKernel of the same kernel");
  const Device dev = Device::cuda(0);
  plan::ExecutionPlans plans = engines::create_execution_plans(add_graph(), dev);
  const int chosen = plans.build_plans();
  report.note("plan list: " + std::to_string(plans.count()) + " entries; built " +
              std::to_string(chosen) + " = " + plans.name_at(chosen));

  const std::vector<float> av = random_floats(kElements, 81), bv = random_floats(kElements, 82);
  const Array a = Array::from(av, {kElements}, dev), b = Array::from(bv, {kElements}, dev);
  const Array out = Array::empty({kElements}, DType::f32, dev);
  // a, b and out were made in that order, so their uids (the pack's positions) ascend so.
  plan::VariantPack pack(plans.layout());
  constexpr int pa = 0;
  pack.set_at(0, plan::Operand(a)).set_at(1, plan::Operand(b)).set_at(2, plan::Operand(out));
  RawStream stream;
  const plan::ExecutionContext ctx{stream.get(), nullptr, nullptr, 0, nullptr};
  plans.execute(pack, ctx);
  EAGLE_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  std::vector<float> want(av.size());
  for (std::size_t i = 0; i < av.size(); ++i) want[i] = av[i] + bv[i];
  expect_close("section 8: execute()", out.to_vector<float>(), want);

  native::PwOp op;
  native::pointwise_op_of("add", op);
  const void* kernel = native::pointwise_kernel(op, DType::f32);
  const unsigned block = 256, grid = (kElements + block - 1) / block;
  auto raw_one = [&] {
    native::launch_pointwise(kernel, a.data(), b.data(), out.data(), kElements, grid, block,
                             stream.get());
  };
  // The per-call path a serving loop takes: swap the pointers, execute.
  auto eagle_one = [&] {
    pack.set_data(pa, a.data());
    plans.execute(pack, ctx);
  };
  auto burst = [&](auto one) {
    EAGLE_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < kBurst; ++i) one();
    const double ns = ns_since(t0) / kBurst;
    EAGLE_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    return ns;
  };
  std::vector<Stats> s =
      measure(o.warmup(), 3 * o.batches(),
              {[&] { return burst(eagle_one); }, [&] { return burst(raw_one); }});
  const double added_us = (s[0].median_ns - s[1].median_ns) / 1000;
  report.compare("execute() enqueue, bursts of " + std::to_string(kBurst), s[0], "cudaLaunchKernel",
                 s[1], std::nullopt, "added " + format_ns(s[0].median_ns - s[1].median_ns));
  report.check("execute() <= raw + 1 us", added_us <= 1.0,
               "added " + std::to_string(added_us) + " us per call");

  const std::size_t raw_nodes = captured_nodes(stream.get(), raw_one);
  const std::size_t eagle_nodes = captured_nodes(stream.get(), [&] { plans.execute(pack, ctx); });
  report.check("stream capture of execute(): zero added nodes", eagle_nodes == raw_nodes,
               "execute " + std::to_string(eagle_nodes) + " node(s), raw launch " +
                   std::to_string(raw_nodes));

  // The same op recorded in an eagle graph: the plan's one kernel is the graph's one node.
  const Kernel add = engines::planned_kernel(add_graph());
  Graph graph = Graph::record([&](Recorder& r) {
    const Value x = r.param("a", a), y = r.param("b", b);
    r.result(r.call(add, {x, y}));
  });
  graph.build(dev);
  expect_close("section 8: recorded planned op", graph()[0].to_vector<float>(), want);
  const auto native_graph = static_cast<cudaGraph_t>(graph.native_graph());
  std::size_t n = node_count(native_graph);
  cudaGraphNode_t node = nullptr;
  cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
  if (n == 1) {
    EAGLE_CUDA_CHECK(cudaGraphGetNodes(native_graph, &node, &n));
    EAGLE_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
  }
  report.check("recorded planned op: graph holds exactly the plan's kernel node",
               n == 1 && type == cudaGraphNodeTypeKernel,
               std::to_string(n) + " node(s) in the instantiated graph");
}

}  // namespace eagle::bench
