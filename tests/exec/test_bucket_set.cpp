// BucketSet: selection, prefix-view inputs, one shared arena, stale results refused, externals
// persisting across buckets, and the errors. MemoryArena through Graph::build.
#include "test_util.hpp"
#include "testing_calls.hpp"

namespace eagle {
namespace {

class Buckets : public test::OnDevice {
 protected:
  // y = 2 x over the bucket's rows, z = y + y (two graph-local arrays), and n = the sum of cu.
  BucketSet make(std::vector<int64_t> caps) {
    const int64_t largest = caps.back();
    return BucketSet(std::move(caps),
                     {{"x", {largest}, DType::f32, true}, {"cu", {3}, DType::i32, false}}, device(),
                     [](Recorder& r, const BucketSet::Bucket& b) {
                       Value x = r.param("x", b.input("x"));
                       Value y = r.call(kernels::scale(), {x, 2.0});
                       r.result({r.call(kernels::add(), {y, y}),
                                 r.call(kernels::sum(), {r.param("cu", b.input("cu"))})});
                     });
  }
  void fill(const BucketSet& s, const std::vector<float>& x) {
    s.backing("x").copy_from(Array::from(x, {static_cast<int64_t>(x.size())}, Device::cpu()));
    s.backing("cu").copy_from(Array::from(std::vector<int32_t>{0, 3, 5}, {3}, Device::cpu()));
  }
};

TEST_P(Buckets, PicksTheSmallestCapacityAndRunsOnThePrefix) {
  BucketSet s = make({8, 16, 32});
  EXPECT_EQ(s.select(0), 0);
  EXPECT_EQ(s.select(8), 0);
  EXPECT_EQ(s.select(9), 1);
  EXPECT_EQ(s.select(32), 2);
  const std::vector<double> xs = test::random_values(32);
  const std::vector<float> x(xs.begin(), xs.end());
  fill(s, x);
  const BucketResults r = s.run(12);  // capacity 16
  EXPECT_EQ(r.bucket(), 1);
  EXPECT_EQ(r.capacity(), 16);
  const std::vector<float> z = r[0].to_vector<float>();
  ASSERT_EQ(z.size(), 16u);
  for (std::size_t i = 0; i < z.size(); ++i) EXPECT_FLOAT_EQ(z[i], 4 * x[i]);
  EXPECT_EQ(r[1].to_vector<int32_t>()[0], 8);  // cu is whole in every bucket
}

TEST_P(Buckets, AResultIsRefusedAfterAnotherLaunchOfTheSet) {
  BucketSet s = make({8, 16});
  fill(s, std::vector<float>(16, 1.0f));
  const BucketResults first = s.run(4);
  EXPECT_TRUE(first.valid());
  EXPECT_FLOAT_EQ(first[0].to_vector<float>()[0], 4.0f);
  const BucketResults second = s.run(16);
  EXPECT_FALSE(first.valid());
  test::expect_invalid([&] { (void)first[0]; },
                       {"stale result of bucket 0", "capacity 8", "copy results before"});
  EXPECT_EQ(second[0].to_vector<float>().size(), 16u);
  test::expect_invalid([&] { (void)second[2]; }, {"result 2 of 2"});
}

TEST_P(Buckets, TheBucketsShareOneArenaSizedForTheLargest) {
  BucketSet s = make({64, 256, 1024});
  // Each bucket's own arrays (here its results) lie in the one arena.
  fill(s, std::vector<float>(1024, 0.5f));
  const auto* lo = static_cast<const char*>(s.arena().storage()->data());
  for (int64_t active : {10, 200, 1000}) {
    const auto* p = static_cast<const char*>(s.run(active)[0].data());
    EXPECT_TRUE(p >= lo && p < lo + s.arena_bytes()) << "active " << active;
  }
  EXPECT_EQ(s.arena_bytes(), MemoryArena::bytes_for(s.graph(2).recording(), device()));
  const double set = static_cast<double>(s.arena_bytes() + s.backing_bytes());
  EXPECT_LE(set, 1.1 * static_cast<double>(s.largest_alone_bytes()));
  std::printf("bucket set: %zu bytes (arena %zu + inputs %zu); largest bucket alone: %zu\n",
              s.arena_bytes() + s.backing_bytes(), s.arena_bytes(), s.backing_bytes(),
              s.largest_alone_bytes());
}

// A call that asks for a workspace (a planned operation, a library call) gets a slot in the
// arena after the arrays: the buckets share it too, and the largest bucket alone counts it.
TEST_P(Buckets, CallsTakeTheirWorkspacesFromTheArena) {
  auto counts = std::make_shared<test::CallCounts>();
  const Kernel copy = test::copy_call_kernel(test::CopyEntry::capture, counts);
  BucketSet s({16, 64}, {{"x", {64}, DType::u32, true}}, device(),
              [&](Recorder& r, const BucketSet::Bucket& b) {
                r.result(r.call(copy, {r.param("x", b.input("x"))}));
              });
  EXPECT_EQ(s.graph(1).workspace_bytes(), 256u);  // the test call asks for 256 bytes
  // The largest bucket: its 256-byte output, then the workspace slot.
  EXPECT_EQ(s.arena_bytes(), 256u + 256u);
  EXPECT_EQ(s.arena_bytes(), MemoryArena::bytes_for(s.graph(1).recording(), device()));
  EXPECT_EQ(s.largest_alone_bytes(), 256u + 256u + 256u);  // output, workspace, input x
  std::vector<uint32_t> x(64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint32_t>(7 * i + 1);
  s.backing("x").copy_from(Array::from(x, {64}, Device::cpu()));
  const auto* lo = static_cast<const char*>(s.arena().storage()->data());
  for (int64_t active : {10, 60}) {
    const BucketResults r = s.run(active);
    const auto* ws = static_cast<const char*>(counts->last_workspace.load());
    EXPECT_TRUE(ws >= lo && ws + 256 <= lo + s.arena_bytes()) << "active " << active;
    EXPECT_EQ(counts->last_workspace_bytes.load(), 256);
    const std::vector<uint32_t> out = r[0].to_vector<uint32_t>();
    for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], x[i]);
  }
}

TEST_P(Buckets, EveryGraphOfTheSetLaunchesOnOneStream) {
  BucketSet s = make({8, 16, 32});
  for (int b = 0; b < 3; ++b) EXPECT_EQ(&s.graph(b).stream(), &s.stream()) << "bucket " << b;
  // A stream of the caller's is used as given.
  auto mine = std::make_shared<Stream>(device());
  BucketSet t(
      {8}, {{"x", {8}, DType::f32, true}}, device(),
      [](Recorder& r, const BucketSet::Bucket& b) {
        r.result(r.call(kernels::scale(), {r.param("x", b.input("x")), 2.0}));
      },
      {}, BuildOptions{.stream = mine});
  EXPECT_EQ(&t.stream(), mine.get());
}

// A training step per bucket: w is an external, updated in place by every bucket's graph.
TEST_P(Buckets, ExternalsPersistAcrossBuckets) {
  Array w = Array::from(std::vector<float>{0.0f}, {1}, device());
  const int64_t largest = 32;
  BucketSet s(
      {8, 32}, {{"x", {largest}, DType::f32, true}}, device(),
      [&](Recorder& r, const BucketSet::Bucket& b) {
        Value wv = r.external(w, "w");
        Value x = r.param("x", b.input("x"));
        Value mean = r.call(kernels::scale(),
                            {r.call(kernels::sum(), {x}), 1.0 / static_cast<double>(b.capacity)});
        Value err = r.call(kernels::axpy(), {mean, wv, -1.0});  // w - mean(x)
        Value loss = r.call(kernels::sum(), {r.call(kernels::mul(), {err, err})});
        Value dw = diff::gradients(r, {loss}, {wv})[0];
        r.call(kernels::axpy(), {dw, wv, -0.1}, buffer(wv));
        r.result(loss);
      },
      RecordOptions{.record = true});
  s.backing("x").copy_from(Array::from(std::vector<float>(32, 3.0f), {32}, Device::cpu()));
  for (int step = 0; step < 60; ++step) s.run(step % 2 ? 30 : 6);
  EXPECT_NEAR(w.to_vector<float>()[0], 3.0f, 1e-3f);  // both buckets pulled w towards x = 3
}

TEST_P(Buckets, RefusesBadCapacitiesInputsAndActiveCounts) {
  auto body = [](Recorder& r, const BucketSet::Bucket& b) {
    r.result(r.call(kernels::scale(), {r.param("x", b.input("x")), 2.0}));
  };
  test::expect_invalid(
      [&] {
        BucketSet({8, 8}, {{"x", {8}, DType::f32, true}}, device(), body);
      },
      {"strictly increasing", "index 1"});
  test::expect_invalid([&] { BucketSet({}, {}, device(), body); }, {"capacities", "empty"});
  test::expect_invalid(
      [&] {
        BucketSet({8, 16}, {{"x", {8}, DType::f32, true}}, device(), body);
      },
      {"input 'x'", "largest capacity 16"});
  test::expect_invalid(
      [&] {
        BucketSet({8}, {{"x", {8}, DType::f32, true}, {"x", {8}, DType::f32, true}}, device(),
                  body);
      },
      {"'x'", "declared twice"});
  test::expect_invalid(
      [&] {
        BucketSet({8}, {{"x", {8}, DType::f32, true}}, device(),
                  [](Recorder& r, const BucketSet::Bucket& b) { r.param("y", b.input("y")); });
      },
      {"no input named 'y'"});
  BucketSet s = make({8, 16});
  test::expect_invalid([&] { s.select(17); }, {"active = 17", "[0, 16]"});
  test::expect_invalid([&] { s.select(-1); }, {"active = -1"});
  test::expect_invalid([&] { s.backing("nope"); }, {"no input named 'nope'"});
}

TEST_P(Buckets, AGraphRefusesAnArenaTooSmall) {
  const Array x = Array::from(std::vector<float>(64, 1.0f), {64}, device());
  Graph g = Graph::record([&](Recorder& r) {
    r.result(r.call(kernels::scale(), {r.param("x", x), 2.0}));
  });
  BuildOptions o;
  o.arena = std::make_shared<MemoryArena>(device(), 128);
  test::expect_invalid([&] { g.build(device(), o); }, {"arena holds 128 bytes", "need 256"});
  EXPECT_FALSE(g.built());
  o.arena =
      std::make_shared<MemoryArena>(device(), MemoryArena::bytes_for(g.recording(), device()));
  g.build(device(), o);
  EXPECT_FLOAT_EQ(g()[0].to_vector<float>()[63], 2.0f);
  // Room for the arrays but not for a call's workspace.
  auto counts = std::make_shared<test::CallCounts>();
  const Array u = Array::from(std::vector<uint32_t>(64, 3u), {64}, device());
  Graph h = Graph::record([&](Recorder& r) {
    r.result(r.call(test::copy_call_kernel(test::CopyEntry::capture, counts), {r.param("u", u)}));
  });
  o.arena = std::make_shared<MemoryArena>(device(), 256);
  test::expect_invalid([&] { h.build(device(), o); },
                       {"arena holds 256 bytes", "calls' workspaces need 512"});
  EXPECT_FALSE(h.built());
  o.stream = std::make_shared<Stream>(Device::cpu());
  if (device().is_cuda())
    test::expect_invalid([&] { h.build(device(), o); }, {"options.stream is on cpu"});
  test::expect_invalid([] { MemoryArena(Device::cpu(), 0); }, {"bytes must be > 0"});
}

INSTANTIATE_TEST_SUITE_P(Devices, Buckets, ::testing::Values(Device::cpu(), Device::cuda(0)),
                         [](const ::testing::TestParamInfo<Device>& info) {
                           return info.param.is_cpu() ? std::string("cpu") : std::string("cuda");
                         });

}  // namespace
}  // namespace eagle
