// NCCL: the loader (runs anywhere), and the collectives on 1..K GPUs against the serial
// computation, eager and in a captured graph replayed 100 times with the ranks in lockstep.
// The GPU tests skip, saying why, without GPUs (or with fewer than the test needs) or NCCL.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "compare.hpp"
#include "engines/loader/dynamic_library.hpp"
#include "poison.hpp"
#include "random.hpp"
#include "ranks.hpp"

namespace eagle::test {
namespace {

using comm::ReduceOp;

// A variable set for the scope of a test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_.empty())
      unsetenv(name_);
    else
      setenv(name_, old_.c_str(), 1);
  }

 private:
  const char* name_;
  std::string old_;
};

TEST(CommNccl, StatusSaysWhereFromOrWhyNot) {
  const std::string status = comm::nccl_status();
  EXPECT_FALSE(status.empty());
  if (comm::nccl_available()) {
    EXPECT_NE(status.find("loaded from"), std::string::npos) << status;
    // The id needs no GPU: NCCL's bootstrap makes it.
    const comm::NcclId id = comm::nccl_unique_id();
    int nonzero = 0;
    for (char c : id.bytes) nonzero += c != 0;
    EXPECT_GT(nonzero, 0);
  } else {
    EXPECT_NE(status.find("not"), std::string::npos) << status;
  }
  {
    ScopedEnv env("EAGLE_NCCL_LIBRARY", "/nonexistent/libnccl.so.2");
    EXPECT_FALSE(comm::nccl_available());
    EXPECT_NE(comm::nccl_status().find("EAGLE_NCCL_LIBRARY=/nonexistent/libnccl.so.2"),
              std::string::npos)
        << comm::nccl_status();
    expect_throw_with<NotSupported>([] { comm::nccl_unique_id(); }, {"EAGLE_NCCL_LIBRARY"});
  }
}

// EAGLE_NCCL_LIBRARY may name a folder, such as the pip package's.
TEST(CommNccl, LoadsFromAFolder) {
  for (const std::string& dir : engines::python_package_dirs()) {
    const std::string lib = dir + "/nvidia/nccl/lib";
    if (!std::filesystem::exists(lib + "/libnccl.so.2")) continue;
    ScopedEnv env("EAGLE_NCCL_LIBRARY", lib);
    EXPECT_TRUE(comm::nccl_available()) << comm::nccl_status();
    EXPECT_NE(comm::nccl_status().find(lib), std::string::npos) << comm::nccl_status();
    return;
  }
  GTEST_SKIP() << "no pip package nvidia-nccl-cu13 (nvidia/nccl/lib) in this machine's Pythons";
}

TEST(CommNccl, RefusesWhatItCannotRun) {
  const comm::NcclId id;
  if (!cuda_available()) {
    // A CPU build, or no GPU: a typed refusal, never a crash.
    EXPECT_THROW(comm::nccl(id, 0, 1, Device::cuda(0)), Error);
    EXPECT_THROW(comm::nccl_group({Device::cuda(0)}), Error);
    return;
  }
  expect_invalid([&] { comm::nccl(id, 2, 2, Device::cuda(0)); }, {"'rank' is 2"});
  expect_invalid([&] { comm::nccl(id, 0, 1, Device::cpu()); }, {"'device' is cpu"});
  expect_invalid([] { comm::nccl_group({Device::cuda(0), Device::cuda(0)}); }, {"twice"});
}

// ---- on GPUs

// Why a test of `ranks` GPUs cannot run here, or "".
std::string why_not(int ranks) {
  if (!cuda_available()) return "no GPU (or a build without CUDA)";
  if (!comm::nccl_available()) return comm::nccl_status();
  if (cuda_device_count() < ranks)
    return "needs " + std::to_string(ranks) + " GPUs, this machine has " +
           std::to_string(cuda_device_count());
  return "";
}

std::vector<Device> first_gpus(int n) {
  std::vector<Device> out;
  for (int i = 0; i < n; ++i) out.push_back(Device::cuda(i));
  return out;
}

constexpr DType kDtypes[] = {DType::f32,  DType::f64, DType::f16,
                             DType::bf16, DType::i32, DType::i64};

// NCCL reduces in its own order (rings, trees): floats are compared to the serial result within
// the dtype's tolerance times the rank count, integers exactly.
void expect_reduced(const std::vector<double>& got, const std::vector<double>& want, DType dtype,
                    int ranks, const std::string& what) {
  if (!is_floating(dtype)) {
    EXPECT_EQ(got, want) << what;
    return;
  }
  expect_all_near(got, want, tolerance(dtype) * ranks, what);
}

