// eagle_bench: eagle's host costs against the raw calls that do the same work, measured in the
// same run. One line per measurement: eagle, the peer, their ratio, and the goal where one exists.
//
//   eagle_bench [--cpu-only] [--quick]
//
// Sections 1-4 need a CUDA device (bench_gpu.cpp); section 5 runs on the CPU; sections 6-7
// (bench_control.cpp) check their graphs on the CPU and time them on a CUDA device; section 10
// (bench_gemm.cpp) times bf16 GEMMs through the cuBLASLt plan on a CUDA device; section 12
// (bench_ragged.cpp) times ragged::validate on the CPU and a CUDA device; section 13
// (bench_attention.cpp) times varlen attention and its over-capture on a CUDA device; section 14
// (bench_linear.cpp) times chunked linear attention against fla on a CUDA device.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"

namespace eagle::bench {
namespace {

constexpr int kCpuNodes = 100;

// Section 5 for one array size and team size: g(1) on a host schedule, the same chain through
// eager launch_into, and the graph's own CPU functions called directly with hand-made arguments.
// The graph writes the caller's arrays (buffer=), so all three touch the same memory: batches
// of one variant then find the caches as the other variants left them.
void cpu_chain(const Options& o, Report& report, int64_t n, int threads) {
  const Device cpu = Device::cpu();
  const std::vector<float> xs = random_floats(n, 5);
  const std::vector<float> want = chain_reference(xs, kCpuNodes);
  const Array x = Array::from(xs, {n}, cpu);
  // One array per node output, as the graph allocates; outs[0] is x.
  std::vector<Array> outs{x};
  for (int k = 0; k < kCpuNodes; ++k) outs.push_back(Array::empty({n}, DType::f32, cpu));
  const Array& last = outs.back();

  Graph g = Graph::record([&](Recorder& r) {
    const Value xv = r.param("x", x);
    Value v = xv;
    for (int k = 0; k < kCpuNodes; ++k)
      v = r.call(kernels::axpy(), {v, xv, kAlpha}, buffer(outs[k + 1]));
    r.result(v);
  });
  g.build(cpu, BuildOptions{threads});

  const std::vector<float> nans(static_cast<std::size_t>(n),
                                std::numeric_limits<float>::quiet_NaN());
  const Array poison = Array::from(nans, {n}, cpu);
  ThreadTeam team(threads);
  const Stream stream(cpu);
  std::vector<CpuFn> fns;
  std::vector<ArgBlock> args;
  for (int k = 0; k < kCpuNodes; ++k) {
    fns.push_back(g.recording().impl_of(k).cpu);
    ArgBlock& a = args.emplace_back(3, 1);
    a.array(0) = make_array_arg(outs[k], "x");
    a.array(1) = make_array_arg(x, "y");
    a.array(2) = make_array_arg(outs[k + 1], "out");
    a.scalar(0).f = kAlpha;
  }

  auto run_graph = [&] { g(1); };
  auto run_eager = [&] {
    for (int k = 0; k < kCpuNodes; ++k)
      launch_into(kernels::axpy(), {outs[k], x}, {kAlpha}, {outs[k + 1]}, stream, team);
  };
  auto run_direct = [&] {
    for (int k = 0; k < kCpuNodes; ++k) fns[k](args[k].view(), team);
  };

  expect_close("cpu g(1)", g(1)[0].to_vector<float>(), want);
  last.copy_from(poison);
  run_eager();
  expect_close("cpu eager", last.to_vector<float>(), want);
  last.copy_from(poison);
  run_direct();
  expect_close("cpu direct", last.to_vector<float>(), want);

  const int reps = calibrate_reps(o.batch_seconds(), run_direct);
  const std::vector<Stats> s = measure(o, {[&] { return time_batch(reps, 1, run_graph); },
                                           [&] { return time_batch(reps, 1, run_eager); },
                                           [&] { return time_batch(reps, 1, run_direct); }});
  const std::string what = std::to_string(kCpuNodes) + " x f32[" + std::to_string(n) + "], " +
                           std::to_string(threads) + " thr";
  auto per_node = [](const Stats& a, const Stats& b) {
    std::string text = format_ns((a.median_ns - b.median_ns) / kCpuNodes);
    text.erase(0, text.find_first_not_of(' '));
    return "overhead " + text.append("/node");
  };
  report.compare(what + ": g(1) per launch", s[0], "direct calls", s[2], 1.3, per_node(s[0], s[2]));
  report.compare(what + ": eager launch_into", s[1], "direct calls", s[2], std::nullopt,
                 per_node(s[1], s[2]));
}

void cpu_sections(const Options& o, Report& report) {
  report.section("5. CPU: per-launch cost of a " + std::to_string(kCpuNodes) +
                 "-node host schedule, g(1), against calling the same CPU kernels directly");
  report.note(
      "chain: out_k = axpy(0.5, out_{k-1}, x) into caller arrays (buffer=); direct = "
      "Recording::impl_of(i).cpu on hand-made argument blocks, same arrays, same team size");
  const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<int> teams{1};
  if (hw > 1) teams.push_back(hw);
  // 256 elements: overhead dominates. 32768: past two grains, so the team splits each kernel.
  for (int64_t n : {int64_t{256}, int64_t{32768}})
    for (int threads : teams) cpu_chain(o, report, n, threads);
}

int usage(const char* argv0, int code) {
  std::fprintf(
      code ? stderr : stdout,
      "usage: %s [--cpu-only] [--quick] [--only N[,N...]] [--peers FILE]\n"
      "  --cpu-only  skip the GPU sections (1-4) and the GPU parts of 6-7\n"
      "  --quick     fewer and shorter batches\n"
      "  --only      run only these sections (1-14; a letter picks a part: 14a, 14b, 14c)\n"
      "  --peers     peer timings of the same device call (bench/peers/torch_ops.py "
      "--table)\n",
      argv0);
  return code;
}

}  // namespace
}  // namespace eagle::bench

