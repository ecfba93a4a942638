// The native embedding engine (forward) against the reference engine on fresh random tables
// and ids with repeats (GPU; skipped without one), and its declines and its place in the plan
// list (everywhere).
#include <gtest/gtest.h>

#include "cuda_build.hpp"
#include "native_structured.hpp"

namespace eagle::test::native {
namespace {

int64_t embedding_id() {
  return engine("embedding", "native_embedding");
}

op::Graph embedding_graph(int64_t vocab, int64_t dim, const op::Dims& ids, DType dtype,
                          DType ids_dtype) {
  op::Graph g("embedding");
  const op::Tensor table = g.tensor({"table", {vocab, dim}, dtype});
  const op::Tensor i = g.tensor({"ids", ids, ids_dtype});
  g.op("embedding", {{"table", table}, {"ids", i}}).at("y").set_output(true).set_name("y");
  return g;
}

sweep::HostInputs embedding_inputs(const op::Graph& g) {
  const op::Node n = g.nodes()[0];
  const op::Tensor table = n.input("table"), ids = n.input("ids");
  const auto count = static_cast<std::size_t>(numel(ids.dims()));
  return {{table, random_array(table.dims(), table.dtype(), Device::cpu())},
          {ids, from_ints(random_indices(count, table.dims()[0]), ids.dims(), ids.dtype(),
                          Device::cpu())}};
}

struct Shape {
  int64_t vocab, dim;
  op::Dims ids;
};

TEST(NativeEmbedding, MatchesTheReference) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(embedding_id());
  // Few rows and many ids (repeats), a 16-byte row, odd rows (one-element units), D = 1, a
  // 2-D ids tensor, and the vocabulary sizes of real models (narrow rows: the reference is
  // float64 on the CPU; the bench runs D = 4096).
  const std::vector<Shape> shapes = {{37, 5, {100}},    {1, 1, {1}},        {5, 3, {3, 7}},
                                     {1000, 64, {513}}, {32000, 256, {97}}, {128256, 64, {33}},
                                     {17, 1031, {2, 9}}};
  for (DType d : float_dtypes())
    for (DType ids : {DType::i32, DType::i64})
      for (const Shape& s : shapes) {
        SCOPED_TRACE(std::string(dtype_name(d)) + " ids " + std::string(dtype_name(ids)) +
                     " table [" + std::to_string(s.vocab) + ", " + std::to_string(s.dim) +
                     "] ids [" + dims_name(s.ids) + "]");
        const op::Graph g = embedding_graph(s.vocab, s.dim, s.ids, d, ids);
        sweep::compare_with_reference(manifest(), embedding_id(), {}, g, embedding_inputs(g));
      }
}

// An id outside the table: the reference refuses the call; the GPU plan cannot see the ids, so
// it writes a NaN row (and reads nothing outside the table).
TEST(NativeEmbedding, AnIdOutsideTheTableGivesANaNRow) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(embedding_id());
  for (DType d : float_dtypes()) {
    SCOPED_TRACE(dtype_name(d));
    op::Graph g = embedding_graph(4, 8, {3}, d, DType::i32);
    plan::ExecutionPlans plans =
        plan::ExecutionPlans::create(g, manifest(), DeviceProperties::query(Device::cuda(0)));
    ASSERT_EQ(plans.at(plans.build_plans()).engine_id, embedding_id());
    const op::Node n = g.nodes()[0];
    const Array table = random_array({4, 8}, d, Device::cuda(0));
    const Array ids = from_ints({2, 4, -1}, {3}, DType::i32, Device::cuda(0));
    // A finite fill (not the NaN poison): the NaN rows must be the kernel's.
    const Array y = from_doubles(std::vector<double>(24, 7.0), {3, 8}, d, Device::cuda(0));
    plan::VariantPack pack(plans.layout());
    pack.set(n.input("table"), table).set(n.input("ids"), ids).set(n.output("y"), y);
    const Stream stream(Device::cuda(0));
    plans.execute(pack, CallContext::on(stream));
    stream.synchronize();
    const std::vector<double> got = values(y), want = values(table);
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(got[j], want[2 * 8 + j]);
      EXPECT_TRUE(std::isnan(got[8 + j]));
      EXPECT_TRUE(std::isnan(got[16 + j]));
    }
  }
}

