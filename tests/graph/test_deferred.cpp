// Recorder::call_deferred: a call recorded right before the first call that depends on it, before
// a device construct opens, at the end of the recording, or never when take_deferred takes it
// over; what the graph computes is the same as with the call recorded where it was made.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "eagle/eagle.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using test::expect_invalid;

struct Tag : Recorder::DeferredTag {
  explicit Tag(int v) : value(v) {}
  int value;
};

// The position of the first node calling `kernel` (nodes in recorded order), or -1.
int position(const Graph& g, const std::string& kernel) {
  const auto& n = g.nodes();
  const auto it =
      std::find_if(n.begin(), n.end(), [&](const NodeInfo& x) { return x.kernel == kernel; });
  return it == n.end() ? -1 : static_cast<int>(it - n.begin());
}

Array vec(std::vector<double> v) {
  return Array::from(v, {static_cast<int64_t>(v.size())}, Device::cpu());
}

TEST(Deferred, RecordedRightBeforeTheFirstCallReadingWhatItWrites) {
  Graph g = Graph::record([&](Recorder& r) {
    const Value x = r.param("x", vec({1, 2, 3}));
    const Value y = r.param("y", vec({10, 20, 30}));
    const Value twice = r.call_deferred(kernels::add(), {x, x}, nullptr).front();
    const Value other = r.call(kernels::add(), {y, y});  // independent: the add stays deferred
    EXPECT_EQ(r.recording().nodes().size(), 1u);
    const Value sum = r.call(kernels::add(), {twice, other});  // reads it: recorded first
    EXPECT_EQ(r.recording().nodes().size(), 3u);
    r.result(sum);
  });
  ASSERT_EQ(g.nodes().size(), 3u);
  g.build(Device::cpu());
  EXPECT_EQ(g().front().to_vector<double>(), (std::vector<double>{22, 44, 66}));
}

TEST(Deferred, RecordedAtTheEndWhenNothingReadsItAndBeforeAWriteOfWhatItReads) {
  Graph g = Graph::record([&](Recorder& r) {
    const Value x = r.param("x", vec({1, 2}));
    Value acc = r.empty({2}, DType::f64, "acc");
    r.call(kernels::copy(), {x}, buffer(acc));
    const Value before = r.call_deferred(kernels::add(), {acc, acc}, nullptr).front();
    r.call(kernels::fill(), {7.0}, buffer(acc));  // overwrites what the deferred add reads
    r.result({before, acc});
  });
  EXPECT_LT(position(g, "add"), position(g, "fill"));
  g.build(Device::cpu());
  const std::vector<Array> out = g();
  EXPECT_EQ(out[0].to_vector<double>(), (std::vector<double>{2, 4}));  // the old contents
  EXPECT_EQ(out[1].to_vector<double>(), (std::vector<double>{7, 7}));

  Graph end = Graph::record([&](Recorder& r) {
    const Value x = r.param("x", vec({1, 2}));
    r.result(r.call_deferred(kernels::add(), {x, x}, nullptr));
  });
  EXPECT_EQ(end.nodes().size(), 1u);
  end.build(Device::cpu());
  EXPECT_EQ(end().front().to_vector<double>(), (std::vector<double>{2, 4}));
}

TEST(Deferred, TakenOverItIsNeverRecorded) {
  Graph g = Graph::record([&](Recorder& r) {
    const Value x = r.param("x", vec({1, 2}));
    const Value y = r.call_deferred(kernels::add(), {x, x}, std::make_shared<Tag>(5)).front();
    const auto* tag = dynamic_cast<const Tag*>(r.deferred_tag(y));
    ASSERT_NE(tag, nullptr);
    EXPECT_EQ(tag->value, 5);
    EXPECT_EQ(r.deferred_tag(y.reshape({1, 2})), tag);  // the whole array, any shape
    EXPECT_EQ(r.deferred_tag(y.slice(0, 1)), nullptr);  // part of it: no
    const std::vector<Arg> args = r.take_deferred(y);
    ASSERT_EQ(args.size(), 2u);
    EXPECT_EQ(r.deferred_tag(y), nullptr);
    expect_invalid([&] { r.take_deferred(y); }, "no deferred call waits");
    // What the taker records instead: x * 2 by another kernel.
    r.result(r.call(kernels::scale(), {std::get<Value>(args[0].get()), 2.0}));
  });
  EXPECT_EQ(position(g, "add"), -1);
  g.build(Device::cpu());
  EXPECT_EQ(g().front().to_vector<double>(), (std::vector<double>{2, 4}));
}

TEST(Deferred, RecordedBeforeADeviceConstructOpens) {
  const Array flag = Array::from(std::vector<uint32_t>{1}, {1}, Device::cpu());
  Graph g = Graph::record([&](Recorder& r) {
    const Value x = r.param("x", vec({1, 2}));
    const Value y = r.call_deferred(kernels::add(), {x, x}, nullptr).front();
    Value out = r.empty({2}, DType::f64, "out");
    r.if_(r.param("flag", flag), [&] { r.call(kernels::fill(), {1.0}, buffer(out)); });
    r.result({y, out});
  });
  EXPECT_LT(position(g, "add"), position(g, "if"));
  // at the top level, not inside the arm
  EXPECT_EQ(g.nodes()[static_cast<std::size_t>(position(g, "add"))].parent, -1);
}

// Deferred inside a fork branch or a loop body, it is recorded there, before the branch or body
// closes: a deferred call never leaves the arm it was made in.
TEST(Deferred, RecordedInsideTheBranchAndTheBodyItWasMadeIn) {
  Graph g = Graph::record([&](Recorder& r) {
    const Value x = r.param("x", vec({1, 2}));
    Value a = r.empty({2}, DType::f64, "a"), b = r.empty({2}, DType::f64, "b");
    r.parallel({[&](Branch&) {
                  r.call_deferred(kernels::add(), {x, x}, nullptr);
                },
                [&](Branch&) { r.call(kernels::copy(), {x}, buffer(b)); }});
    r.call(kernels::fill(), {0.0}, buffer(a));
    r.for_(3, [&] { r.call_deferred(kernels::axpy(), {a, a, 1.0}, nullptr); });
    r.result({a, b});
  });
  int adds = 0, axpys = 0;
  for (const NodeInfo& n : g.nodes()) {
    if (n.kernel == "add") {
      ++adds;
      EXPECT_NE(n.parent, -1);  // inside the fork's branch
    }
    if (n.kernel == "axpy") {
      ++axpys;
      EXPECT_NE(n.parent, -1);  // inside the loop's body
    }
  }
  EXPECT_EQ(adds, 1);
  EXPECT_EQ(axpys, 1);
  g.build(Device::cpu());
  EXPECT_EQ(g()[1].to_vector<double>(), (std::vector<double>{1, 2}));
}

TEST(Deferred, ARolledBackCallLeavesItDeferred) {
  Graph g = Graph::record([&](Recorder& r) {
    const Value x = r.param("x", vec({1, 2}));
    const Value y = r.call_deferred(kernels::add(), {x, x}, std::make_shared<Tag>(1)).front();
    EXPECT_THROW(r.atomically([&] {
      r.call(kernels::add(), {y, y});    // records the deferred add first...
      throw InvalidArgument("refused");  // ...and is rolled back with it
    }),
                 InvalidArgument);
    EXPECT_TRUE(r.recording().nodes().empty());
    EXPECT_NE(r.deferred_tag(y), nullptr);
    r.result(y);
  });
  g.build(Device::cpu());
  EXPECT_EQ(g().front().to_vector<double>(), (std::vector<double>{2, 4}));
}

}  // namespace
}  // namespace eagle
