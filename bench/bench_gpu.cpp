// Sections 1-4: eagle on a CUDA device against the raw CUDA calls that do the same work, on the
// same instantiated graph or the same kernels. CUDA builds only; skipped without a device.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#include "bench_common.hpp"
#include "bench_cuda.hpp"
#include "bench_kernels.hpp"
#include "util/cuda_check.hpp"

namespace eagle::bench {
namespace {

constexpr int64_t kSmall = 1024;  // f32 per node: tiny kernels, so host cost dominates
constexpr int kBurst = 64;
constexpr int kReaders = 100;
constexpr int kChainLengths[] = {10, 100, 1000};

// 1. g() against cudaGraphLaunch + cudaStreamSynchronize of the graph g instantiated.
void launch_cost(const Options& o, Report& report, Device dev) {
  report.section(
      "1. GPU: host cost of g() (launch(1) + wait + results) against raw "
      "cudaGraphLaunch + cudaStreamSynchronize of the same instantiated graph");
  constexpr int kNodes = 10;
  const std::vector<float> xs = random_floats(kSmall, 1);
  const Array x = to_device(xs, dev);
  Graph g = record_chain(x, kNodes);
  g.build(dev);
  expect_close("section 1: g()", g()[0].to_vector<float>(), chain_reference(xs, kNodes));
  const auto exec = static_cast<cudaGraphExec_t>(g.native_graph_exec());
  const auto stream = static_cast<cudaStream_t>(g.stream().native());
  report.note(g.schedule() + "; axpy chain on f32[" + std::to_string(kSmall) + "]");

  auto eagle_call = [&] { g(); };
  auto raw_call = [&] {
    EAGLE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    EAGLE_CUDA_CHECK(cudaStreamSynchronize(stream));
  };
  const int reps = calibrate_reps(o.batch_seconds(), raw_call);
  std::vector<Stats> s = measure(o, {[&] { return time_batch(reps, 1, eagle_call); },
                                     [&] { return time_batch(reps, 1, raw_call); }});
  report.compare("g() per call, 10-node graph", s[0], "launch+sync", s[1], 1.15);

  // Enqueue only: each batch is a burst into a drained queue, timed until the last call returns.
  auto burst = [&](auto launch_one) {
    EAGLE_CUDA_CHECK(cudaStreamSynchronize(stream));
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < kBurst; ++i) launch_one();
    const double ns = ns_since(t0) / kBurst;
    EAGLE_CUDA_CHECK(cudaStreamSynchronize(stream));
    return ns;
  };
  auto eagle_launch = [&] { g.launch(1); };
  auto raw_launch = [&] { EAGLE_CUDA_CHECK(cudaGraphLaunch(exec, stream)); };
  s = measure(o.warmup(), 3 * o.batches(),
              {[&] { return burst(eagle_launch); }, [&] { return burst(raw_launch); }});
  report.compare("launch(1) enqueue only, bursts of " + std::to_string(kBurst), s[0],
                 "cudaGraphLaunch", s[1]);
}

std::vector<float> scaled(const std::vector<float>& x, double alpha) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(alpha) * x[i];
  return out;
}

double reader_alpha(int i) {
  return 1.0 + 0.25 * i;
}

void expect_readers(const std::string& what, const std::vector<Array>& outs,
                    const std::vector<float>& x) {
  if (outs.size() != static_cast<std::size_t>(kReaders))
    throw Error(what + ": " + std::to_string(outs.size()) + " results");
  for (int i = 0; i < kReaders; ++i)
    expect_close(what + " output " + std::to_string(i), outs[i].to_vector<float>(),
                 scaled(x, reader_alpha(i)));
}

// A kernel node of the instantiated graph with the argument block for each of the two arrays.
// The peer reads and sets nodes through the driver (cuGraph*KernelNode*Params), the calls under
// the runtime's: eagle's kernel handles belong to eagle's runtime, not to this program's.
struct RawNode {
  cudaGraphNode_t node = nullptr;
  KernelArgsN<2, 1> args[2];  // scale: x, out; alpha
  void* arg_pointer[2] = {nullptr, nullptr};
  CUDA_KERNEL_NODE_PARAMS_v2 params[2] = {};
};