op::Graph embedding_bwd_graph(int64_t vocab, int64_t dim, const op::Dims& ids, DType dtype,
                              DType ids_dtype) {
  op::Graph g("embedding_bwd");
  op::Dims dy_dims = ids;
  dy_dims.push_back(dim);
  const op::Tensor dy = g.tensor({"dy", dy_dims, dtype});
  const op::Tensor i = g.tensor({"ids", ids, ids_dtype});
  g.op("embedding_bwd", {{"dy", dy}, {"ids", i}}, {{"num_embeddings", vocab}})
      .at("dtable")
      .set_output(true)
      .set_name("dtable");
  return g;
}

sweep::HostInputs embedding_bwd_inputs(const op::Graph& g, int64_t vocab) {
  const op::Node n = g.nodes()[0];
  const op::Tensor dy = n.input("dy"), ids = n.input("ids");
  const auto count = static_cast<std::size_t>(numel(ids.dims()));
  return {{dy, random_array(dy.dims(), dy.dtype(), Device::cpu())},
          {ids, from_ints(random_indices(count, vocab), ids.dims(), ids.dtype(), Device::cpu())}};
}

// Repeated ids (many more ids than rows), rows no id names (zeros), a hot id, odd widths.
TEST(NativeEmbeddingBwd, MatchesTheReferenceDeterministically) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(embedding_id());
  const std::vector<Shape> shapes = {{37, 5, {1000}},    {1, 1, {1}},        {5, 3, {3, 7}},
                                     {1000, 64, {513}},  {32000, 256, {97}}, {3, 4096, {2048}},
                                     {17, 1031, {2, 9}}, {4099, 8, {100000}}};
  for (DType d : float_dtypes())
    for (DType ids : {DType::i32, DType::i64})
      for (const Shape& s : shapes) {
        SCOPED_TRACE(std::string(dtype_name(d)) + " ids " + std::string(dtype_name(ids)) +
                     " table [" + std::to_string(s.vocab) + ", " + std::to_string(s.dim) +
                     "] ids [" + dims_name(s.ids) + "]");
        const op::Graph g = embedding_bwd_graph(s.vocab, s.dim, s.ids, d, ids);
        sweep::compare_with_reference(manifest(), embedding_id(), {}, g,
                                      embedding_bwd_inputs(g, s.vocab));
      }
}

TEST(NativeEmbeddingBwd, TwoRunsGiveTheSameBits) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(embedding_id());
  op::Graph g = embedding_bwd_graph(50, 128, {20000}, DType::f32, DType::i64);
  plan::ExecutionPlans plans =
      plan::ExecutionPlans::create(g, manifest(), DeviceProperties::query(Device::cuda(0)));
  ASSERT_EQ(plans.at(plans.build_plans()).engine_id, embedding_id());
  const op::Node n = g.nodes()[0];
  const sweep::HostInputs in = embedding_bwd_inputs(g, 50);
  const Array dy = in[0].second.to(Device::cuda(0)), ids = in[1].second.to(Device::cuda(0));
  const Stream stream(Device::cuda(0));
  const Array ws =
      Array::empty({static_cast<int64_t>(plans.workspace_size())}, DType::u8, Device::cuda(0));
  std::vector<std::vector<double>> runs;
  for (int run = 0; run < 2; ++run) {
    const Array out = poisoned({50, 128}, DType::f32, Device::cuda(0));
    plan::VariantPack pack(plans.layout());
    pack.set(n.input("dy"), dy).set(n.input("ids"), ids).set(n.output("dtable"), out);
    plans.execute(pack, {stream.native(), nullptr, ws.data(), plans.workspace_size()});
    stream.synchronize();
    runs.push_back(values(out));
  }
  EXPECT_EQ(runs[0], runs[1]);
}

