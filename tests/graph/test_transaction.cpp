// Every refusal leaves the recording exactly as it was before the call, inside arms and bodies
// too: a caller that catches the error goes on recording a correct graph.
#include <gtest/gtest.h>

#include <stdexcept>

#include "eagle/eagle.hpp"
#include "test_util.hpp"
#include "testing_kernels.hpp"

namespace eagle {
namespace {

using test::expect_throw_with;

Array host_f32(const Shape& shape) {
  return test::random_array(shape, DType::f32, Device::cpu());
}

TEST(Transaction, AWhileWhoseBodyNeverWritesItsCellIsNotLeftBehind) {
  const Array x0 = host_f32({32});
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    Value going = r.empty({1}, DType::u32, "going");
    r.call(kernels::fill(), {1.0}, buffer(going));
    Value y = r.call(kernels::scale(), {x, 2.0});
    expect_throw_with<RecordError>(
        [&] { r.while_(going, [&] {
                r.call(kernels::scale(), {y, 3.0});
              }); },
        {"never writes its cell"});
    r.result(r.call(kernels::scale(), {y, 0.5}));
  });
  // Only the three calls outside the refused loop: no while node, no body node.
  ASSERT_EQ(g.nodes().size(), 3u);
  for (const NodeInfo& n : g.nodes()) EXPECT_EQ(n.kind, NodeKind::kernel);
  g.build(Device::cpu());
  EXPECT_EQ(g()[0].to_vector<float>(), x0.to_vector<float>());  // 2x * 0.5: and no hang
}

TEST(Transaction, ARacingForkIsNotLeftBehind) {
  const Array x0 = host_f32({16});
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    Value t = r.empty({16}, DType::f32, "t");
    r.call(kernels::copy(), {x}, buffer(t));
    expect_throw_with<RecordError>(
        [&] {
          r.parallel({[&](Branch&) {
                        r.call(kernels::scale(), {x, 2.0}, buffer(t));
                      },
                      [&](Branch&) {
                        r.call(kernels::scale(), {t, 3.0});
                      }});
        },
        {"race refused"});
    r.result(r.call(kernels::scale(), {t, 1.0}));
  });
  ASSERT_EQ(g.nodes().size(), 2u);
  for (const NodeInfo& n : g.nodes()) EXPECT_NE(n.kind, NodeKind::fork);
  EXPECT_EQ(g.recording().buffers().size(), 3u);  // x, t, and the result: nothing from the fork
  g.build(Device::cpu());
  EXPECT_EQ(g()[0].to_vector<float>(), x0.to_vector<float>());
}

TEST(Transaction, AMergeRefusedHalfwayIsUndone) {
  const Array y0 = host_f32({16});
  const Array c0 = Array::from(std::vector<uint32_t>{1}, {1}, Device::cpu());
  Graph g = Graph::record([&](Recorder& r) {
    Value y = r.call(kernels::copy(), {r.param("y", y0)});
    Value h = y.slice(0, 8);  // made outside the arm
    r.if_(r.param("c", c0), [&] {
      Value z = r.call(kernels::add(), {y.slice(4, 12), h});
      // Merging z into h's bytes rewrites the add node, whose input y[4:12] then overlaps its
      // output y[0:8]: a race found halfway through the merge. Everything is undone...
      expect_throw_with<RecordError>([&] { h = z; }, {"race refused"});
      // ...so the arm goes on with z in its own array, and writes h explicitly.
      r.call(kernels::copy(), {z}, buffer(h));
    });
    r.result(y);
  });
  for (const BufferInfo& b : g.recording().buffers()) EXPECT_EQ(b.merged_into, -1) << b.label;
  g.build(Device::cpu());
  const auto got = g()[0].to_vector<float>();
  const auto y = y0.to_vector<float>();
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(got[i], y[i + 4] + y[i]) << i;
  for (int i = 8; i < 16; ++i) EXPECT_FLOAT_EQ(got[i], y[i]) << i;
}

