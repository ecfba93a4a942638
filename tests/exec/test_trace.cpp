// Scopes on recorded nodes and traces of replays, as trace-event JSON: the CPU host schedule's
// timers, and on a GPU CUPTI's activity records placed on the recorded nodes.
#include <cctype>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "exec/cupti_library.hpp"
#include "test_util.hpp"
#include "testing_engines.hpp"

namespace eagle {
namespace {

// A JSON syntax check (RFC 8259's grammar, no semantics): enough to say a trace file parses.
class JsonSyntax {
 public:
  static bool valid(std::string_view text) {
    JsonSyntax p{text};
    return p.value() && (p.space(), p.at_ == text.size());
  }

 private:
  explicit JsonSyntax(std::string_view t) : t_(t) {}
  void space() {
    while (at_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[at_]))) ++at_;
  }
  bool eat(char c) {
    space();
    if (at_ < t_.size() && t_[at_] == c) return ++at_, true;
    return false;
  }
  bool string() {
    if (!eat('"')) return false;
    while (at_ < t_.size() && t_[at_] != '"') {
      if (static_cast<unsigned char>(t_[at_]) < 0x20) return false;
      at_ += t_[at_] == '\\' ? 2 : 1;
    }
    return at_++ < t_.size();
  }
  bool number() {
    const std::size_t start = at_;
    while (at_ < t_.size() && (std::isdigit(static_cast<unsigned char>(t_[at_])) ||
                               std::string_view("+-.eE").find(t_[at_]) != std::string_view::npos))
      ++at_;
    return at_ > start;
  }
  bool word(std::string_view w) {
    if (t_.substr(at_, w.size()) != w) return false;
    return at_ += w.size(), true;
  }
  template <class Item>
  bool list(char close, Item item) {
    if (eat(close)) return true;
    do {
      if (!item()) return false;
    } while (eat(','));
    return eat(close);
  }
  bool value() {
    space();
    if (at_ >= t_.size()) return false;
    switch (t_[at_]) {
      case '{':
        ++at_;
        return list('}', [&] { return (space(), string()) && eat(':') && value(); });
      case '[':
        ++at_;
        return list(']', [&] { return value(); });
      case '"':
        return string();
      case 't':
        return word("true");
      case 'f':
        return word("false");
      case 'n':
        return word("null");
      default:
        return number();
    }
  }
  std::string_view t_;
  std::size_t at_ = 0;
};

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
  EXPECT_TRUE(JsonSyntax::valid(json)) << json;
  EXPECT_FALSE(JsonSyntax::valid(json.substr(0, json.size() - 3)));
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

// ---- GPU: CUPTI's records (exec/cuda/cupti_tracer.hpp). These need a GPU and CUPTI.