// Ids drawn from `distinct` classes spread over the whole table (many repeats, most rows
// absent), `hot` of every 4 positions naming class `hot_id` (a padding id), fresh each call.
sweep::HostInputs embedding_bwd_skewed(const op::Graph& g, int64_t vocab, int64_t distinct,
                                       int64_t hot_id) {
  const op::Node n = g.nodes()[0];
  const op::Tensor dy = n.input("dy"), ids = n.input("ids");
  const auto count = static_cast<std::size_t>(numel(ids.dims()));
  std::vector<int64_t> v = random_indices(count, distinct);
  const int64_t spread = vocab / distinct;
  for (std::size_t i = 0; i < count; ++i) v[i] = i % 4 == 1 ? hot_id : (v[i] * spread + 7) % vocab;
  return {{dy, random_array(dy.dims(), dy.dtype(), Device::cpu())},
          {ids, from_ints(v, ids.dims(), ids.dtype(), Device::cpu())}};
}

// The counting sort at sizes where it has many buckets (V / 256), many chunks of positions
// (N / 1024), buckets of more than 256 ids (V > 2^21), a hot id holding a quarter of the
// positions, runs of repeats and mostly absent rows.
TEST(NativeEmbeddingBwd, LargeVocabulariesWithRepeatsAndAbsentIdsMatchTheReference) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(embedding_id());
  struct Skewed {
    int64_t vocab, dim, ids, distinct, hot;
  };
  const std::vector<Skewed> shapes = {{131072, 64, 20000, 3000, 0},
                                      {131072, 24, 40000, 131072, 131071},
                                      {32769, 36, 16384, 50, 32768},
                                      {(int64_t{1} << 21) + 3, 8, 5000, 4000, 1 << 20}};
  for (DType d : float_dtypes())
    for (DType ids : {DType::i32, DType::i64})
      for (const Skewed& s : shapes) {
        SCOPED_TRACE(std::string(dtype_name(d)) + " ids " + std::string(dtype_name(ids)) +
                     " table [" + std::to_string(s.vocab) + ", " + std::to_string(s.dim) +
                     "] ids " + std::to_string(s.ids) + " from " + std::to_string(s.distinct));
        const op::Graph g = embedding_bwd_graph(s.vocab, s.dim, {s.ids}, d, ids);
        sweep::compare_with_reference(manifest(), embedding_id(), {}, g,
                                      embedding_bwd_skewed(g, s.vocab, s.distinct, s.hot));
      }
}

// Many buckets and chunks, a hot id: the same bits twice (bf16 rounds the double sums once).
TEST(NativeEmbeddingBwd, TwoRunsOfALargeVocabularyGiveTheSameBits) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(embedding_id());
  const int64_t vocab = 131072, dim = 264, count = 30000;
  op::Graph g = embedding_bwd_graph(vocab, dim, {count}, DType::bf16, DType::i64);
  plan::ExecutionPlans plans =
      plan::ExecutionPlans::create(g, manifest(), DeviceProperties::query(Device::cuda(0)));
  ASSERT_EQ(plans.at(plans.build_plans()).engine_id, embedding_id());
  const op::Node n = g.nodes()[0];
  const sweep::HostInputs in = embedding_bwd_skewed(g, vocab, 5000, 3);
  const Array dy = in[0].second.to(Device::cuda(0)), ids = in[1].second.to(Device::cuda(0));
  const Stream stream(Device::cuda(0));
  const Array ws =
      Array::empty({static_cast<int64_t>(plans.workspace_size())}, DType::u8, Device::cuda(0));
  std::vector<std::vector<double>> runs;
  for (int run = 0; run < 2; ++run) {
    const Array out = poisoned({vocab, dim}, DType::bf16, Device::cuda(0));
    plan::VariantPack pack(plans.layout());
    pack.set(n.input("dy"), dy).set(n.input("ids"), ids).set(n.output("dtable"), out);
    plans.execute(pack, {stream.native(), nullptr, ws.data(), plans.workspace_size()});
    stream.synchronize();
    runs.push_back(values(out));
  }
  EXPECT_EQ(runs[0], runs[1]);
}

