// Value handles: undefined and dangling ones are typed errors; views (rows, any dim, transposes)
// reach kernels that declare strides; RecordingBuilder and Recorder::assign as public API.
#include <gtest/gtest.h>

#include <memory>

#include "eagle/eagle.hpp"
#include "test_util.hpp"
#include "typed_kernels.hpp"

namespace eagle {
namespace {

using test::expect_throw_with;

TEST(Values, AnUndefinedValueIsATypedError) {
  const Value v;
  EXPECT_FALSE(v.defined());
  expect_throw_with<InvalidArgument>([&] { (void)v.shape(); }, {"Value::shape", "undefined"});
  expect_throw_with<InvalidArgument>([&] { (void)v.slice(0, 1); }, {"Value::slice", "undefined"});
  Graph::record([&](Recorder& r) {
    expect_throw_with<InvalidArgument>([&] { r.call(kernels::copy(), {v}); },
                                       {"kernel copy", "'x'", "undefined"});
    expect_throw_with<InvalidArgument>([&] { r.result(v); }, {"Recorder::result", "undefined"});
    r.result(r.empty({1}, DType::f32));
  });
}

TEST(Values, AValueWhoseGraphIsGoneIsATypedError) {
  Value kept;
  {
    Graph g = Graph::record([&](Recorder& r) {
      kept = r.empty({3}, DType::f32, "t");
      r.result(kept);
    });
    EXPECT_EQ(kept.shape(), (Shape{3}));  // introspection while the graph lives
  }
  EXPECT_FALSE(kept.defined());
  expect_throw_with<InvalidArgument>([&] { (void)kept.dtype(); }, {"recording is gone"});
  expect_throw_with<InvalidArgument>([&] { (void)kept.reshape({3, 1}); }, {"recording is gone"});
}

TEST(Values, ViewsAfterTheRecordingFinishedAreRefused) {
  Value kept;
  Graph g = Graph::record([&](Recorder& r) {
    kept = r.empty({3, 4}, DType::f32, "t");
    r.result(kept);
  });
  expect_throw_with<InvalidArgument>([&] { (void)kept.slice(1, 0, 2); }, {"has finished"});
  expect_throw_with<InvalidArgument>([&] { (void)kept.transpose(0, 1); }, {"has finished"});
}

TEST(Values, ViewsDescribeTheirStrides) {
  Graph::record([&](Recorder& r) {
    const Value m = r.empty({4, 6}, DType::f32, "m");
    EXPECT_TRUE(m.is_contiguous());
    EXPECT_EQ(m.strides(), (Shape{6, 1}));
    const Value rows = m.slice(1, 3);
    EXPECT_TRUE(rows.is_contiguous());
    const Value cols = m.slice(1, 2, 5);
    EXPECT_FALSE(cols.is_contiguous());
    EXPECT_EQ(cols.shape(), (Shape{4, 3}));
    EXPECT_EQ(cols.strides(), (Shape{6, 1}));
    const Value t = m.transpose(0, 1);
    EXPECT_EQ(t.shape(), (Shape{6, 4}));
    EXPECT_EQ(t.strides(), (Shape{1, 6}));
    expect_throw_with<InvalidArgument>([&] { (void)t.reshape({24}); }, {"strided view"});
    expect_throw_with<InvalidArgument>([&] { (void)m.slice(2, 0, 1); }, {"dim 2", "out of range"});
    expect_throw_with<InvalidArgument>([&] { (void)m.transpose(0, 5); }, {"dims 0 and 5"});
    expect_throw_with<InvalidArgument>([&] { r.call(kernels::copy(), {t}); },
                                       {"kernel copy", "'x'", "strided view", "does not declare"});
    r.result(m);
  });
}

TEST(Values, BroadcastViewsRepeatWithStrideZeroAndAreNeverWritten) {
  Graph::record([&](Recorder& r) {
    const Value one = r.empty({}, DType::f32, "one");
    const Value b = one.broadcast_to({4, 6});
    EXPECT_EQ(b.shape(), (Shape{4, 6}));
    EXPECT_EQ(b.strides(), (Shape{0, 0}));
    const Value m = r.empty({4, 1}, DType::f32, "m");
    EXPECT_EQ(m.broadcast_to({2, 4, 3}).strides(), (Shape{0, 1, 0}));
    const Value row = r.empty({1, 3}, DType::f32, "row");
    EXPECT_EQ(row.broadcast_to({5, 3}).strides(), (Shape{0, 1}));
    expect_throw_with<InvalidArgument>(
        [&] {
          (void)m.broadcast_to({3, 2});
        },
        {"Value::broadcast_to", "does not broadcast", "dim 0"});
    expect_throw_with<InvalidArgument>([&] { (void)m.broadcast_to({4}); },
                                       {"Value::broadcast_to", "more dims"});
    // A kernel reads it (a strided view) but never writes it: its elements share memory.
    const Value read = r.call(test::typed_strided_copy(), {b});
    EXPECT_EQ(read.shape(), (Shape{4, 6}));
    expect_throw_with<InvalidArgument>(
        [&] {
          r.call(test::typed_strided_scale(), {b, 2.0});
        },
        {"'x' is written", "broadcast view", "stride 0 on dim 0"});
    r.result(read);
  });
}

class ValuesOnDevice : public test::OnDevice {};
EAGLE_ON_EVERY_DEVICE(ValuesOnDevice);

TEST_P(ValuesOnDevice, AStridedViewReachesAKernelThatDeclaresStrides) {
  const Array m0 = test::random_array({5, 7}, DType::f32, device());
  Graph g = Graph::record([&](Recorder& r) {
    const Value m = r.param("m", m0);
    r.result({r.call(test::typed_strided_copy(), {m.transpose(0, 1)}),
              r.call(test::typed_strided_copy(), {m.slice(1, 2, 6)})});
  });
  g.build(device());
  const auto& out = g();
  const auto hm = m0.to_vector<float>();
  const auto t = out[0].to_vector<float>(), c = out[1].to_vector<float>();
  ASSERT_EQ(out[0].shape(), (Shape{7, 5}));
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 5; ++j) EXPECT_EQ(t[i * 5 + j], hm[j * 7 + i]);
  ASSERT_EQ(out[1].shape(), (Shape{5, 4}));
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(c[i * 4 + j], hm[i * 7 + j + 2]);
}

TEST_P(ValuesOnDevice, AWriteThroughAStridedViewOrdersLaterReaders) {
  // Writing column 0 of m, then reading all of m: the reader comes after the writer.
  Graph g = Graph::record([&](Recorder& r) {
    const Value m = r.empty({4, 3}, DType::f32, "m");
    r.call(kernels::fill(), {1.0}, buffer(m));
    const Value col = r.call(test::typed_strided_copy(), {m.slice(1, 0, 1)});
    r.result(r.call(kernels::scale(), {col, 2.0}));
  });
  ASSERT_EQ(g.nodes().size(), 3u);
  EXPECT_EQ(g.nodes()[1].deps, std::vector<int>{0});
  g.build(device());
  EXPECT_EQ(g()[0].to_vector<float>(), (std::vector<float>{2, 2, 2, 2}));
}

TEST(Values, RecordingBuilderRecordsIntoAnOpenRecording) {
  RecordingBuilder b;
  Recorder& r = b.recorder();
  const Value t = r.empty({2}, DType::f32, "t");
  r.call(kernels::fill(), {4.0}, buffer(t));
  r.result(t);
  std::shared_ptr<const Recording> rec = b.finish();
  EXPECT_TRUE(rec->finished());
  EXPECT_EQ(rec->nodes().size(), 1u);
  expect_throw_with<InvalidArgument>([&] { b.finish(); }, {"finished already"});
  expect_throw_with<InvalidArgument>([&] { r.empty({1}, DType::f32); }, {"has finished"});
}

TEST(Values, AssignIsWhatOperatorEqualsDoes) {
  const Array c0 = Array::from(std::vector<uint32_t>{1}, {1}, Device::cpu());
  Graph g = Graph::record([&](Recorder& r) {
    Value y = r.empty({4}, DType::f32, "y");
    r.call(kernels::fill(), {1.0}, buffer(y));
    r.if_(r.param("c", c0), [&] {
      Value z = r.call(kernels::scale(), {y, 3.0});
      r.assign(y, z);  // merged in place into y's array
    });
    r.result(y);
  });
  int merged = 0;
  for (const BufferInfo& b : g.recording().buffers()) merged += b.merged_into >= 0;
  EXPECT_EQ(merged, 1);
  g.build(Device::cpu());
  EXPECT_EQ(g()[0].to_vector<float>(), (std::vector<float>{3, 3, 3, 3}));
}

}  // namespace
}  // namespace eagle
