// Sections 6-7: device control flow against hand-built CUDA graphs.
//   6. A while_ loop's cost per turn against a raw CUDA WHILE conditional node with the same body.
//   7. A 4-branch fork (Recorder::parallel) against the same kernels serialized on one chain.
// Each section first checks its eagle graphs on the CPU host schedule (every build), then times
// them on the GPU (CUDA builds with a device, unless --cpu-only).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.hpp"

#ifdef EAGLE_HAVE_CUDA
#include <cuda_runtime.h>

#include "bench_cuda.hpp"
#include "bench_kernels.hpp"
#include "util/cuda_check.hpp"
#endif

namespace eagle::bench {
namespace {

// ---- The benchmark's own kernels, defined the way a user defines them (CPU and CUDA).

#ifdef EAGLE_HAVE_CUDA
CudaFunction countdown_cuda() {
  return countdown_cuda_function();
}
CudaFunction step_cuda() {
  return step_cuda_function();
}
#else
CudaFunction countdown_cuda() {
  return {};
}
CudaFunction step_cuda() {
  return {};
}
#endif

CudaLaunchShape one_thread(const KernelArgs&, const DeviceProperties&) {
  return {};
}

void countdown_cpu(const KernelArgs& a, const ThreadTeam&) {
  uint32_t* remaining = static_cast<uint32_t*>(a.arrays[0].data);
  *remaining -= 1;
  *static_cast<uint32_t*>(a.arrays[1].data) = *remaining > 0 ? 1u : 0u;
}

// remaining -= 1 (u32[1], read-write); cell = remaining > 0 (u32[1], write).
const Kernel& countdown_kernel() {
  static const Kernel k([] {
    KernelDef d;
    d.name = "countdown";
    d.arrays = {{"remaining", Access::read_write}, {"cell", Access::write}};
    d.per_sample = false;
    d.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>&) {
      if (in[0].dtype != DType::u32 || in[0].shape != Shape{1})
        throw InvalidArgument("kernel countdown: argument 'remaining' must be u32[1]");
      return std::vector<ArrayMeta>{{{1}, DType::u32}};
    };
    d.select = [](const std::vector<DType>&) {
      KernelImpl impl;
      impl.cpu = &countdown_cpu;
      impl.cuda_function = countdown_cuda();
      impl.cuda_shape = &one_thread;
      return impl;
    };
    return d;
  }());
  return k;
}

float step_value(float v, float alpha, float y, int64_t iters) {
  for (int64_t k = 0; k < iters; ++k) v = std::fma(v, alpha, y);
  return v;
}

void step_cpu(const KernelArgs& a, const ThreadTeam&) {
  const float* x = static_cast<const float*>(a.arrays[0].data);
  const float* y = static_cast<const float*>(a.arrays[1].data);
  float* out = static_cast<float*>(a.arrays[3].data);
  const auto alpha = static_cast<float>(a.scalars[0].f);
  for (int64_t i = 0; i < a.arrays[3].numel; ++i)
    out[i] = step_value(x[i], alpha, y[i], a.scalars[1].i);
}

// eagle's elementwise launch shape: 256 threads a block, at most 16 blocks per SM.
CudaLaunchShape step_shape(const KernelArgs& a, const DeviceProperties& device) {
  constexpr int64_t kThreads = 256;
  const int64_t wanted = (a.arrays[3].numel + kThreads - 1) / kThreads;
  const int64_t cap = std::max(1, device.multiprocessors) * int64_t{16};
  CudaLaunchShape s;
  s.grid[0] = static_cast<unsigned>(std::max<int64_t>(1, std::min(wanted, cap)));
  s.block[0] = static_cast<unsigned>(kThreads);
  return s;
}

// out[i] = v after `iters` turns of v = fma(v, alpha, y[i]) from v = x[i] (iters 1: an axpy).
// `after` is never read: passing an array orders the call after the array's writer, which is how
// section 7 serializes independent chains without changing their arithmetic.
const Kernel& step_kernel() {
  static const Kernel k([] {
    KernelDef d;
    d.name = "step";
    d.arrays = {
        {"x", Access::read}, {"y", Access::read}, {"after", Access::read}, {"out", Access::write}};
    d.scalars = {{"alpha"}, {"iters", ScalarKind::integer}};
    d.per_sample = true;
    d.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>& scalars) {
      if (in[0].dtype != DType::f32 || in[1].dtype != DType::f32 || in[0].shape != in[1].shape)
        throw InvalidArgument("kernel step: arguments 'x' and 'y' must be f32 of one shape");
      if (scalars[1].i < 0) throw InvalidArgument("kernel step: 'iters' must be >= 0");
      return std::vector<ArrayMeta>{in[0]};
    };
    d.select = [](const std::vector<DType>& dtypes) {
      if (dtypes[0] != DType::f32) throw NotSupported("kernel step: only f32");
      KernelImpl impl;
      impl.cpu = &step_cpu;
      impl.cuda_function = step_cuda();
      impl.cuda_shape = &step_shape;
      return impl;
    };
    return d;
  }());
  return k;
}