#define EAGLE_NEEDS_GPU_AND_CUPTI()                                      \
  do {                                                                   \
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";             \
    if (!detail::cupti_library().loaded) GTEST_SKIP() << cupti_status(); \
  } while (0)

// Every event on a recorded node carries that node's label, scope and kernel, and the CUDA
// kernel that ran; its times are CUPTI's and in order.
void expect_events_of(const Graph& g, const std::vector<TraceEvent>& events) {
  for (const TraceEvent& e : events) {
    ASSERT_GE(e.node, 0) << "a record on no node: " << e.device_kernel;
    ASSERT_LT(e.node, static_cast<int>(g.nodes().size()));
    const NodeInfo& n = g.nodes()[static_cast<std::size_t>(e.node)];
    EXPECT_EQ(e.label, n.label);
    EXPECT_EQ(e.scope, n.scope);
    EXPECT_EQ(e.kernel, n.kernel);
    EXPECT_FALSE(e.device_kernel.empty());
    EXPECT_LT(e.begin_ns, e.end_ns) << e.label << " " << e.device_kernel;
  }
}

// Which (node, launch) pairs have at least one event.
std::set<std::pair<int, int64_t>> node_launches(const std::vector<TraceEvent>& events) {
  std::set<std::pair<int, int64_t>> out;
  for (const TraceEvent& e : events) out.insert({e.node, e.launch});
  return out;
}

std::set<std::pair<int, int64_t>> every_node(const Graph& g, std::vector<int64_t> launches) {
  std::set<std::pair<int, int64_t>> out;
  for (int64_t l : launches)
    for (std::size_t i = 0; i < g.nodes().size(); ++i) out.insert({static_cast<int>(i), l});
  return out;
}

TEST(Trace, PlacesCuptisRecordsOnTheLabelledNodesOfAGpuGraph) {
  EAGLE_NEEDS_GPU_AND_CUPTI();
  std::cout << cupti_status() << "\n";
  const Array x0 = test::random_array({1 << 16}, DType::f32, Device::cuda(0));
  Graph g = scoped_graph(x0);
  g.build(Device::cuda(0));
  g();  // not traced
  g.set_tracing(true);
  g(2);
  std::vector<TraceEvent> events = g.trace();
  expect_events_of(g, events);
  EXPECT_EQ(node_launches(events), every_node(g, {0, 1}));
  const std::string json = chrome_trace_json(events, "gpu step");
  EXPECT_TRUE(JsonSyntax::valid(json)) << json;
  EXPECT_NE(json.find("\"scope\": \"block0/attention\""), std::string::npos);
  EXPECT_NE(json.find("\"device_kernel\": "), std::string::npos);

  // Cleared, then traced on: launches keep counting from where tracing began.
  g.clear_trace();
  EXPECT_TRUE(g.trace().empty());
  g();
  events = g.trace();
  expect_events_of(g, events);
  EXPECT_EQ(node_launches(events), every_node(g, {2}));

  // A rebuild keeps tracing on (the new CUDA graph is mapped as it is instantiated).
  g.clear_trace();
  g.build(Device::cuda(0));
  g();
  events = g.trace();
  expect_events_of(g, events);
  EXPECT_EQ(node_launches(events), every_node(g, {3}));

  g.set_tracing(false);
  g();
  EXPECT_TRUE(g.trace().empty());
}

// Two graphs traced at once share CUPTI's session: each sees its own nodes only; the second's
// tracing starts after the first's graph was instantiated (its graph is made again).
TEST(Trace, TwoGpuGraphsTracedAtOnceEachSeeTheirOwnRecords) {
  EAGLE_NEEDS_GPU_AND_CUPTI();
  const Array x0 = test::random_array({4096}, DType::f32, Device::cuda(0));
  Graph a = scoped_graph(x0), b = scoped_graph(x0);
  a.build(Device::cuda(0));
  b.build(Device::cuda(0));
  a.set_tracing(true);
  b.set_tracing(true);
  a(2);
  b();
  EXPECT_EQ(node_launches(a.trace()), every_node(a, {0, 1}));
  EXPECT_EQ(node_launches(b.trace()), every_node(b, {0}));
  a.set_tracing(false);  // b's session stays
  b();
  EXPECT_EQ(node_launches(b.trace()), every_node(b, {0, 1}));
}

// A planned identity over n f32 whose engine populates a child graph: one memcpy node inside
// (with `nesting`, a memset, a child graph holding the memcpy, a memset).
Kernel populating_identity(int64_t n = 300, bool nesting = false) {
  op::Graph og("identity");
  const op::Tensor x = og.tensor({"x", {n}, DType::f32});
  og.pointwise("identity", x).set_output(true).set_name("y");
  return engines::planned_kernel(
      og, {plan::HeurMode::A},
      nesting ? test::nesting_populating_manifest() : test::populating_manifest());
}

// A planned operation whose engine populates a child graph (a memcpy node inside it): the record
// of the node inside the child graph is placed on the planned op's recorded node.
TEST(Trace, PlacesTheRecordsInsideAPlannedOpsChildGraphOnItsNode) {
  EAGLE_NEEDS_GPU_AND_CUPTI();
  const Kernel k = populating_identity();
  const Array x0 = test::random_array({300}, DType::f32, Device::cuda(0));
  Graph g = Graph::record([&](Recorder& r) {
    auto s = r.scope("planned");
    r.result(r.call(k, {r.param("x", x0)}, {{}, "identity_op"}));
  });
  g.build(Device::cuda(0));
  ASSERT_NE(g.schedule().find("1 child graphs"), std::string::npos) << g.schedule();
  g.set_tracing(true);
  g(2);
  const std::vector<TraceEvent> events = g.trace();
  expect_events_of(g, events);
  ASSERT_EQ(events.size(), 2u);  // the child graph's one memcpy, per launch
  for (const TraceEvent& e : events) {
    EXPECT_EQ(e.label, "identity_op");
    EXPECT_EQ(e.scope, "planned");
    EXPECT_EQ(e.device_kernel, "memcpy");
  }
  EXPECT_EQ(node_launches(events), every_node(g, {0, 1}));
}

// Two calls of that planned operation in a chain: both child graphs hold a memcpy, so the name
// does not tell the node; the second call reads the first's result, so within each launch the
// earlier memcpy is the first call's (exec/trace_placement.hpp).
TEST(Trace, PlacesWorkThatTwoChainedChildGraphsShareByItsOrder) {
  EAGLE_NEEDS_GPU_AND_CUPTI();
  const Kernel k = populating_identity();
  const Array x0 = test::random_array({300}, DType::f32, Device::cuda(0));
  Graph g = Graph::record([&](Recorder& r) {
    const Value y = r.call(k, {r.param("x", x0)}, {{}, "first"});
    r.result(r.call(k, {y}, {{}, "second"}));
  });
  g.build(Device::cuda(0));
  g.set_tracing(true);
  g(3);
  const std::vector<TraceEvent> events = g.trace();
  expect_events_of(g, events);
  ASSERT_EQ(events.size(), 6u);  // one memcpy per call per launch
  EXPECT_EQ(node_launches(events), every_node(g, {0, 1, 2}));
  for (const TraceEvent& e : events) {
    if (e.label != "second") continue;
    for (const TraceEvent& f : events)  // the same launch's first call ended before it began
      if (f.label == "first" && f.launch == e.launch) {
        EXPECT_LE(f.end_ns, e.begin_ns);
      }
  }
}

// Three calls of a planned identity side by side: 1.2 KB, 64 MiB, 1.2 KB. Their child graphs
// run the same work, in any order, so neither the names nor the order tells them apart; the ids
// CUDA gives the flattened nodes do (CuptiTracer::predict_flattened). The big call's memcpy is
// the long one of each launch. With `nesting`, each copy sits in a child graph of its own
// between two memsets (as cuDNN's graph sits in the cuDNN engine's).
void places_parallel_child_graphs(bool nesting) {
  constexpr int64_t kSmall = 300, kBig = int64_t{16} << 20;
  const Kernel small = populating_identity(kSmall, nesting);
  const Kernel big = populating_identity(kBig, nesting);
  const Array x_small = test::random_array({kSmall}, DType::f32, Device::cuda(0));
  const Array x_big = test::random_array({kBig}, DType::f32, Device::cuda(0));
  Graph g = Graph::record([&](Recorder& r) {
    const Value xs = r.param("xs", x_small), xb = r.param("xb", x_big);
    r.result({r.call(small, {xs}, {{}, "small_a"}), r.call(big, {xb}, {{}, "big"}),
              r.call(small, {xs}, {{}, "small_b"})});
  });
  g.build(Device::cuda(0));
  g.set_tracing(true);
  g(3);
  const std::vector<TraceEvent> events = g.trace();
  expect_events_of(g, events);
  const std::size_t per_call = nesting ? 3 : 1;  // memset, memcpy, memset
  ASSERT_EQ(events.size(), 9 * per_call);        // three calls, three launches
  EXPECT_EQ(node_launches(events), every_node(g, {0, 1, 2}));
  std::map<std::string, int> records_of;
  for (const TraceEvent& e : events) {
    ASSERT_GE(e.node, 0) << e.device_kernel;
    ++records_of[e.label + " " + e.device_kernel];
    if (e.label != "big" || e.device_kernel != "memcpy") continue;
    for (const TraceEvent& f : events)  // 64 MiB take far longer than 1.2 KB
      if (f.label != "big" && f.device_kernel == "memcpy" && f.launch == e.launch) {
        EXPECT_GT(e.end_ns - e.begin_ns, 4 * (f.end_ns - f.begin_ns)) << f.label;
      }
  }
  for (const char* label : {"small_a", "big", "small_b"}) {
    EXPECT_EQ(records_of[std::string(label) + " memcpy"], 3) << label;
    EXPECT_EQ(records_of[std::string(label) + " memset"], nesting ? 6 : 0) << label;
  }
}

TEST(Trace, PlacesTheWorkOfParallelChildGraphsByTheIdsTheirNodesTake) {
  EAGLE_NEEDS_GPU_AND_CUPTI();
  places_parallel_child_graphs(false);
}

TEST(Trace, PlacesTheWorkOfNestedChildGraphsByTheIdsTheirNodesTake) {
  EAGLE_NEEDS_GPU_AND_CUPTI();
  places_parallel_child_graphs(true);
}

TEST(Trace, OnAGpuWithoutCuptiIsRefusedWithTheReason) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  test::EnvGuard env("EAGLE_CUPTI_LIBRARY");
  env.set("/nonexistent/libcupti.so.13");
  const Array x0 = test::random_array({16}, DType::f32, Device::cuda(0));
  Graph g = scoped_graph(x0);
  g.build(Device::cuda(0));
  test::expect_throw_with<NotSupported>([&] { g.set_tracing(true); },
                                        {"CUPTI", "EAGLE_CUPTI_LIBRARY=/nonexistent"});
  EXPECT_TRUE(g.trace().empty());
  g();  // still runs
}

}  // namespace
}  // namespace eagle
