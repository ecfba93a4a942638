// Build, launch and bind, on the CPU and on the GPU, with the same expected values.
#include <gtest/gtest.h>

#include "eagle/eagle.hpp"
#include "test_util.hpp"
#include "testing_kernels.hpp"

namespace eagle {
namespace {

using test::random_array;

class Exec : public test::OnDevice {};
EAGLE_ON_EVERY_DEVICE(Exec);

std::vector<double> host(const Array& a) {
  return a.to_vector<double>();
}

// y = 2x + 0.5 * (3x) computed as a small DAG with a fork and a join.
Graph record_axpy_dag(const Array& x0) {
  return Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    Value a = r.call(kernels::scale(), {x, 2.0});
    Value b = r.call(kernels::scale(), {x, 3.0});
    r.result(r.call(kernels::axpy(), {b, a, 0.5}));
  });
}

std::vector<double> axpy_dag_reference(const std::vector<double>& x) {
  std::vector<double> y;
  for (double v : x) y.push_back(0.5 * (3.0 * v) + 2.0 * v);
  return y;
}

TEST_P(Exec, RunsTheRecordedComputationForEveryFloatType) {
  for (DType dtype : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    Array x0 = random_array({1000, 3}, dtype, device());
    Graph g = record_axpy_dag(x0);
    g.build(device());
    test::poison(g.results()[0]);
    const auto& out = g();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape(), (Shape{1000, 3}));
    EXPECT_EQ(out[0].device(), device());
    EXPECT_CLOSE(host(out[0]), axpy_dag_reference(host(x0)), test::tolerance(dtype));
  }
}

TEST_P(Exec, BackendScheduleAndNodeCountSayWhatWasBuilt) {
  Array x0 = random_array({64}, DType::f32, device());
  Graph g = record_axpy_dag(x0);
  EXPECT_EQ(g.backend(), "");
  g.build();  // the device where the param lives
  EXPECT_EQ(g.device(), device());
  EXPECT_EQ(g.backend(), device().is_cuda() ? "cuda-graph" : "cpu-host-schedule");
  EXPECT_NE(g.schedule().find(device().is_cuda() ? "3 nodes" : "3 nodes in 2 stages"),
            std::string::npos)
      << g.schedule();
  EXPECT_EQ(g.native_node_count(), 3);
  EXPECT_EQ(g.native_graph() != nullptr, device().is_cuda());
}

TEST_P(Exec, LaunchNRunsNTimesAndWaitsOnce) {
  Array counter = Array::from(std::vector<uint32_t>{0}, {1}, device());
  Graph g = Graph::record([&](Recorder& r) {
    Value c = r.external(counter, "counter");
    r.call(test::count_kernel(), {c});
    r.result(c);
  });
  g.build(device());
  g(7);
  EXPECT_EQ(counter.to_vector<uint32_t>()[0], 7u);
  g.launch(3);
  g.synchronize();
  EXPECT_EQ(g()[0].to_vector<uint32_t>()[0], 11u);
}

TEST_P(Exec, AWrittenArgumentIsNeverChangedAndIsCopiedInEveryLaunch) {
  Array x0 = random_array({257}, DType::f32, device());
  const auto before = host(x0);
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    r.call(kernels::scale(), {x, 2.0}, buffer(x));  // in place on the graph's copy
    r.result(x);
  });
  g.build(device());
  const auto& out = g(5);  // five launches: each starts again from the argument
  std::vector<double> want;
  for (double v : before) want.push_back(2 * v);
  EXPECT_CLOSE(host(out[0]), want, 1e-6);
  EXPECT_EQ(host(x0), before);
  // The copy follows bind: the next launch starts from the new argument.
  Array x1 = random_array({257}, DType::f32, device());
  g.bind("x", x1);
  want.clear();
  for (double v : host(x1)) want.push_back(2 * v);
  EXPECT_CLOSE(host(g()[0]), want, 1e-6);
}

TEST_P(Exec, BindSwapsTheArgumentWithoutRebuildingKernelNodes) {
  Array x0 = random_array({333}, DType::f32, device());
  Array x1 = random_array({333}, DType::f32, device());
  Graph g = record_axpy_dag(x0);
  std::vector<std::string> warnings;
  g.set_warning_handler([&](const std::string& w) { warnings.push_back(w); });
  g.build(device());
  void* exec_before = g.native_graph_exec();
  EXPECT_CLOSE(host(g()[0]), axpy_dag_reference(host(x0)), 1e-6);
  g.bind("x", x1);
  EXPECT_CLOSE(host(g()[0]), axpy_dag_reference(host(x1)), 1e-6);
  g.bind("x", x0);
  EXPECT_CLOSE(host(g()[0]), axpy_dag_reference(host(x0)), 1e-6);
  EXPECT_EQ(g.rebuild_count(), 0);
  EXPECT_EQ(g.native_graph_exec(), exec_before);
  EXPECT_TRUE(warnings.empty());
}