int main(int argc, char** argv) {
  using namespace eagle::bench;
  Options options;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--cpu-only")) {
      options.cpu_only = true;
    } else if (!std::strcmp(argv[i], "--quick")) {
      options.quick = true;
    } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
      for (const char* p = argv[++i]; *p;) {
        char* end = nullptr;
        const long n = std::strtol(p, &end, 10);
        if (end == p || n < 1 || n > 14) {
          std::fprintf(stderr, "eagle_bench: --only takes section numbers 1-14, got '%s'\n",
                       argv[i]);
          return usage(argv[0], 2);
        }
        options.only.push_back(static_cast<int>(n));
        // Only section 14 has lettered parts: 14a (exact shapes), 14b (over-capture) and 14c
        // (backward at the exact shapes).
        while (n == 14 && (*end == 'a' || *end == 'b' || *end == 'c')) options.parts[14] += *end++;
        if (*end != ',' && *end != '\0') {
          std::fprintf(
              stderr,
              "eagle_bench: --only takes section numbers 1-14 (and 14a, 14b, 14c), got '%s'\n",
              argv[i]);
          return usage(argv[0], 2);
        }
        p = *end == ',' ? end + 1 : end;
      }
    } else if (!std::strcmp(argv[i], "--peers") && i + 1 < argc) {
      options.peers = argv[++i];
    } else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      return usage(argv[0], 0);
    } else {
      std::fprintf(stderr, "eagle_bench: unknown argument '%s'\n", argv[i]);
      return usage(argv[0], 2);
    }
  }
  // Line-buffered, so progress shows when the output goes to a file or a pipe.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf(
      "eagle_bench: %s run; times are the median of %d batches (min in parentheses), "
      "after %d warm-up batches; ratio = eagle / peer\n",
      options.quick ? "quick" : "full", options.batches(), options.warmup());
  Report report;
  try {
    const bool gpu = options.runs(1) || options.runs(2) || options.runs(3) || options.runs(4);
    if (options.cpu_only && gpu) {
      report.section("1-4. GPU sections skipped (--cpu-only)");
    } else if (gpu) {
      run_gpu_sections(options, report);
    }
    if (options.runs(5)) cpu_sections(options, report);
    if (options.runs(6) || options.runs(7)) run_control_sections(options, report);
    if (!options.cpu_only && options.runs(8)) run_plan_sections(options, report);
    if (options.runs(9)) run_scale_sections(options, report);
    if (!options.cpu_only && options.runs(10)) run_gemm_sections(options, report);
    if (!options.cpu_only && options.runs(11)) run_structured_sections(options, report);
    if (options.runs(12)) run_ragged_sections(options, report);
    if (!options.cpu_only && options.runs(13)) run_attention_sections(options, report);
    if (!options.cpu_only && options.runs(14)) run_linear_sections(options, report);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "eagle_bench: error: %s\n", e.what());
    return 1;
  }
  report.summary();
  return 0;
}