TEST(Transaction, ARefusedCallChangesNothingAndItsValuesAreDead) {
  Graph g = Graph::record([&](Recorder& r) {
    Value a = r.empty({8}, DType::f32, "a");
    r.call(kernels::fill(), {1.0}, buffer(a));
    // A kernel whose select declines after infer ran: nothing recorded.
    expect_throw_with<NotSupported>(
        [&] {
          r.call(kernels::add(), {r.empty({8}, DType::boolean), r.empty({8}, DType::boolean)});
        },
        {"kernel add"});
    // A race refused after its output buffer was made: the buffer goes too.
    expect_throw_with<RecordError>([&] { r.call(kernels::sum(), {a}, buffer(a.slice(0, 1))); },
                                   {"race refused"});
    r.result(a);
  });
  // The fill alone, and the arrays made by calls that succeeded (a and the two bool arrays).
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].kernel, "fill");
  EXPECT_EQ(g.recording().buffers().size(), 3u);
}

TEST(Transaction, AnExceptionFromTheCallersArmUndoesTheConstruct) {
  const Array c0 = Array::from(std::vector<uint32_t>{1}, {1}, Device::cpu());
  Value made_inside;
  Graph g = Graph::record([&](Recorder& r) {
    Value cell = r.param("c", c0);
    Value a = r.empty({4}, DType::f32, "a");
    r.call(kernels::fill(), {2.0}, buffer(a));
    EXPECT_THROW(r.if_(cell,
                       [&] {
                         made_inside = r.call(kernels::scale(), {a, 5.0});
                         throw std::runtime_error("the caller's own error");
                       }),
                 std::runtime_error);
    // The value the undone arm made holds nothing: using it is an error, not an alias.
    expect_throw_with<InvalidArgument>([&] { r.call(kernels::copy(), {made_inside}); },
                                       {"refused and rolled back"});
    r.result(r.call(kernels::scale(), {a, 1.0}));
  });
  ASSERT_EQ(g.nodes().size(), 2u);
  g.build(Device::cpu());
  EXPECT_EQ(g()[0].to_vector<float>(), (std::vector<float>{2, 2, 2, 2}));
}

TEST(Transaction, ARefusalInsideABodyLeavesTheBodyAsItWas) {
  Graph g = Graph::record([&](Recorder& r) {
    Value n = r.empty({1}, DType::u32, "n");
    Value acc = r.empty({4}, DType::f32, "acc");
    r.call(kernels::fill(), {0.0}, buffer(acc));
    r.for_(3, [&] {
      r.call(kernels::axpy(), {acc, acc, 1.0}, buffer(acc));  // acc = 2 acc... then:
      expect_throw_with<RecordError>(
          [&] { r.call(kernels::sum(), {acc}, buffer(acc.slice(0, 1))); }, {"race refused"});
      r.call(kernels::fill(), {1.0}, buffer(n));  // the body goes on recording
      r.call(kernels::add(),
             {acc, r.call(kernels::fill(), {1.0}, buffer(r.empty({4}, DType::f32)))}, buffer(acc));
    });
    r.result(acc);
  });
  g.build(Device::cpu());
  // acc: 0 -> 2*0+1 = 1 -> 2*1+1 = 3 -> 7.
  EXPECT_EQ(g()[0].to_vector<float>(), (std::vector<float>{7, 7, 7, 7}));
}

TEST(Transaction, AFailedBuilderBodyLeavesNothingHalfRecorded) {
  // A refusal the caller does not catch fails the whole recording, as before.
  expect_throw_with<RecordError>(
      [&] {
        Graph::record([&](Recorder& r) {
          Value cell = r.empty({1}, DType::u32, "c");
          r.call(kernels::fill(), {1.0}, buffer(cell));
          r.while_(cell, [&] {});
        });
      },
      {"never writes its cell"});
}

}  // namespace
}  // namespace eagle