// ---- 6. The while_ loop: x <- 1 * x + y and a countdown per turn.

constexpr int64_t kLoopN = 1024;  // f32: a small, latency-bound axpy
// alpha 1: every turn adds y, so the result counts the turns, and fma(1, x, y) = x + y rounds the
// same on the device and the host.
constexpr double kLoopAlpha = 1.0;
constexpr uint32_t kLongTurns = 1000;
constexpr uint32_t kShortTurns = 10;

// fill remaining = turns, fill going = 1, while (going) { x = axpy(1, x, y) in place;
// going = countdown(remaining) }. Results: x (the param's private copy), remaining, going.
Graph record_loop(const Array& x0, const Array& y0, uint32_t turns) {
  return Graph::record([&](Recorder& r) {
    const Value x = r.param("x", x0);
    const Value y = r.param("y", y0);
    const Value remaining = r.empty({1}, DType::u32, "remaining");
    const Value going = r.empty({1}, DType::u32, "going");
    r.call(kernels::fill(), {static_cast<double>(turns)}, buffer(remaining));
    r.call(kernels::fill(), {1.0}, buffer(going));
    r.while_(going, [&] {
      r.call(kernels::axpy(), {x, y, kLoopAlpha}, buffer(x));
      r.call_all(countdown_kernel(), {remaining}, buffer(going));
    });
    r.result({x, remaining, going});
  });
}

std::vector<float> loop_reference(const std::vector<float>& x, const std::vector<float>& y,
                                  uint32_t turns) {
  std::vector<float> v = x;
  const auto alpha = static_cast<float>(kLoopAlpha);
  for (uint32_t t = 0; t < turns; ++t)
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::fma(alpha, v[i], y[i]);
  return v;
}

// Throws unless x is the reference and the loop stopped with remaining 0 and the cell 0.
void expect_loop(const std::string& what, const std::vector<float>& x, uint32_t remaining,
                 uint32_t going, const std::vector<float>& want) {
  if (remaining != 0 || going != 0)
    throw Error(what + ": after the loop remaining = " + std::to_string(remaining) +
                ", cell = " + std::to_string(going) + " (expected 0 and 0)");
  expect_close(what + ": x", x, want);
}

void expect_loop_graph(const std::string& what, Graph& g, const std::vector<float>& want) {
  const std::vector<Array>& out = g();
  expect_loop(what, out[0].to_vector<float>(), out[1].to_vector<uint32_t>()[0],
              out[2].to_vector<uint32_t>()[0], want);
}

// ---- 7. The fork: 4 branches, each a chain of 8 dependent step kernels on its own arrays.

constexpr int kBranches = 4;
constexpr int kDepth = 8;
constexpr int64_t kForkN = 256;  // one block of 256 threads per kernel: 4 fit on the device at once
constexpr double kStepAlpha = 1.0;
// 1: each kernel is an axpy (launch latency dominates); 2000: ~2000 dependent FMAs per thread,
// a few microseconds of work per kernel.
constexpr int kStepIters[] = {1, 2000};

