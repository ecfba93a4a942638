#include "demo.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>

#include "demo_kernels.hpp"
#include "eagle/eagle.hpp"

namespace eagle::tools {

namespace {

struct DemoOptions {
  Device device = cuda_available() ? Device::cuda(0) : Device::cpu();
  int64_t size = 256;  // grid is size x size
  int steps = 50;      // stencil steps recorded in the graph
  int repeats = 20;    // launches timed
  int threads = 0;     // CPU team size (0 = all)
  double alpha = 0.2;
};

DemoOptions parse(const std::vector<std::string>& args) {
  DemoOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw InvalidArgument("demo: " + args[i] + " needs a value");
      return args[++i];
    };
    auto integer = [&](const std::string& flag, int64_t lo) {
      const std::string& v = value();
      std::size_t used = 0;
      int64_t n = 0;
      try {
        n = std::stoll(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size() || n < lo)
        throw InvalidArgument("demo: " + flag + " must be an integer >= " + std::to_string(lo) +
                              ", got '" + v + "'");
      return n;
    };
    const std::string& a = args[i];
    if (a == "--device") {
      o.device = Device::parse(value());
    } else if (a == "--size") {
      o.size = integer(a, 3);
    } else if (a == "--steps") {
      o.steps = static_cast<int>(integer(a, 1));
    } else if (a == "--repeats") {
      o.repeats = static_cast<int>(integer(a, 1));
    } else if (a == "--threads") {
      o.threads = static_cast<int>(integer(a, 0));
    } else {
      throw InvalidArgument(
          "demo: unknown option '" + a +
          "' (options: --device cpu|cuda[:N], --size N, --steps N, --repeats N, --threads N)");
    }
  }
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A hot square in a cold plate, so the solution is not trivial.
Array initial_plate(int64_t n, Device device) {
  std::vector<float> v(static_cast<std::size_t>(n * n));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> noise(0.f, 0.01f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < n; ++c)
      v[r * n + c] = noise(rng) + ((r > n / 4 && r < n / 2 && c > n / 4 && c < n / 2) ? 1.f : 0.f);
  return Array::from(v, {n, n}, device);
}

}  // namespace

void demo_usage(std::FILE* to) {
  std::fprintf(to,
               "usage: eagle demo [options]\n"
               "  solves the 2-D heat equation eagerly and as one recorded graph, times both per\n"
               "  step and checks that they agree\n"
               "  --device cpu|cuda[:N]  where to run (default: cuda:0 when a GPU is present)\n"
               "  --size N               the grid is N x N (default 256, at least 3)\n"
               "  --steps N              stencil steps per run (default 50)\n"
               "  --repeats N            runs timed (default 20)\n"
               "  --threads N            CPU thread team size (default 0: one per hardware "
               "thread)\n");
}

int run_demo(const std::vector<std::string>& args) {
  DemoOptions o;
  try {
    o = parse(args);
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "eagle %s\n", e.what());
    demo_usage(stderr);
    return 2;
  }
  const Kernel& step = demo::heat_step();
  Stream stream(o.device);
  ThreadTeam team(o.threads);
  Array plate = initial_plate(o.size, o.device);
  std::printf("eagle demo: 2-D heat equation, %lldx%lld f32 grid, %d steps per run, on %s\n",
              static_cast<long long>(o.size), static_cast<long long>(o.size), o.steps,
              o.device.str().c_str());

  // The whole run, recorded once: steps ping-pong between two arrays, then the total heat.
  Graph g = Graph::record([&](Recorder& r) {
    Value u = r.param("plate", plate);
    Value a = r.empty({o.size, o.size}, DType::f32, "a");
    Value b = r.empty({o.size, o.size}, DType::f32, "b");
    Value src = u;
    for (int s = 0; s < o.steps; ++s) {
      Value dst = (s % 2 == 0) ? a : b;
      src = r.call(step, {src, o.alpha}, buffer(dst));
    }
    r.result({src, r.call(kernels::sum(), {src})});
  });
  g.build(o.device, BuildOptions{o.threads});
  std::printf("  graph: %zu nodes, backend %s (%s)\n", g.nodes().size(), g.backend().c_str(),
              g.schedule().c_str());

  // Eager: the same kernels launched one by one.
  Array a = Array::empty({o.size, o.size}, DType::f32, o.device);
  Array b = Array::empty({o.size, o.size}, DType::f32, o.device);
  auto eager_run = [&] {
    const Array* src = &plate;
    for (int s = 0; s < o.steps; ++s) {
      const Array& dst = (s % 2 == 0) ? a : b;
      launch_into(step, {*src}, {o.alpha}, {dst}, stream, team);
      src = &dst;
    }
    auto total = launch(kernels::sum(), {*src}, {}, stream, team);
    stream.synchronize();
    return total[0];
  };

  eager_run();  // warm up both paths
  g();
  auto t0 = std::chrono::steady_clock::now();
  Array eager_total;
  for (int k = 0; k < o.repeats; ++k) eager_total = eager_run();
  const double eager_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  g(o.repeats);
  const double graph_s = seconds_since(t0);

  const double per_eager = eager_s / (o.repeats * o.steps) * 1e6;
  const double per_graph = graph_s / (o.repeats * o.steps) * 1e6;
  const double e_sum = eager_total.to_vector<double>()[0];
  const double g_sum = g.results()[1].to_vector<double>()[0];
  std::printf("  eager : %9.2f us per step\n", per_eager);
  // The graph is not always faster (tiny CPU grids): say which way the ratio goes.
  const bool faster = per_graph <= per_eager;
  std::printf("  graph : %9.2f us per step   (%.2fx %s than eager)\n", per_graph,
              faster ? per_eager / per_graph : per_graph / per_eager, faster ? "faster" : "slower");
  std::printf("  total heat after %d steps: eager %.6f, graph %.6f\n", o.steps, e_sum, g_sum);
  const bool agree = std::abs(e_sum - g_sum) <= 1e-5 * std::max(1.0, std::abs(e_sum));
  std::printf("  results %s\n", agree ? "agree" : "DISAGREE");
  return agree ? 0 : 1;
}

}  // namespace eagle::tools
