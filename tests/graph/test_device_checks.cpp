// Device checks (Recorder::check): g() hands each check its flags after the wait and the check
// throws what the device found; the graph stays usable. Refusals name the rule.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "eagle/eagle.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using test::expect_invalid;

// flags = copy(p): a param decides what the device "finds".
Graph checked_graph(const Array& p0, std::vector<std::string>& order) {
  return Graph::record([&](Recorder& r) {
    const Value p = r.param("p", p0);
    const Value flags = r.call(kernels::copy(), {p});
    r.check(flags, [&order](const Array& f) {
      order.push_back("first");
      if (f.to_vector<uint32_t>()[0] != 0)
        throw InvalidArgument("device found " + std::to_string(f.to_vector<uint32_t>()[0]));
    });
    r.check(flags, [&order](const Array&) { order.push_back("second"); });
    r.result(r.call(kernels::copy(), {p}));
  });
}

TEST(DeviceChecks, GRunsEveryCheckInOrderAndTheFirstThatThrowsStopsIt) {
  std::vector<std::string> order;
  const Array ok = Array::from(std::vector<uint32_t>{0, 0}, {2}, Device::cpu());
  Graph g = checked_graph(ok, order);
  EXPECT_EQ(g.recording().checks().size(), 2u);
  g.build(Device::cpu());
  g();
  EXPECT_EQ(order, (std::vector<std::string>{"first", "second"}));
  order.clear();
  g.bind("p", Array::from(std::vector<uint32_t>{5, 0}, {2}, Device::cpu()));
  expect_invalid([&] { g(); }, "device found 5");
  EXPECT_EQ(order, (std::vector<std::string>{"first"}));
  // The graph still runs; launch() alone checks nothing.
  g.launch();
  g.synchronize();
  g.bind("p", ok);
  order.clear();
  EXPECT_EQ(g()[0].to_vector<uint32_t>(), (std::vector<uint32_t>{0, 0}));
  EXPECT_EQ(order.size(), 2u);
}

TEST(DeviceChecks, RefusalsNameTheRule) {
  const Array p0 = Array::from(std::vector<uint32_t>{0, 0}, {2}, Device::cpu());
  const Array cell = Array::from(std::vector<uint32_t>{1}, {1}, Device::cpu());
  auto nothing = [](const Array&) {};
  Graph::record([&](Recorder& r) {
    const Value p = r.param("p", p0);
    expect_invalid([&] { r.check(p, nothing); }, "not a param or external array");
    const Value flags = r.call(kernels::copy(), {p});
    expect_invalid([&] { r.check(flags, nullptr); }, "raise is empty");
    expect_invalid([&] { r.check(Value(), nothing); }, "Recorder::check: flags");
    const Value c = r.param("c", cell);
    r.if_(c, [&] { expect_invalid([&] { r.check(flags, nothing); }, "call it at the top level"); });
    r.check(flags, nothing);
    r.result(flags);
  });
}

}  // namespace
}  // namespace eagle