// fork: Recorder::parallel, one branch per chain. waited: the same fork, each branch first
// Branch::wait-ing on the previous branch's last output (one chain through the fork). serial: no
// fork; the first call of each chain takes the previous chain's last output as `after`, so the
// calls form one chain by their data. unforked: no fork and no `after` link: the chains are
// independent by their data alone.
enum class Layout { fork, waited, serial, unforked };
constexpr Layout kLayouts[] = {Layout::fork, Layout::waited, Layout::serial, Layout::unforked};

// Branch b: v_0 = x_b, v_k = step(v_{k-1}, x_b). Results: the last v of each branch.
Graph record_branches(const std::vector<Array>& xs, int iters, Layout layout) {
  return Graph::record([&](Recorder& r) {
    std::vector<Value> x, last(kBranches);
    for (int b = 0; b < kBranches; ++b) {
      std::string name = "x";  // not "x" + to_string: GCC 12 warns falsely (-Wrestrict)
      name += std::to_string(b);
      x.push_back(r.param(name, xs[b]));
    }
    auto chain = [&](int b, const Value& after) {
      Value v = x[b];
      for (int k = 0; k < kDepth; ++k)
        v = r.call(step_kernel(), {v, x[b], k == 0 ? after : x[b], kStepAlpha, iters});
      last[b] = v;
    };
    if (layout == Layout::fork || layout == Layout::waited) {
      std::vector<std::function<void(Branch&)>> branches;
      for (int b = 0; b < kBranches; ++b) {
        branches.push_back([&, b](Branch& branch) {
          if (layout == Layout::waited && b > 0) branch.wait(last[b - 1]);
          chain(b, x[b]);
        });
      }
      r.parallel(branches);
    } else {
      for (int b = 0; b < kBranches; ++b)
        chain(b, layout == Layout::serial && b > 0 ? last[b - 1] : x[b]);
    }
    r.result(last);
  });
}

std::vector<float> branch_reference(const std::vector<float>& x, int iters) {
  std::vector<float> v = x;
  const auto alpha = static_cast<float>(kStepAlpha);
  for (int k = 0; k < kDepth; ++k)
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = step_value(v[i], alpha, x[i], iters);
  return v;
}

void expect_branches(const std::string& what, const std::vector<Array>& outs,
                     const std::vector<std::vector<float>>& want) {
  if (outs.size() != want.size())
    throw Error(what + ": " + std::to_string(outs.size()) + " results, expected " +
                std::to_string(want.size()));
  for (std::size_t b = 0; b < outs.size(); ++b)
    expect_close(what + " branch " + std::to_string(b), outs[b].to_vector<float>(), want[b]);
}

std::string layout_name(Layout layout) {
  switch (layout) {
    case Layout::fork:
      return "fork";
    case Layout::waited:
      return "fork+wait";
    case Layout::serial:
      return "serialized";
    case Layout::unforked:
      return "no-fork";
  }
  return "?";
}

// Kernel calls that wait for nothing: where the recorded graph can start work at once.
int recorded_roots(const Graph& g) {
  int roots = 0;
  for (const NodeInfo& n : g.nodes())
    roots += n.kind == NodeKind::kernel && n.deps.empty() && n.waits.empty();
  return roots;
}

int expected_roots(Layout layout) {
  return layout == Layout::fork || layout == Layout::unforked ? kBranches : 1;
}

// The section 6 and 7 graphs on the CPU host schedule give the host references.
void cpu_loop_check(Report& report) {
  const Device cpu = Device::cpu();
  const std::vector<float> xs = random_floats(kLoopN, 60), ys = random_floats(kLoopN, 61);
  const Array x = Array::from(xs, {kLoopN}, cpu), y = Array::from(ys, {kLoopN}, cpu);
  for (uint32_t turns : {kShortTurns, kLongTurns}) {
    Graph g = record_loop(x, y, turns);
    g.build(cpu);
    expect_loop_graph("section 6: cpu, " + std::to_string(turns) + " turns", g,
                      loop_reference(xs, ys, turns));
  }
  report.check("host schedule: while_ loop results", true,
               std::to_string(kShortTurns) + " and " + std::to_string(kLongTurns) +
                   " turns: x, remaining 0, cell 0");
}