struct DriverNodeCalls {
  CUresult (*get)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v2*) = nullptr;
  CUresult (*set)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2*) = nullptr;
};

const DriverNodeCalls& driver_node_calls() {
  static const DriverNodeCalls calls = [] {
    DriverNodeCalls c;
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status{};
    EAGLE_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuGraphKernelNodeGetParams", &fn, 12000,
                                                      cudaEnableDefault, &status));
    c.get = reinterpret_cast<decltype(c.get)>(fn);
    EAGLE_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuGraphExecKernelNodeSetParams", &fn, 12000,
                                                      cudaEnableDefault, &status));
    c.set = reinterpret_cast<decltype(c.set)>(fn);
    if (!c.get || !c.set) throw Error("section 2: the driver lacks the kernel node calls");
    return c;
  }();
  return calls;
}

void check_cu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) throw Error(std::string(what) + " failed: CUresult " + std::to_string(r));
}

// 2. bind() per patched node against cudaGraphExecKernelNodeSetParams per node.
void bind_cost(const Options& o, Report& report, Device dev) {
  report.section(
      "2. GPU: bind per patched node against raw cudaGraphExecKernelNodeSetParams "
      "on the same exec");
  const std::vector<float> xs_a = random_floats(kSmall, 2);
  const std::vector<float> xs_b = random_floats(kSmall, 3);
  const Array xa = to_device(xs_a, dev);
  const Array xb = to_device(xs_b, dev);
  Graph g = Graph::record([&](Recorder& r) {
    const Value x = r.param("x", xa);
    std::vector<Value> outs;
    for (int i = 0; i < kReaders; ++i)
      outs.push_back(r.call(kernels::scale(), {x, reader_alpha(i)}));
    r.result(outs);
  });
  g.build(dev);
  expect_readers("section 2: g() on xa", g(), xs_a);
  report.note(g.schedule() + "; param x read by " + std::to_string(kReaders) + " scale nodes");

  // The raw peer: the graph's kernel nodes, their recorded argument blocks, and the same blocks
  // with x's pointer swapped to xb; setting them is all a bind must do per node.
  const auto graph = static_cast<cudaGraph_t>(g.native_graph());
  const auto exec = static_cast<cudaGraphExec_t>(g.native_graph_exec());
  std::size_t count = 0;
  EAGLE_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> handles(count);
  EAGLE_CUDA_CHECK(cudaGraphGetNodes(graph, handles.data(), &count));
  std::vector<RawNode> raw;
  for (cudaGraphNode_t h : handles) {
    cudaGraphNodeType type{};
    EAGLE_CUDA_CHECK(cudaGraphNodeGetType(h, &type));
    if (type != cudaGraphNodeTypeKernel) continue;
    RawNode& n = raw.emplace_back();
    n.node = h;
    check_cu(driver_node_calls().get(reinterpret_cast<CUgraphNode>(h), &n.params[0]),
             "cuGraphKernelNodeGetParams");
    std::memcpy(&n.args[0], n.params[0].kernelParams[0], sizeof(n.args[0]));
    n.args[1] = n.args[0];
    int swapped = 0;
    for (int a = 0; a < n.args[1].num_arrays; ++a) {
      if (n.args[1].arrays[a].data != xa.data()) continue;
      n.args[1].arrays[a].data = xb.data();
      ++swapped;
    }
    if (swapped != 1) throw Error("section 2: a kernel node does not read x exactly once");
    n.params[1] = n.params[0];
  }
  if (raw.size() != static_cast<std::size_t>(kReaders))
    throw Error("section 2: the graph has " + std::to_string(raw.size()) + " kernel nodes, not " +
                std::to_string(kReaders));
  for (RawNode& n : raw) {
    for (int k = 0; k < 2; ++k) {
      n.arg_pointer[k] = &n.args[k];
      n.params[k].kernelParams = &n.arg_pointer[k];
    }
  }

  int eagle_phase = 0, raw_phase = 0;
  auto eagle_bind = [&] {
    eagle_phase ^= 1;
    g.bind("x", eagle_phase ? xb : xa);
  };
  auto raw_bind = [&] {
    raw_phase ^= 1;
    for (RawNode& n : raw)
      check_cu(driver_node_calls().set(reinterpret_cast<CUgraphExec>(exec),
                                       reinterpret_cast<CUgraphNode>(n.node), &n.params[raw_phase]),
               "cuGraphExecKernelNodeSetParams");
  };
  const int reps = calibrate_reps(o.batch_seconds(), raw_bind);
  const std::vector<Stats> s = measure(o, {[&] { return time_batch(reps, kReaders, eagle_bind); },
                                           [&] { return time_batch(reps, kReaders, raw_bind); }});
  report.compare("bind(\"x\") per patched node, " + std::to_string(kReaders) + " readers", s[0],
                 "ExecKernelNodeSet", s[1], 1.2);

  // The raw peer wrote the exec behind eagle's back: bind again, then check the results.
  g.bind("x", xb);
  expect_readers("section 2: g() after bind to xb", g(), xs_b);
  report.check("bind patched in place (no rebuild)", g.rebuild_count() == 0,
               "rebuild_count " + std::to_string(g.rebuild_count()));
}