TEST(NativeEmbeddingHarness, TheReferencePassesAgainstItselfBackward) {
  const op::Graph g = embedding_bwd_graph(37, 5, {100}, DType::f16, DType::i32);
  sweep::compare_with_reference(manifest(), engine("embedding", "reference"), {}, g,
                                embedding_bwd_inputs(g, 37));
}

TEST(NativeEmbeddingHarness, TheReferencePassesAgainstItself) {
  const op::Graph g = embedding_graph(37, 5, {100}, DType::bf16, DType::i64);
  sweep::compare_with_reference(manifest(), engine("embedding", "reference"), {}, g,
                                embedding_inputs(g));
}

TEST(NativeEmbeddingPlanning, TheNativeEngineLeadsOnAGpu) {
  EAGLE_SKIP_WITHOUT_CUDA_BUILD();
  plan::ExecutionPlans plans = plan::ExecutionPlans::create(
      embedding_graph(128256, 4096, {16384}, DType::bf16, DType::i64), manifest(), hopper());
  ASSERT_GE(plans.count(), 1);
  EXPECT_EQ(plans.at(0).engine_id, embedding_id()) << plans.describe();
  EXPECT_EQ(plans.build_plans(), 0);
}

// deterministic = false allows float atomics; the native backward has none, so it serves both.
TEST(NativeEmbeddingPlanning, TheBackwardServesEitherDeterminismAndAsksForItsSortSpace) {
  EAGLE_SKIP_WITHOUT_CUDA_BUILD();
  for (bool deterministic : {true, false}) {
    op::Graph g("embedding_bwd");
    const op::Tensor dy = g.tensor({"dy", {16384, 4096}, DType::bf16});
    const op::Tensor ids = g.tensor({"ids", {16384}, DType::i64});
    g.op("embedding_bwd", {{"dy", dy}, {"ids", ids}},
         {{"num_embeddings", int64_t{128256}}, {"deterministic", deterministic}})
        .at("dtable")
        .set_output(true);
    plan::ExecutionPlans plans = plan::ExecutionPlans::create(g, manifest(), hopper());
    EXPECT_EQ(plans.at(0).engine_id, embedding_id()) << plans.describe();
    EXPECT_EQ(plans.build_plans(), 0);
    // Offsets [V + 1], two position arrays [N], the 501 x 16 bucket counts and their scan (+1).
    EXPECT_EQ(plans.workspace_size(), (128256u + 1 + 2 * 16384 + 2 * 501 * 16 + 1) * 4);
  }
}

TEST(NativeEmbeddingDeclines, F64TablesAndUnsignedIds) {
  sweep::expect_declines(manifest(), embedding_id(),
                         embedding_graph(4, 8, {3}, DType::f64, DType::i64), hopper(),
                         {"does not serve io dtype f64"});
  sweep::expect_declines(manifest(), embedding_id(),
                         embedding_graph(4, 8, {3}, DType::f32, DType::u8), hopper(),
                         {"ids must be i32 or i64, not u8"});
}

TEST(NativeEmbeddingDeclines, AStridedTable) {
  op::Graph g("strided");
  const op::Tensor table = g.tensor({"table", {4, 8}, DType::f32, {1, 4}});
  const op::Tensor ids = g.tensor({"ids", {3}, DType::i64});
  g.op("embedding", {{"table", table}, {"ids", ids}}).at("y").set_output(true);
  sweep::expect_declines(manifest(), embedding_id(), g, hopper(),
                         {"'table' must be dense row-major"});
}

}  // namespace
}  // namespace eagle::test::native