// Every collective over the first k GPUs, eager, on each rank's own stream and thread.
void sweep_gpus(int k) {
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // KINDS.md: NVLink multicast off
  const std::vector<comm::Communicator> group = comm::nccl_group(first_gpus(k));
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(std::to_string(k) + " GPUs, " + std::string(dtype_name(dtype)));
    const Shape shape{4 * k, 37};
    std::vector<Array> xs;
    std::vector<std::vector<double>> xv;
    for (int r = 0; r < k; ++r) {
      xs.push_back(random_array(shape, dtype, Device::cpu()));
      xv.push_back(values(xs.back()));
    }
    struct Result {
      std::vector<double> all_reduce, reduce_scatter, all_gather, broadcast, avg;
    };
    std::vector<Result> got(static_cast<std::size_t>(k));
    const auto errors = on_ranks(k, [&](int r) {
      const auto ur = static_cast<std::size_t>(r);
      const Device gpu = Device::cuda(r);
      const comm::Communicator& c = group[ur];
      Stream stream(gpu);
      const Array x = xs[ur].to(gpu);
      auto run = [&](const Kernel& kernel, const Shape& out_shape) {
        const Array out = poisoned(out_shape, dtype, gpu);
        launch_into(kernel, {x}, {}, {out}, stream, ThreadTeam::serial());
        stream.synchronize();
        return values(out.to(Device::cpu()));
      };
      got[ur].all_reduce = run(comm::all_reduce(c), shape);
      got[ur].reduce_scatter = run(comm::reduce_scatter(c), {4, 37});
      got[ur].all_gather = run(comm::all_gather(c), {4 * k * k, 37});
      got[ur].broadcast = run(comm::broadcast(c, k - 1), shape);
      if (is_floating(dtype)) got[ur].avg = run(comm::all_reduce(c, ReduceOp::avg), shape);
    });
    for (const auto& e : errors) ASSERT_EQ(e, "");
    const std::vector<double> sum = serial_reduce(xv, ReduceOp::sum, dtype);
    std::vector<double> gathered;
    for (const auto& x : xv) gathered.insert(gathered.end(), x.begin(), x.end());
    for (int r = 0; r < k; ++r) {
      const Result& g = got[static_cast<std::size_t>(r)];
      const std::string rank = "rank " + std::to_string(r);
      expect_reduced(g.all_reduce, sum, dtype, k, rank + " all_reduce");
      const std::size_t n = sum.size() / static_cast<std::size_t>(k);
      expect_reduced(g.reduce_scatter,
                     std::vector<double>(sum.begin() + static_cast<std::ptrdiff_t>(n * r),
                                         sum.begin() + static_cast<std::ptrdiff_t>(n * (r + 1))),
                     dtype, k, rank + " reduce_scatter");
      EXPECT_EQ(g.all_gather, gathered) << rank << " all_gather";
      EXPECT_EQ(g.broadcast, xv[static_cast<std::size_t>(k - 1)]) << rank << " broadcast";
      if (is_floating(dtype))
        expect_reduced(g.avg, serial_reduce(xv, ReduceOp::avg, dtype), dtype, k, rank + " avg");
    }
  }
}

TEST(CommNcclGpu, OneGpu) {
  if (const std::string why = why_not(1); !why.empty()) GTEST_SKIP() << why;
  sweep_gpus(1);
}

TEST(CommNcclGpu, EveryCollectiveOnTwoToEightGpus) {
  if (const std::string why = why_not(2); !why.empty()) GTEST_SKIP() << why;
  for (int k = 2; k <= std::min(cuda_device_count(), 8); ++k) sweep_gpus(k);
}

// A step graph per rank, captured once and replayed 100 times by each rank's thread (the ranks
// in lockstep): acc += all_reduce(x) each launch, so acc ends at 100 times the sum.
TEST(CommNcclGpu, CapturedGraphReplayedInLockstep) {
  if (const std::string why = why_not(2); !why.empty()) GTEST_SKIP() << why;
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  const int k = std::min(cuda_device_count(), 8), launches = 100;
  const std::vector<comm::Communicator> group = comm::nccl_group(first_gpus(k));
  std::vector<Array> xs;
  std::vector<std::vector<double>> xv;
  for (int r = 0; r < k; ++r) {
    xs.push_back(random_array({1000}, DType::f32, Device::cpu()));
    xv.push_back(values(xs.back()));
  }
  std::vector<std::vector<double>> acc(static_cast<std::size_t>(k)), last(acc);
  std::vector<std::string> backends(static_cast<std::size_t>(k));
  const auto errors = on_ranks(k, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    const Device gpu = Device::cuda(r);
    const Array accumulator = Array::from(std::vector<float>(1000, 0.0f), {1000}, gpu);
    Graph g = Graph::record([&](Recorder& rec) {
      Value a = rec.external(accumulator, "acc");
      Value y = rec.call(comm::all_reduce(group[ur]), {rec.param("x", xs[ur].to(gpu))});
      rec.call(kernels::add(), {a, y}, buffer(a));
      rec.result(y);
    });
    g.build(gpu);
    backends[ur] = g.backend();
    g(launches);
    last[ur] = values(g.results()[0].to(Device::cpu()));
    acc[ur] = values(accumulator.to(Device::cpu()));
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  const std::vector<double> sum = serial_reduce(xv, ReduceOp::sum, DType::f32);
  std::vector<double> hundred;
  for (double v : sum) hundred.push_back(v * launches);
  for (int r = 0; r < k; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    EXPECT_EQ(backends[ur], "cuda-graph");
    expect_reduced(last[ur], sum, DType::f32, k, "rank " + std::to_string(r));
    expect_all_near(acc[ur], hundred, 1e-4, "rank " + std::to_string(r) + "'s accumulator");
  }
}

}  // namespace
}  // namespace eagle::test