void cpu_fork_check(Report& report) {
  const Device cpu = Device::cpu();
  std::vector<Array> xs;
  std::vector<std::vector<float>> hx;
  for (int b = 0; b < kBranches; ++b) {
    hx.push_back(random_floats(kForkN, 70 + b));
    xs.push_back(Array::from(hx.back(), {kForkN}, cpu));
  }
  std::string roots;
  bool roots_ok = true;
  for (int iters : kStepIters) {
    std::vector<std::vector<float>> want;
    for (const auto& h : hx) want.push_back(branch_reference(h, iters));
    for (Layout layout : kLayouts) {
      Graph g = record_branches(xs, iters, layout);
      g.build(cpu);
      expect_branches("section 7: cpu " + layout_name(layout) + ", iters " + std::to_string(iters),
                      g(), want);
      if (iters != kStepIters[0]) continue;
      const int n = recorded_roots(g);
      roots_ok = roots_ok && n == expected_roots(layout);
      roots += (roots.empty() ? "" : ", ") + layout_name(layout) + " " + std::to_string(n);
    }
  }
  report.check("host schedule: results of all 4 layouts", true,
               std::to_string(kBranches) + " branches x " + std::to_string(kDepth) +
                   " steps, iters 1 and 2000");
  report.check("recorded roots (calls waiting for nothing)", roots_ok,
               roots + " (expected 4, 1, 1, 4)");
}

#ifdef EAGLE_HAVE_CUDA

unsigned elementwise_grid(int64_t n, const DeviceProperties& props) {
  const int64_t cap = std::max(1, props.multiprocessors) * int64_t{16};
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min((n + kRawBlock - 1) / kRawBlock, cap)));
}

// The raw loop's buffers, shared by its graphs (they run one at a time on one stream).
struct RawLoopBuffers {
  Array x0, y, x, remaining, going;
};

// The graph eagle builds for record_loop, built by hand: a copy of x0 and two fills, a setter,
// a WHILE node whose body is axpy and countdown (independent) then a setter reading the cell.
// fused: the countdown kernel sets the condition itself, and the body has no setter.
void build_raw_loop(RawGraph& rg, const RawLoopBuffers& b, uint32_t turns, bool fused,
                    unsigned grid) {
  EAGLE_CUDA_CHECK(cudaGraphCreate(&rg.graph, 0));
  cudaGraph_t g = rg.graph;
  auto* x = static_cast<float*>(b.x.data());
  auto* remaining = static_cast<uint32_t*>(b.remaining.data());
  auto* going = static_cast<uint32_t*>(b.going.data());
  cudaGraphNode_t copy = nullptr, fill_remaining = nullptr, fill_going = nullptr;
  EAGLE_CUDA_CHECK(cudaGraphAddMemcpyNode1D(&copy, g, nullptr, 0, x, b.x0.data(), b.x.nbytes(),
                                            cudaMemcpyDeviceToDevice));
  EAGLE_CUDA_CHECK(add_raw_fill_u32_node(&fill_remaining, g, {}, remaining, turns));
  EAGLE_CUDA_CHECK(add_raw_fill_u32_node(&fill_going, g, {}, going, 1));
  cudaGraphConditionalHandle handle{};
  EAGLE_CUDA_CHECK(cudaGraphConditionalHandleCreate(&handle, g, 0, cudaGraphCondAssignDefault));
  cudaGraphNode_t setter = nullptr, loop = nullptr;
  EAGLE_CUDA_CHECK(
      add_raw_setter_node(&setter, g, {copy, fill_remaining, fill_going}, going, handle));
  cudaGraphNodeParams p{};
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = handle;
  p.conditional.type = cudaGraphCondTypeWhile;
  p.conditional.size = 1;
  EAGLE_CUDA_CHECK(cudaGraphAddNode(&loop, g, &setter, nullptr, 1, &p));
  cudaGraph_t body = p.conditional.phGraph_out[0];
  cudaGraphNode_t axpy = nullptr, countdown = nullptr, end = nullptr;
  EAGLE_CUDA_CHECK(add_raw_axpy_node(&axpy, body, {}, x, x, static_cast<const float*>(b.y.data()),
                                     static_cast<float>(kLoopAlpha), kLoopN, grid));
  if (fused) {
    EAGLE_CUDA_CHECK(add_raw_countdown_set_node(&countdown, body, {}, remaining, going, handle));
  } else {
    EAGLE_CUDA_CHECK(add_raw_countdown_node(&countdown, body, {}, remaining, going));
    EAGLE_CUDA_CHECK(add_raw_setter_node(&end, body, {axpy, countdown}, going, handle));
  }
  EAGLE_CUDA_CHECK(cudaGraphInstantiate(&rg.exec, rg.graph, 0));
}

