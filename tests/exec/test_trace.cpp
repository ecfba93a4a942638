// Scopes on recorded nodes and traces of replays (CPU host schedule), as trace-event JSON.
#include "test_util.hpp"

namespace eagle {
namespace {

Graph scoped_graph(const Array& x0) {
  return Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0), y, z;
    {
      auto block = r.scope("block0");
      {
        auto attention = r.scope("attention");
        y = r.call(kernels::scale(), {x, 2.0});
      }
      z = r.call(kernels::add(), {y, y});
    }
    r.result(r.call(kernels::sum(), {z}));
  });
}

TEST(Scopes, NameTheNodesRecordedInsideThem) {
  const Array x0 = test::random_array({16}, DType::f32, Device::cpu());
  Graph g = scoped_graph(x0);
  std::vector<std::string> scopes;
  for (const NodeInfo& n : g.nodes()) scopes.push_back(n.scope);
  EXPECT_EQ(scopes, (std::vector<std::string>{"block0/attention", "block0", ""}));
  EXPECT_NE(g.to_json().find("\"scope\": \"block0/attention\""), std::string::npos);
}

TEST(Scopes, RefuseANameWithASlash) {
  Graph::record([](Recorder& r) {
    test::expect_invalid([&] { auto s = r.scope("a/b"); }, {"scope name", "'a/b'"});
    test::expect_invalid([&] { auto s = r.scope(""); }, {"non-empty"});
    r.result(r.call(kernels::fill(), {1.0}, buffer(r.empty({1}, DType::f32))));
  });
}

TEST(Trace, TimesEveryNodeOfEveryLaunchOnTheCpu) {
  const Array x0 = test::random_array({1024}, DType::f32, Device::cpu());
  Graph g = scoped_graph(x0);
  test::expect_invalid([&] { g.set_tracing(true); }, {"build the graph first"});
  g.build(Device::cpu());
  g();  // not traced
  g.set_tracing(true);
  g(3);
  const std::vector<TraceEvent> events = g.trace();
  ASSERT_EQ(events.size(), 3 * g.nodes().size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    EXPECT_EQ(e.launch, static_cast<int64_t>(i / g.nodes().size()));
    EXPECT_EQ(e.node, static_cast<int>(i % g.nodes().size()));  // a chain runs in order
    EXPECT_LE(e.begin_ns, e.end_ns);
    if (i > 0) {
      EXPECT_GE(e.begin_ns, events[i - 1].end_ns);
    }
    EXPECT_EQ(e.scope, g.nodes()[static_cast<std::size_t>(e.node)].scope);
    EXPECT_EQ(e.kernel, g.nodes()[static_cast<std::size_t>(e.node)].kernel);
  }
  const std::string json = chrome_trace_json(events, "step");
  EXPECT_EQ(json.rfind("{\"traceEvents\": [", 0), 0u);
  EXPECT_NE(json.find("\"scope\": \"block0/attention\""), std::string::npos);
  EXPECT_NE(json.find("\"ph\": \"X\""), std::string::npos);
  EXPECT_NE(json.find("\"pid\": \"step\""), std::string::npos);
  g.clear_trace();
  EXPECT_TRUE(g.trace().empty());
  g.set_tracing(false);
  g();
  EXPECT_TRUE(g.trace().empty());
  test::expect_invalid([&] { write_chrome_trace("/nonexistent/dir/t.json", events); },
                       {"cannot write", "/nonexistent/dir/t.json"});
}

TEST(Trace, IsRefusedOnAGpuForNow) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Array x0 = test::random_array({16}, DType::f32, Device::cuda(0));
  Graph g = scoped_graph(x0);
  g.build(Device::cuda(0));
  test::expect_throw_with<NotSupported>([&] { g.set_tracing(true); }, {"CUPTI"});
  EXPECT_TRUE(g.trace().empty());
  g();  // still runs
}

}  // namespace
}  // namespace eagle