// 3. Replay against eager launches, per node, for one chain length.
void chain_cost(const Options& o, Report& report, Device dev, unsigned grid, int length) {
  const std::vector<float> xs = random_floats(kSmall, 100 + length);
  const std::vector<float> want = chain_reference(xs, length);
  const Array x = to_device(xs, dev);
  Graph g = record_chain(x, length);
  g.build(dev);

  // The eager chains write one array per node, as the graph does; outs[0] is x.
  std::vector<Array> outs{x};
  for (int k = 0; k < length; ++k) outs.push_back(Array::empty({kSmall}, DType::f32, dev));
  const Array& last = outs.back();
  const Stream stream(dev);
  const ThreadTeam team(1);  // launch_into wants one; CUDA kernels do not use it
  const RawStream raw_stream;
  const cudaStream_t rs = raw_stream.get();
  const float alpha = static_cast<float>(kAlpha);
  const auto* xp = static_cast<const float*>(x.data());

  auto eagle_eager = [&] {
    for (int k = 0; k < length; ++k)
      launch_into(kernels::axpy(), {outs[k], x}, {kAlpha}, {outs[k + 1]}, stream, team);
  };
  auto raw_eager = [&] {
    for (int k = 0; k < length; ++k)
      EAGLE_CUDA_CHECK(raw_axpy(static_cast<float*>(outs[k + 1].data()),
                                static_cast<const float*>(outs[k].data()), xp, alpha, kSmall, grid,
                                rs));
  };
  // The raw kernels captured into a graph of the same shape: the peer for replay.
  RawGraph rg;
  EAGLE_CUDA_CHECK(cudaStreamBeginCapture(rs, cudaStreamCaptureModeThreadLocal));
  try {
    raw_eager();
  } catch (...) {
    cudaStreamEndCapture(rs, &rg.graph);
    throw;
  }
  EAGLE_CUDA_CHECK(cudaStreamEndCapture(rs, &rg.graph));
  EAGLE_CUDA_CHECK(cudaGraphInstantiate(&rg.exec, rg.graph, 0));

  const std::string tag = "chain " + std::to_string(length) + ": ";
  expect_close(tag + "g()", g()[0].to_vector<float>(), want);
  poison(last);
  eagle_eager();
  stream.synchronize();
  expect_close(tag + "eagle eager", last.to_vector<float>(), want);
  poison(last);
  raw_eager();
  EAGLE_CUDA_CHECK(cudaStreamSynchronize(rs));
  expect_close(tag + "raw eager", last.to_vector<float>(), want);
  poison(last);
  EAGLE_CUDA_CHECK(cudaGraphLaunch(rg.exec, rs));
  EAGLE_CUDA_CHECK(cudaStreamSynchronize(rs));
  expect_close(tag + "raw graph", last.to_vector<float>(), want);

  // Each batch issues `launches` chains and waits once: the device-bound steady state.
  const int launches = static_cast<int>(std::max<int64_t>(1, o.chain_nodes_per_batch() / length));
  const double nodes = static_cast<double>(launches) * length;
  auto eagle_replay = [&] { g(launches); };
  auto raw_replay = [&] {
    for (int i = 0; i < launches; ++i) EAGLE_CUDA_CHECK(cudaGraphLaunch(rg.exec, rs));
    EAGLE_CUDA_CHECK(cudaStreamSynchronize(rs));
  };
  auto eagle_eager_batch = [&] {
    for (int i = 0; i < launches; ++i) eagle_eager();
    stream.synchronize();
  };
  auto raw_eager_batch = [&] {
    for (int i = 0; i < launches; ++i) raw_eager();
    EAGLE_CUDA_CHECK(cudaStreamSynchronize(rs));
  };
  const std::vector<Stats> s = measure(o, {[&] { return time_batch(1, nodes, eagle_replay); },
                                           [&] { return time_batch(1, nodes, raw_replay); },
                                           [&] { return time_batch(1, nodes, eagle_eager_batch); },
                                           [&] { return time_batch(1, nodes, raw_eager_batch); }});
  report.compare(tag + "graph replay per node", s[0], "raw cudaGraph", s[1]);
  report.compare(tag + "eager per kernel (launch_into)", s[2], "raw <<<>>>", s[3]);
  report.compare(tag + "replay vs eager per node", s[0], "raw <<<>>>", s[3]);
}