std::string count_nodes(cudaGraph_t g) {
  std::size_t n = 0;
  EAGLE_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &n));
  return std::to_string(n);
}

void loop_gpu(const Options& o, Report& report, Device dev, const DeviceProperties& props) {
  const std::vector<float> xs = random_floats(kLoopN, 62), ys = random_floats(kLoopN, 63);
  const Array x = to_device(xs, dev), y = to_device(ys, dev);
  const std::vector<float> want_long = loop_reference(xs, ys, kLongTurns);
  const std::vector<float> want_short = loop_reference(xs, ys, kShortTurns);

  Graph g_long = record_loop(x, y, kLongTurns), g_short = record_loop(x, y, kShortTurns);
  g_long.build(dev);
  g_short.build(dev);
  const NodeInfo* loop = nullptr;
  for (const NodeInfo& n : g_long.nodes())
    if (n.kind == NodeKind::while_) loop = &n;
  if (!loop || loop->bodies.size() != 1 || loop->bodies[0].size() != 2)
    throw Error("section 6: the recording has no while_ node with a 2-call body");
  report.note("eagle: " + g_long.schedule() + "; the while_ body records " +
              std::to_string(loop->bodies[0].size()) + " calls, eagle adds the setter");

  const unsigned grid = elementwise_grid(kLoopN, props);
  const RawLoopBuffers rb{x, y, Array::empty({kLoopN}, DType::f32, dev),
                          Array::empty({1}, DType::u32, dev), Array::empty({1}, DType::u32, dev)};
  RawGraph raw_long, raw_short, fused_long, fused_short;
  build_raw_loop(raw_long, rb, kLongTurns, false, grid);
  build_raw_loop(raw_short, rb, kShortTurns, false, grid);
  build_raw_loop(fused_long, rb, kLongTurns, true, grid);
  build_raw_loop(fused_short, rb, kShortTurns, true, grid);
  report.note("raw: top-level nodes " + count_nodes(raw_long.graph) +
              " (memcpy, 2 fills, setter, WHILE); body axpy + countdown + setter, or fused: axpy + "
              "countdown that calls cudaGraphSetConditional");
  const RawStream raw_stream;
  const cudaStream_t rs = raw_stream.get();
  auto raw_run = [rs](const RawGraph& rg) {
    EAGLE_CUDA_CHECK(cudaGraphLaunch(rg.exec, rs));
    EAGLE_CUDA_CHECK(cudaStreamSynchronize(rs));
  };

  auto verify = [&](const std::string& when) {
    for (const Array& a : g_long.results()) poison(a);
    for (const Array& a : g_short.results()) poison(a);
    expect_loop_graph("section 6 " + when + ": eagle 1000", g_long, want_long);
    expect_loop_graph("section 6 " + when + ": eagle 10", g_short, want_short);
    const std::pair<const RawGraph*, const char*> raws[] = {{&raw_long, "raw 1000"},
                                                            {&raw_short, "raw 10"},
                                                            {&fused_long, "fused 1000"},
                                                            {&fused_short, "fused 10"}};
    for (const auto& [rg, name] : raws) {
      poison(rb.x);
      poison(rb.remaining);
      poison(rb.going);
      raw_run(*rg);
      expect_loop("section 6 " + when + ": " + name, rb.x.to_vector<float>(),
                  rb.remaining.to_vector<uint32_t>()[0], rb.going.to_vector<uint32_t>()[0],
                  rg == &raw_long || rg == &fused_long ? want_long : want_short);
    }
  };
  verify("before timing");

  // Each batch times launch + wait of the long loop and of the short one; the difference over
  // the extra turns is the cost of one turn, with the fixed costs (launch, fills, wait) cancelled.
  const double seconds = 4 * o.batch_seconds();
  auto per_turn = [&](auto run_long, auto run_short) -> Batch {
    const int reps_long = calibrate_reps(seconds, run_long);
    const int reps_short = calibrate_reps(seconds, run_short);
    return [=]() {
      const double t_long = time_batch(reps_long, 1, run_long);
      const double t_short = time_batch(reps_short, 1, run_short);
      return (t_long - t_short) / (kLongTurns - kShortTurns);
    };
  };
  const std::vector<Stats> s =
      measure(o, {per_turn([&] { g_long(); }, [&] { g_short(); }),
                  per_turn([&] { raw_run(raw_long); }, [&] { raw_run(raw_short); }),
                  per_turn([&] { raw_run(fused_long); }, [&] { raw_run(fused_short); })});
  char extra[96];
  std::snprintf(extra, sizeof extra, "raw same body / raw fused %.3f",
                s[1].median_ns / s[2].median_ns);
  report.compare("WHILE per turn, body axpy+countdown (+setter)", s[0], "raw same 3 nodes", s[1],
                 1.1, extra);
  report.compare("WHILE per turn, against a fused 2-kernel body", s[0], "raw fused setter", s[2]);
  verify("after timing");
  report.check("WHILE results (eagle, raw, fused; 10 and 1000 turns)", true,
               "x = host reference, remaining 0, cell 0, before and after timing");
}