TEST_P(Exec, BindRefusesADifferentShapeDtypeDeviceOrNameAndTheGraphStillRuns) {
  Array x0 = random_array({128}, DType::f32, device());
  Graph g = record_axpy_dag(x0);
  g.build(device());
  const auto want = axpy_dag_reference(host(x0));
  auto expect_refused = [&](const std::function<void()>& f, const std::string& phrase) {
    try {
      f();
      ADD_FAILURE() << "expected InvalidArgument containing: " << phrase;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
    EXPECT_CLOSE(host(g()[0]), want, 1e-6);  // unchanged, still runs
  };
  expect_refused([&] { g.bind("x", random_array({127}, DType::f32, device())); },
                 "shape, dtype and device must stay the same");
  expect_refused([&] { g.bind("x", random_array({128}, DType::f64, device())); },
                 "shape, dtype and device must stay the same");
  const Device other = device().is_cpu() && cuda_available() ? Device::cuda(0) : Device::cpu();
  if (other != device())
    expect_refused([&] { g.bind("x", random_array({128}, DType::f32, other)); },
                   "shape, dtype and device must stay the same");
  expect_refused([&] { g.bind("y", x0); }, "no param named 'y' (params: x)");
  expect_refused([&] { g.bind("x", g.results()[0]); }, "overlaps the graph's array");
  Array wide = random_array({128, 2}, DType::f32, device());
  Array strided = Array::wrap(wide.data(), {128}, DType::f32, device(), {2});
  expect_refused([&] { g.bind("x", strided); }, "must be contiguous");
}

TEST_P(Exec, BindBeforeBuildIsUsedByBuild) {
  Array x0 = random_array({64}, DType::f32, device());
  Array x1 = random_array({64}, DType::f32, device());
  Graph g = record_axpy_dag(x0);
  g.bind("x", x1);
  g.build(device());
  EXPECT_CLOSE(host(g()[0]), axpy_dag_reference(host(x1)), 1e-6);
}

TEST_P(Exec, AllocatesOneArrayPerOutputNotWrittenInPlace) {
  const Shape shape{1000};
  Array x0 = random_array(shape, DType::f32, device());
  Array ext = random_array(shape, DType::f32, device());
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    Value a = r.call(kernels::scale(), {x, 2.0});   // new: 4000 bytes
    r.call(kernels::scale(), {a, 3.0}, buffer(a));  // in place: nothing
    Value b = r.call(kernels::add(), {a, x});       // new: 4000 bytes
    r.call(kernels::add(), {a, b}, buffer(ext));    // the caller's array: nothing
    r.result(r.call(kernels::sum(), {b}));          // new: 4 bytes
  });
  const std::size_t hand_written = 4000 + 4000 + 4;
  const std::size_t before = bytes_in_use(device());
  g.build(device());
  EXPECT_EQ(g.allocated_bytes(), hand_written);
  EXPECT_EQ(bytes_in_use(device()) - before, hand_written);
  // The external array was written by the graph.
  const auto xs = host(x0);
  std::vector<double> want;
  for (double v : xs) want.push_back(6 * v + (6 * v + v));
  g();
  EXPECT_CLOSE(host(ext), want, 1e-6);
}

TEST_P(Exec, BuildRefusesArraysOnAnotherDeviceAndKernelsWithoutACudaVersion) {
  Array x0 = random_array({16}, DType::f32, Device::cpu());
  Graph g = Graph::record(
      [&](Recorder& r) { r.result(r.call(test::cpu_only_square(), {r.param("x", x0)})); });
  if (device().is_cpu()) {
    g.build(device());
    std::vector<double> want;
    for (double v : host(x0)) want.push_back(v * v);
    EXPECT_CLOSE(host(g()[0]), want, 1e-7);
    return;
  }
  try {
    g.build(device());
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "param array 'x' lives on cpu but the graph is being built for cuda:0"),
              std::string::npos)
        << e.what();
  }
  Array xg = random_array({16}, DType::f32, device());
  Graph h = Graph::record(
      [&](Recorder& r) { r.result(r.call(test::cpu_only_square(), {r.param("x", xg)})); });
  try {
    h.build(device());
    FAIL() << "expected NotSupported";
  } catch (const NotSupported& e) {
    EXPECT_NE(std::string(e.what()).find("node 0 'square'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(h.built());
}

TEST_P(Exec, RunningBeforeBuildIsAClearError) {
  Array x0 = random_array({16}, DType::f32, device());
  Graph g = record_axpy_dag(x0);
  EXPECT_THROW(g(), InvalidArgument);
  EXPECT_THROW(g.launch(1), InvalidArgument);
  g.build(device());
  EXPECT_THROW(g.launch(-1), InvalidArgument);
}

TEST(ExecCpu, BuildingForAnAbsentGpuIsAClearError) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is attached";
  Array x0 = random_array({16}, DType::f32, Device::cpu());
  Graph g = record_axpy_dag(x0);
  try {
    g.build(Device::cuda(0));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("device cuda:0 is not attached"), std::string::npos)
        << e.what();
  }
  g.build(Device::cpu());  // still usable
  EXPECT_CLOSE(host(g()[0]), axpy_dag_reference(host(x0)), 1e-6);
}

// The same graph on both backends gives the same values (the GPU run compares to the CPU run).
TEST(ExecCompare, GpuResultsMatchCpuResults) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (DType dtype : {DType::f64, DType::f32, DType::bf16}) {
    Array xc = random_array({4099}, dtype, Device::cpu());
    Array wc = random_array({4099}, dtype, Device::cpu());
    Array cc = random_array({4099}, DType::u8, Device::cpu());
    auto body = [](const Array& x0, const Array& w0, const Array& c0) {
      return Graph::record([&](Recorder& r) {
        Value x = r.param("x", x0);
        Value w = r.param("w", w0);
        Value y = x;
        for (int k = 0; k < 4; ++k)
          y = r.call(kernels::axpy(), {w, r.call(kernels::mul(), {y, w}), 0.25});
        r.result(r.call(kernels::where(), {r.param("c", c0), y, x}));
      });
    };
    const Device gpu_device = Device::cuda(0);
    Graph cpu = body(xc, wc, cc);
    Graph gpu = body(xc.to(gpu_device), wc.to(gpu_device), cc.to(gpu_device));
    cpu.build(Device::cpu());
    gpu.build(Device::cuda(0));
    EXPECT_CLOSE(host(gpu()[0]), host(cpu()[0]), 4 * test::tolerance(dtype));
  }
}

}  // namespace
}  // namespace eagle
