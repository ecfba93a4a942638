// Tests of how a Call enters a built graph and is patched by bind(): a call that populates its
// own CUDA graph nodes, a stream-captured call, a call that cannot be patched, and the context
// (library handle, workspace) the executor owns for it, on the graph and the eager path alike.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "eagle/eagle.hpp"
#include "test_util.hpp"
#include "testing_calls.hpp"
#include "testing_kernels.hpp"

namespace eagle {
namespace {

using test::CallCounts;
using test::CopyEntry;

class CallEntry : public test::OnDevice {
 protected:
  Array u32(uint32_t seed) const {
    std::vector<uint32_t> v(1000);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = seed * 7919u + static_cast<uint32_t>(i);
    return Array::from(v, {1000}, device());
  }
  static Graph copy_graph(const Kernel& k, const Array& x0) {
    return Graph::record([&](Recorder& r) { r.result(r.call(k, {r.param("x", x0)})); });
  }
};
EAGLE_ON_EVERY_DEVICE(CallEntry);

TEST_P(CallEntry, PopulatedCallIsUpdatedInPlaceOnBind) {
  auto counts = std::make_shared<CallCounts>();
  const Array x0 = u32(1), x1 = u32(2);
  {
    Graph g = copy_graph(test::copy_call_kernel(CopyEntry::populate, counts), x0);
    std::vector<std::string> warnings;
    g.set_warning_handler([&](const std::string& w) { warnings.push_back(w); });
    g.build(device());
    EXPECT_EQ(counts->handles_made, 1);  // one handle per library, owned by the executor
    void* exec = g.native_graph_exec();
    EXPECT_EQ(g()[0].to_vector<uint32_t>(), x0.to_vector<uint32_t>());
    EXPECT_EQ(counts->last_workspace_bytes, 256);
    g.bind("x", x1);
    EXPECT_EQ(g()[0].to_vector<uint32_t>(), x1.to_vector<uint32_t>());
    g.bind("x", x0);
    EXPECT_EQ(g()[0].to_vector<uint32_t>(), x0.to_vector<uint32_t>());
    EXPECT_EQ(g.rebuild_count(), 0);
    EXPECT_TRUE(warnings.empty());
    EXPECT_EQ(g.native_graph_exec(), exec);
    EXPECT_TRUE(counts->handle_seen);
    if (device().is_cuda()) {
      EXPECT_EQ(counts->populates, 1);  // its own nodes, once
      EXPECT_EQ(counts->updates, 2);    // then updated in place by each bind
      EXPECT_EQ(counts->runs, 0);       // never captured
    } else {
      EXPECT_EQ(counts->runs, 3);  // the host schedule runs the call at each launch
    }
    EXPECT_EQ(counts->handles_made, 1);
  }
  EXPECT_EQ(counts->handles_freed, 1);  // destroyed with the graph
}

// A library's graph with memset nodes (cuDNN's attention has one): on a GPU they run as kernel
// nodes writing the same bytes (BuildOptions::memsets_as_kernels, on by default), through
// build and bind; off, the graph keeps them. Either way the output is the copy with the memsets
// over it.
TEST_P(CallEntry, MemsetNodesOfAPopulatedGraphRunAsKernelsWritingTheSameBytes) {
  const Array x0 = u32(11), x1 = u32(12);
  auto expected = [](const Array& x) {
    std::vector<uint32_t> v = x.to_vector<uint32_t>();
    test::apply_copy_call_memsets(reinterpret_cast<unsigned char*>(v.data()));
    return v;
  };
  for (const bool as_kernels : {true, false}) {
    SCOPED_TRACE(as_kernels ? "memsets as kernels" : "memset nodes kept");
    auto counts = std::make_shared<CallCounts>();
    Graph g = copy_graph(test::copy_call_kernel(CopyEntry::populate_memsets, counts), x0);
    BuildOptions o;
    o.memsets_as_kernels = as_kernels;
    g.build(device(), o);
    EXPECT_EQ(g()[0].to_vector<uint32_t>(), expected(x0));
    g.bind("x", x1);
    EXPECT_EQ(g()[0].to_vector<uint32_t>(), expected(x1));
    EXPECT_EQ(g.rebuild_count(), 0);
    if (device().is_cuda()) {
      EXPECT_EQ(counts->populates, 1);
      EXPECT_EQ(counts->updates, 1);  // the call's own graph updated, the copy made again
      const int memsets = static_cast<int>(test::copy_call_memsets().size());
      EXPECT_EQ(test::memset_node_count(g.native_graph()), as_kernels ? 0 : memsets);
      const bool named = g.schedule().find(std::to_string(memsets) + " memsets run as kernels") !=
                         std::string::npos;
      EXPECT_EQ(named, as_kernels) << g.schedule();
    }
  }
}

TEST_P(CallEntry, CapturedCallIsCapturedAgainOnBind) {
  auto counts = std::make_shared<CallCounts>();
  const Array x0 = u32(3), x1 = u32(4);
  Graph g = copy_graph(test::copy_call_kernel(CopyEntry::capture, counts), x0);
  g.build(device());
  const int runs_at_build = counts->runs;
  EXPECT_EQ(runs_at_build, device().is_cuda() ? 1 : 0);
  EXPECT_EQ(g()[0].to_vector<uint32_t>(), x0.to_vector<uint32_t>());
  g.bind("x", x1);
  EXPECT_EQ(g()[0].to_vector<uint32_t>(), x1.to_vector<uint32_t>());
  EXPECT_EQ(g.rebuild_count(), 0);
  EXPECT_EQ(counts->last_workspace_bytes, 256);
  if (device().is_cuda()) {
    EXPECT_EQ(counts->runs, 2);  // captured again, not rebuilt
  }
}

TEST_P(CallEntry, ACallThatCannotBePatchedRebuildsWithOneWarning) {
  if (device().is_cpu()) GTEST_SKIP() << "the host schedule reads arguments at each launch";
  auto counts = std::make_shared<CallCounts>();
  const Array x0 = u32(5), x1 = u32(6);
  Graph g = copy_graph(test::copy_call_kernel(CopyEntry::populate_reshaped, counts), x0);
  std::vector<std::string> warnings;
  g.set_warning_handler([&](const std::string& w) { warnings.push_back(w); });
  g.build(device());
  EXPECT_EQ(g()[0].to_vector<uint32_t>(), x0.to_vector<uint32_t>());
  g.bind("x", x1);
  EXPECT_EQ(g()[0].to_vector<uint32_t>(), x1.to_vector<uint32_t>());
  g.bind("x", x0);
  EXPECT_EQ(g()[0].to_vector<uint32_t>(), x0.to_vector<uint32_t>());
  EXPECT_EQ(g.rebuild_count(), 2);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("cannot be patched"), std::string::npos) << warnings[0];
}

TEST_P(CallEntry, EagerLaunchOwnsTheSameContext) {
  auto counts = std::make_shared<CallCounts>();
  const Kernel k = test::copy_call_kernel(CopyEntry::populate, counts);
  const Stream stream(device());
  const ThreadTeam team(2);
  const Array x0 = u32(7), x1 = u32(8);
  const auto out0 = launch(k, {x0}, {}, stream, team);
  const auto out1 = launch(k, {x1}, {}, stream, team);
  stream.synchronize();
  EXPECT_EQ(out0[0].to_vector<uint32_t>(), x0.to_vector<uint32_t>());
  EXPECT_EQ(out1[0].to_vector<uint32_t>(), x1.to_vector<uint32_t>());
  EXPECT_EQ(counts->runs, 2);
  EXPECT_TRUE(counts->handle_seen);
  EXPECT_EQ(counts->last_workspace_bytes, 256);
  EXPECT_EQ(counts->handles_made, 1);  // kept by the stream, one per library
  const Stream other(device());
  launch(k, {x0}, {}, other, team);
  other.synchronize();
  EXPECT_EQ(counts->handles_made, 2);
}

TEST_P(CallEntry, ACapturedLibraryCallIsPatchedWithoutRebuilding) {
  const Array x0 = test::random_array({5000}, DType::f64, device());
  const Array x1 = test::random_array({5000}, DType::f64, device());
  Graph g =
      Graph::record([&](Recorder& r) { r.result(r.call(kernels::sum(), {r.param("x", x0)})); });
  std::vector<std::string> warnings;
  g.set_warning_handler([&](const std::string& w) { warnings.push_back(w); });
  g.build(device());
  auto total = [](const Array& a) {
    double s = 0;
    for (double v : a.to_vector<double>()) s += v;
    return s;
  };
  EXPECT_NEAR(g()[0].to_vector<double>()[0], total(x0), 1e-9);
  g.bind("x", x1);
  EXPECT_NEAR(g()[0].to_vector<double>()[0], total(x1), 1e-9);
  g.bind("x", x0);
  EXPECT_NEAR(g()[0].to_vector<double>()[0], total(x0), 1e-9);
  EXPECT_EQ(g.rebuild_count(), 0);
  EXPECT_TRUE(warnings.empty());
}

TEST_P(CallEntry, CallsInsideAWhileBodyArePatchedToo) {
  const Array x0 = test::random_array({3000}, DType::f64, device());
  const Array x1 = test::random_array({3000}, DType::f64, device());
  auto counts = std::make_shared<CallCounts>();
  const Array c0 = u32(9), c1 = u32(10);
  Graph g = Graph::record([&](Recorder& r) {
    const Value x = r.param("x", x0), c = r.param("c", c0);
    const Value remaining = r.empty({1}, DType::u32, "remaining");
    const Value going = r.empty({1}, DType::u32, "going");
    const Value total = r.empty({1}, DType::f64, "total");
    const Value copied = r.empty({1000}, DType::u32, "copied");
    r.call(kernels::fill(), {3.0}, buffer(remaining));
    r.call(kernels::fill(), {1.0}, buffer(going));
    r.while_(going, [&] {
      r.call(kernels::sum(), {x}, buffer(total));  // captured CUB: a child graph in the body
      r.call(test::copy_call_kernel(CopyEntry::populate, counts), {c}, buffer(copied));
      r.call_all(test::countdown_kernel(), {remaining}, buffer(going));
    });
    r.result({total, copied});
  });
  g.build(device());
  auto total = [](const Array& a) {
    double s = 0;
    for (double v : a.to_vector<double>()) s += v;
    return s;
  };
  const auto& r0 = g();
  EXPECT_NEAR(r0[0].to_vector<double>()[0], total(x0), 1e-9);
  EXPECT_EQ(r0[1].to_vector<uint32_t>(), c0.to_vector<uint32_t>());
  g.bind("x", x1);
  g.bind("c", c1);
  const auto& r1 = g();
  EXPECT_NEAR(r1[0].to_vector<double>()[0], total(x1), 1e-9);
  EXPECT_EQ(r1[1].to_vector<uint32_t>(), c1.to_vector<uint32_t>());
  EXPECT_EQ(g.rebuild_count(), 0);
}

}  // namespace
}  // namespace eagle