// The fork's raw peers: the raw step kernels captured on one stream (serial), or on four streams
// forked from and joined to the first (fork).
void capture_branches(RawGraph& rg, const std::vector<Array>& xs,
                      const std::vector<std::vector<Array>>& outs, int iters, bool fork,
                      unsigned grid, const std::vector<const RawStream*>& streams,
                      const std::vector<const RawEvent*>& events) {
  const cudaStream_t s0 = streams[0]->get();
  EAGLE_CUDA_CHECK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal));
  try {
    if (fork) {
      EAGLE_CUDA_CHECK(cudaEventRecord(events[0]->get(), s0));
      for (int b = 1; b < kBranches; ++b)
        EAGLE_CUDA_CHECK(cudaStreamWaitEvent(streams[b]->get(), events[0]->get()));
    }
    for (int b = 0; b < kBranches; ++b) {
      const cudaStream_t s = fork ? streams[b]->get() : s0;
      const auto* x = static_cast<const float*>(xs[b].data());
      const float* v = x;
      for (int k = 0; k < kDepth; ++k) {
        auto* out = static_cast<float*>(outs[b][k].data());
        EAGLE_CUDA_CHECK(
            raw_step(out, v, x, static_cast<float>(kStepAlpha), iters, kForkN, grid, s));
        v = out;
      }
    }
    if (fork) {
      for (int b = 1; b < kBranches; ++b) {
        EAGLE_CUDA_CHECK(cudaEventRecord(events[b]->get(), streams[b]->get()));
        EAGLE_CUDA_CHECK(cudaStreamWaitEvent(s0, events[b]->get()));
      }
    }
  } catch (...) {
    cudaStreamEndCapture(s0, &rg.graph);
    throw;
  }
  EAGLE_CUDA_CHECK(cudaStreamEndCapture(s0, &rg.graph));
  EAGLE_CUDA_CHECK(cudaGraphInstantiate(&rg.exec, rg.graph, 0));
}

