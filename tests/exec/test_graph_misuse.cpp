// A Graph used the wrong way gets a typed error and stays usable: moved-from graphs, binds that
// would alias memory (before or after build), and launches from several threads at once.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "eagle/eagle.hpp"
#include "test_util.hpp"
#include "testing_kernels.hpp"

namespace eagle {
namespace {

using test::expect_throw_with;

Graph scale_graph(const Array& x0) {
  return Graph::record([&](Recorder& r) {
    r.result(r.call(kernels::scale(), {r.param("x", x0), 2.0}));
  });
}

TEST(GraphMisuse, AMovedFromGraphThrowsFromEveryMethod) {
  const Array x0 = test::random_array({8}, DType::f32, Device::cpu());
  Graph g = scale_graph(x0);
  Graph moved = std::move(g);
  const char* rule = "moved from";
  expect_throw_with<InvalidArgument>([&] { g.build(Device::cpu()); }, {"Graph::build", rule});
  expect_throw_with<InvalidArgument>([&] { g.build(); }, {"Graph::build", rule});
  expect_throw_with<InvalidArgument>([&] { g(); }, {rule});
  expect_throw_with<InvalidArgument>([&] { g.launch(1); }, {"Graph::launch", rule});
  expect_throw_with<InvalidArgument>([&] { g.synchronize(); }, {rule});
  expect_throw_with<InvalidArgument>([&] { g.bind("x", x0); }, {"Graph::bind", rule});
  expect_throw_with<InvalidArgument>([&] { (void)g.nodes(); }, {rule});
  expect_throw_with<InvalidArgument>([&] { (void)g.built(); }, {rule});
  expect_throw_with<InvalidArgument>([&] { (void)g.backend(); }, {rule});
  expect_throw_with<InvalidArgument>([&] { (void)g.to_json(); }, {rule});
  // The graph it moved into works.
  moved.build(Device::cpu());
  const auto want = x0.to_vector<float>();
  const auto got = moved()[0].to_vector<float>();
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], 2 * want[i]);
  // Move assignment over a built graph stops the old one first.
  g = std::move(moved);
  EXPECT_TRUE(g.built());
  EXPECT_EQ(g()[0].to_vector<float>(), got);
}

TEST(GraphMisuse, BindBeforeBuildChecksOverlapsAsBindAfterBuildDoes) {
  const Array buf = test::random_array({32}, DType::f32, Device::cpu());
  const Array x0 = buf.slice(0, 0, 8), y0 = buf.slice(0, 16, 24);
  Graph g = Graph::record([&](Recorder& r) {
    r.result(r.call(kernels::add(), {r.param("x", x0), r.param("y", y0)}));
  });
  const Array onto_y = buf.slice(0, 12, 20);  // overlaps y's memory
  expect_throw_with<InvalidArgument>([&] { g.bind("x", onto_y); },
                                     {"Graph::bind('x')", "overlaps", "'y'"});
  // Unchanged: the build takes the recorded x and runs.
  g.build(Device::cpu());
  const auto x = x0.to_vector<float>(), y = y0.to_vector<float>();
  auto got = g()[0].to_vector<float>();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], x[i] + y[i]);
  // The same refusal after build, with the same words.
  expect_throw_with<InvalidArgument>([&] { g.bind("x", onto_y); },
                                     {"Graph::bind('x')", "overlaps", "'y'"});
  got = g()[0].to_vector<float>();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], x[i] + y[i]);
  // A disjoint array binds before build too.
  Graph h = Graph::record([&](Recorder& r) {
    r.result(r.call(kernels::add(), {r.param("x", x0), r.param("y", y0)}));
  });
  const Array x1 = buf.slice(0, 24, 32);
  h.bind("x", x1);
  h.build(Device::cpu());
  got = h()[0].to_vector<float>();
  const auto x1h = x1.to_vector<float>();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], x1h[i] + y[i]);
  expect_throw_with<InvalidArgument>([&] { h.bind("nope", x1); },
                                     {"no param named 'nope'", "x, y"});
  expect_throw_with<InvalidArgument>([&] { h.bind("x", Array()); }, {"undefined"});
}

class GraphThreads : public test::OnDevice {};
EAGLE_ON_EVERY_DEVICE(GraphThreads);

// Two threads launching one graph: launches are serialized, so no update is lost.
TEST_P(GraphThreads, ConcurrentLaunchesOfOneGraphAreSerialized) {
  const Array counter = Array::from(std::vector<uint32_t>{0}, {1}, device());
  Graph g = Graph::record([&](Recorder& r) {
    Value c = r.external(counter, "counter");
    r.call(test::count_kernel(), {c});
    r.result(c);
  });
  g.build(device());
  const int per_thread = device().is_cuda() ? 2000 : 20000;
  auto work = [&] {
    for (int k = 0; k < per_thread; ++k) {
      if (k % 2) {
        g();
      } else {
        g.launch(1);
      }
    }
    g.synchronize();
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  EXPECT_EQ(counter.to_vector<uint32_t>()[0], static_cast<uint32_t>(2 * per_thread));
}

}  // namespace
}  // namespace eagle