// 4. The captured graph has one node per recorded kernel call.
void node_counts(Report& report, Device dev) {
  report.section(
      "4. GPU: nodes in the instantiated graph (native_node_count) against recorded "
      "kernel calls (nodes().size())");
  for (int length : kChainLengths) {
    const Array x = to_device(random_floats(kSmall, 200 + length), dev);
    Graph g = record_chain(x, length);
    g.build(dev);
    int calls = 0;
    for (const NodeInfo& n : g.nodes()) calls += n.kind == NodeKind::kernel;
    const int native = g.native_node_count();
    const bool ok =
        native == calls && calls == static_cast<int>(g.nodes().size()) && calls == length;
    report.check("chain " + std::to_string(length) + ": native nodes == kernel calls", ok,
                 "native " + std::to_string(native) + ", recorded " +
                     std::to_string(g.nodes().size()) + " (" + std::to_string(calls) +
                     " kernel calls)");
  }
}

}  // namespace

void run_gpu_sections(const Options& o, Report& report) {
  if (cuda_device_count() == 0) {
    report.section("1-4. GPU sections skipped: no CUDA device (cudaGetDeviceCount found none)");
    return;
  }
  const Device dev = Device::cuda(0);
  EAGLE_CUDA_CHECK(cudaSetDevice(0));  // the raw peers use the current device
  const DeviceProperties props = DeviceProperties::query(dev);
  int driver = 0, runtime = 0;
  EAGLE_CUDA_CHECK(cudaDriverGetVersion(&driver));
  EAGLE_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  std::printf("device: %s (%s, sm_%d, %d SMs), driver %d, runtime %d\n", dev.str().c_str(),
              props.name.c_str(), props.sm, props.multiprocessors, driver, runtime);

  launch_cost(o, report, dev);
  bind_cost(o, report, dev);

  std::string title = "3. GPU: replay against eager launches of the same kernels, per node, ";
  title += "for dependent chains (axpy on f32[" + std::to_string(kSmall) + "])";
  report.section(title);
  report.note("issue's reference (raw CUDA): eager 4.4 us/kernel, graph replay 1.0 us/node");
  // The raw kernel's grid matches eagle's elementwise launch shape.
  const int64_t cap = std::max(1, props.multiprocessors) * 16;
  const auto grid = static_cast<unsigned>(
      std::max<int64_t>(1, std::min((kSmall + kRawBlock - 1) / kRawBlock, cap)));
  for (int length : kChainLengths) chain_cost(o, report, dev, grid, length);

  node_counts(report, dev);
}

}  // namespace eagle::bench