void fork_gpu(const Options& o, Report& report, Device dev, const DeviceProperties& props,
              int iters) {
  std::vector<Array> xs;
  std::vector<std::vector<float>> want;
  std::vector<std::vector<Array>> raw_outs(kBranches);
  for (int b = 0; b < kBranches; ++b) {
    const std::vector<float> h = random_floats(kForkN, 80 + 10 * iters + b);
    xs.push_back(to_device(h, dev));
    want.push_back(branch_reference(h, iters));
    for (int k = 0; k < kDepth; ++k) raw_outs[b].push_back(Array::empty({kForkN}, DType::f32, dev));
  }
  std::vector<Graph> graphs;  // one per layout, in kLayouts order
  graphs.reserve(std::size(kLayouts));
  for (Layout layout : kLayouts) {
    graphs.push_back(record_branches(xs, iters, layout));
    graphs.back().build(dev);
  }
  Graph& fork = graphs[static_cast<int>(Layout::fork)];
  Graph& serial = graphs[static_cast<int>(Layout::serial)];

  const unsigned grid = elementwise_grid(kForkN, props);
  std::vector<RawStream> stream_store(kBranches);
  std::vector<RawEvent> event_store(kBranches);
  std::vector<const RawStream*> streams;
  std::vector<const RawEvent*> events;
  for (int b = 0; b < kBranches; ++b) {
    streams.push_back(&stream_store[b]);
    events.push_back(&event_store[b]);
  }
  RawGraph raw_fork, raw_serial;
  capture_branches(raw_fork, xs, raw_outs, iters, true, grid, streams, events);
  capture_branches(raw_serial, xs, raw_outs, iters, false, grid, streams, events);
  const cudaStream_t rs = streams[0]->get();

  const std::string tag = "fork " + std::to_string(kBranches) + "x" + std::to_string(kDepth) +
                          ", iters " + std::to_string(iters);
  std::vector<Array> raw_last;
  for (int b = 0; b < kBranches; ++b) raw_last.push_back(raw_outs[b].back());
  auto verify = [&](const std::string& when) {
    for (Layout layout : kLayouts) {
      Graph& g = graphs[static_cast<int>(layout)];
      for (const Array& a : g.results()) poison(a);
      expect_branches("section 7 " + tag + " " + when + ": eagle " + layout_name(layout), g(),
                      want);
    }
    for (const RawGraph* rg : {&raw_fork, &raw_serial}) {
      for (const Array& a : raw_last) poison(a);
      EAGLE_CUDA_CHECK(cudaGraphLaunch(rg->exec, rs));
      EAGLE_CUDA_CHECK(cudaStreamSynchronize(rs));
      expect_branches("section 7 " + tag + " " + when + ": raw", raw_last, want);
    }
  };
  verify("before timing");
  if (iters == kStepIters[0]) {
    report.note("eagle fork: " + fork.schedule());
    report.note("eagle fork+wait: " + graphs[static_cast<int>(Layout::waited)].schedule());
    report.note("eagle serialized: " + serial.schedule());
    report.note("raw fork: " + count_nodes(raw_fork.graph) + " nodes captured on " +
                std::to_string(kBranches) + " streams; raw serial: " +
                count_nodes(raw_serial.graph) + " nodes captured on one stream");
  }

  // Each batch issues `launches` replays and waits once: the device-bound steady state.
  auto raw_once = [&](const RawGraph& rg) {
    EAGLE_CUDA_CHECK(cudaGraphLaunch(rg.exec, rs));
    EAGLE_CUDA_CHECK(cudaStreamSynchronize(rs));
  };
  const int launches = calibrate_reps(o.batch_seconds(), [&] { raw_once(raw_serial); });
  auto eagle_batch = [&](Graph& g) -> Batch {
    return [&g, launches] { return time_batch(1, launches, [&] { g(launches); }); };
  };
  auto raw_batch = [&](const RawGraph& rg) -> Batch {
    return [&rg, rs, launches] {
      return time_batch(1, launches, [&] {
        for (int i = 0; i < launches; ++i) EAGLE_CUDA_CHECK(cudaGraphLaunch(rg.exec, rs));
        EAGLE_CUDA_CHECK(cudaStreamSynchronize(rs));
      });
    };
  };
  // Indices: the layouts in kLayouts order (fork, waited, serial, unforked), then raw fork, raw
  // serial.
  std::vector<Batch> batches;
  for (Graph& g : graphs) batches.push_back(eagle_batch(g));
  batches.push_back(raw_batch(raw_fork));
  batches.push_back(raw_batch(raw_serial));
  const std::vector<Stats> s = measure(o, batches);
  const Stats& e_fork = s[0];
  const Stats& e_waited = s[1];
  const Stats& e_serial = s[2];
  const Stats& e_unforked = s[3];
  const Stats& r_fork = s[4];
  const Stats& r_serial = s[5];
  char extra[96];
  std::snprintf(extra, sizeof extra, "raw fork / raw serial %.3f",
                r_fork.median_ns / r_serial.median_ns);
  report.compare(tag + ": fork vs serialized", e_fork, "eagle serialized", e_serial, 0.5, extra);
  report.compare(tag + ": fork vs raw fork", e_fork, "raw 4-stream fork", r_fork, 1.1);
  report.compare(tag + ": serialized vs raw serial", e_serial, "raw 1-stream", r_serial);
  report.compare(tag + ": fork+wait chain vs serialized", e_waited, "eagle serialized", e_serial);
  report.compare(tag + ": no-fork (data edges) vs fork", e_unforked, "eagle fork", e_fork);
  verify("after timing");
}

#endif  // EAGLE_HAVE_CUDA

}  // namespace

void run_control_sections(const Options& o, Report& report) {
  std::string skip;
#ifdef EAGLE_HAVE_CUDA
  if (o.cpu_only) {
    skip = "--cpu-only";
  } else if (cuda_device_count() == 0) {
    skip = "no CUDA device (cudaGetDeviceCount found none)";
  }
#else
  (void)o;
  skip = "this build of eagle has no CUDA (EAGLE_HAVE_CUDA off)";
#endif

  report.section(
      "6. GPU: while_ loop cost per turn against a raw CUDA WHILE conditional node "
      "with the same body");
  report.note("body: x = axpy(1, x, y) in place on f32[" + std::to_string(kLoopN) +
              "] and a countdown kernel writing the u32 cell; per turn = (t(" +
              std::to_string(kLongTurns) + " turns) - t(" + std::to_string(kShortTurns) +
              " turns)) / " + std::to_string(kLongTurns - kShortTurns) +
              ", host wall time of launch + wait");
  report.note("issue's reference (raw CUDA): 5.2 us per turn for a 2-kernel body");
  cpu_loop_check(report);
#ifdef EAGLE_HAVE_CUDA
  Device dev = Device::cpu();
  DeviceProperties props;
  if (skip.empty()) {
    dev = Device::cuda(0);
    EAGLE_CUDA_CHECK(cudaSetDevice(0));  // the raw peers use the current device
    props = DeviceProperties::query(dev);
    loop_gpu(o, report, dev, props);
  }
#endif
  if (!skip.empty()) report.note("GPU part skipped: " + skip);

  report.section("7. GPU: a " + std::to_string(kBranches) +
                 "-branch fork (Recorder::parallel) of " + std::to_string(kDepth) +
                 "-kernel chains against the same kernels serialized");
  report.note("step kernel on f32[" + std::to_string(kForkN) +
              "] (1 block); per replay, batches of launches + one wait; ratio < 1 is overlap; "
              "serialized = each chain's first call also reads the previous chain's last output");
  cpu_fork_check(report);
#ifdef EAGLE_HAVE_CUDA
  if (skip.empty())
    for (int iters : kStepIters) fork_gpu(o, report, dev, props, iters);
#endif
  if (!skip.empty()) report.note("GPU part skipped: " + skip);
}

}  // namespace eagle::bench
