// The lowering of sdpa / sdpa_bwd to cuDNN's graph (src/engines/cudnn/lowering.cpp): cuDNN's
// [B, H, S, D] order and strides, eagle's uids kept, the arrays the plan derives given uids no
// eagle tensor holds, and every decline naming its reason. No cuDNN or GPU needed.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "engines/cudnn/lowering.hpp"
#include "sdpa_graphs.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using cudnn::lower;
using cudnn::Lowered;
using test::sdpa::SdpaShape;

std::set<int64_t> eagle_uids(const op::Graph& g) {
  std::set<int64_t> out;
  for (const op::Tensor& t : g.tensors()) out.insert(t.uid());
  return out;
}

TEST(CudnnLowering, DenseForwardPermutesToBhsdAndKeepsEagleUids) {
  SdpaShape s;
  s.batch = 3, s.s_q = 5, s.s_kv = 7, s.heads = 4, s.kv_heads = 2, s.head_dim = 16, s.value_dim = 8;
  const op::Graph g = test::sdpa::sdpa_graph(s);
  const Lowered L = lower(g);
  EXPECT_EQ(L.op, Lowered::Op::sdpa);
  EXPECT_FALSE(L.ragged);
  EXPECT_TRUE(L.stats);
  EXPECT_DOUBLE_EQ(L.scale, 1.0 / std::sqrt(16.0));  // the schema's default: 1/sqrt(D)
  const op::Node n = g.nodes()[0];
  const auto* q = L.find("q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->uid, n.input("q").uid());
  EXPECT_EQ(q->dims, (std::array<int64_t, 4>{3, 4, 5, 16}));
  // [B, S, H, D] row-major strides seen in [B, H, S, D] order.
  EXPECT_EQ(q->strides, (std::array<int64_t, 4>{5 * 4 * 16, 16, 4 * 16, 1}));
  const auto* v = L.find("v");
  EXPECT_EQ(v->dims, (std::array<int64_t, 4>{3, 2, 7, 8}));
  const auto* o = L.find("o");
  EXPECT_TRUE(o->output);
  EXPECT_EQ(o->uid, n.output("o").uid());
  const auto* st = L.find("stats");
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->dtype, DType::f32);
  EXPECT_EQ(st->dims, (std::array<int64_t, 4>{3, 4, 5, 1}));
  EXPECT_EQ(st->strides, (std::array<int64_t, 4>{5 * 4, 1, 4, 1}));  // eagle's [B, S, H]
  EXPECT_TRUE(L.offsets.empty());
  EXPECT_EQ(L.seq_len_q_uid, -1);
}

TEST(CudnnLowering, ExplicitScaleAndCausalAreCarried) {
  SdpaShape s;
  s.scale = 0.25;
  s.causal = true;
  s.s_q = 4, s.s_kv = 9;
  const Lowered L = lower(test::sdpa::sdpa_graph(s));
  EXPECT_DOUBLE_EQ(L.scale, 0.25);
  EXPECT_TRUE(L.causal);
}

TEST(CudnnLowering, VirtualStatsAreNotGenerated) {
  SdpaShape s;
  op::Graph g("sdpa");
  auto out = g.op("sdpa", test::sdpa::sdpa_inputs(g, s), test::sdpa::sdpa_attrs(s, true));
  out.at("o").set_output(true);  // stats stay virtual
  const Lowered L = lower(g);
  EXPECT_FALSE(L.stats);
  EXPECT_EQ(L.find("stats"), nullptr);
}

TEST(CudnnLowering, RaggedForwardDerivesOffsetsOncePerRowSizeWithFreeUids) {
  SdpaShape s;
  s.ragged = true;
  s.batch = 3, s.s_q = 20, s.s_kv = 30, s.heads = 4, s.kv_heads = 2, s.head_dim = 16,
  s.value_dim = 16;
  const op::Graph g = test::sdpa::sdpa_graph(s);
  const Lowered L = lower(g);
  EXPECT_TRUE(L.ragged);
  EXPECT_EQ(L.batch, 3);
  EXPECT_EQ(L.s_q, 20);  // a sequence may hold every row
  EXPECT_EQ(L.cu_dtype, DType::i32);
  const op::Node n = g.nodes()[0];
  EXPECT_EQ(L.cu_q_uid, n.input("cu_seqlens_q").uid());
  EXPECT_EQ(L.cu_kv_uid, n.input("cu_seqlens_kv").uid());
  // q and o share (q side, H*D); k and v share (kv side, Hk*D); stats has its own (H).
  ASSERT_EQ(L.offsets.size(), 3u);
  const auto* q = L.find("q");
  EXPECT_EQ(q->dims, (std::array<int64_t, 4>{3, 4, 20, 16}));
  EXPECT_EQ(q->strides, (std::array<int64_t, 4>{20 * 4 * 16, 16, 4 * 16, 1}));
  EXPECT_EQ(q->ragged_uid, L.find("o")->ragged_uid);
  EXPECT_EQ(L.find("k")->ragged_uid, L.find("v")->ragged_uid);
  EXPECT_NE(q->ragged_uid, L.find("k")->ragged_uid);
  EXPECT_NE(q->ragged_uid, L.find("stats")->ragged_uid);
  // Every uid the plan adds is one no eagle tensor holds, and they are distinct.
  const std::set<int64_t> taken = eagle_uids(g);
  std::set<int64_t> added = {L.seq_len_q_uid, L.seq_len_kv_uid};
  for (const cudnn::RaggedOffsets& o : L.offsets) {
    EXPECT_TRUE(o.derived);
    EXPECT_EQ(o.dtype, DType::i64);
    added.insert(o.uid);
  }
  EXPECT_EQ(added.size(), 5u);
  for (int64_t uid : added) EXPECT_EQ(taken.count(uid), 0u) << uid;
  for (const cudnn::RaggedOffsets& o : L.offsets)
    if (o.uid == q->ragged_uid) {
      EXPECT_EQ(o.row_elems, 4 * 16);
    }
}

// FlashAttention's max_seqlen sizes cuDNN's S (its grids); the rows stay the buffers' bound.
TEST(CudnnLowering, MaxSeqlenIsCudnnsSAndTheRowsStayTheBound) {
  SdpaShape s;
  s.ragged = true;
  s.batch = 3, s.s_q = 200, s.s_kv = 300, s.heads = 4, s.kv_heads = 2, s.head_dim = 16,
  s.value_dim = 16;
  s.max_seqlen_q = 64, s.max_seqlen_kv = 1000;  // kv's past its rows: the rows
  for (const op::Graph& g : {test::sdpa::sdpa_graph(s), test::sdpa::sdpa_bwd_graph(s)}) {
    const Lowered L = lower(g);
    EXPECT_EQ(L.s_q, 200);
    EXPECT_EQ(L.s_kv, 300);
    EXPECT_EQ(L.seq_q, 64);
    EXPECT_EQ(L.seq_kv, 300);
    EXPECT_EQ(L.find("q")->dims, (std::array<int64_t, 4>{3, 4, 64, 16}));
    EXPECT_EQ(L.find("k")->dims, (std::array<int64_t, 4>{3, 2, 300, 16}));
    EXPECT_EQ(L.find("stats")->dims, (std::array<int64_t, 4>{3, 4, 64, 1}));
    EXPECT_NE(L.summary().find("S 64/300 rows 200/300"), std::string::npos) << L.summary();
  }
  s.max_seqlen_q = s.max_seqlen_kv = 0;
  const Lowered unbounded = lower(test::sdpa::sdpa_graph(s));
  EXPECT_EQ(unbounded.seq_q, 200);
  EXPECT_EQ(unbounded.seq_kv, 300);
}

// q, k and v column slices of one packed [T, 3 H D] array (a qkv projection's output): tokens
// 3 H D apart, each token's [H, D] contiguous; the offsets count in rows of the packed array.
TEST(CudnnLowering, PackedQkvSlicesReadTokensTheirRowApart) {
  SdpaShape s;
  s.ragged = true;
  s.batch = 3, s.s_q = s.s_kv = 20, s.heads = s.kv_heads = 4, s.head_dim = s.value_dim = 16;
  op::Graph g("packed");
  op::Ports p = test::sdpa::sdpa_inputs(g, s);
  for (int i = 0; i < 3; ++i) p[static_cast<std::size_t>(i)].second.set_strides({3 * 64, 16, 1});
  g.op("sdpa", p).at("o").set_output(true);
  const Lowered L = lower(g);
  for (const char* port : {"q", "k", "v"}) {
    SCOPED_TRACE(port);
    EXPECT_EQ(L.find(port)->strides, (std::array<int64_t, 4>{20 * 3 * 64, 16, 3 * 64, 1}));
  }
  EXPECT_EQ(L.find("o")->strides, (std::array<int64_t, 4>{20 * 64, 16, 64, 1}));
  EXPECT_EQ(L.find("k")->ragged_uid, L.find("v")->ragged_uid);
  EXPECT_NE(L.find("q")->ragged_uid, L.find("o")->ragged_uid);  // other row sizes
  for (const cudnn::RaggedOffsets& o : L.offsets)
    if (o.uid == L.find("q")->ragged_uid) {
      EXPECT_EQ(o.row_elems, 3 * 64);
    }
}

TEST(CudnnLowering, UserUidsAreKeptAndAddedUidsAvoidThem) {
  SdpaShape s;
  s.ragged = true;
  op::Graph g = test::sdpa::sdpa_graph(s);
  // Renumber every tensor to 1..n: the added uids must start past them.
  int64_t next = 1;
  for (op::Tensor t : g.tensors()) t.set_uid(next++);
  const Lowered L = lower(g);
  EXPECT_GE(L.seq_len_q_uid, next);
  for (const cudnn::TensorDesc& t : L.tensors) EXPECT_LT(t.uid, next) << t.name;
}

TEST(CudnnLowering, DenseBackwardCopiesStatisticsToPackedBhs) {
  SdpaShape s;
  s.batch = 2, s.s_q = 6, s.s_kv = 6, s.heads = 3, s.kv_heads = 3, s.head_dim = 8, s.value_dim = 8;
  const op::Graph g = test::sdpa::sdpa_bwd_graph(s);
  const Lowered L = lower(g);
  EXPECT_EQ(L.op, Lowered::Op::sdpa_bwd);
  const op::Node n = g.nodes()[0];
  EXPECT_EQ(L.stats_source_uid, n.input("stats").uid());
  EXPECT_EQ(L.stats_source_strides, (std::array<int64_t, 3>{6 * 3, 3, 1}));
  const auto* st = L.find("stats");
  ASSERT_NE(st, nullptr);
  EXPECT_TRUE(st->in_workspace);
  EXPECT_EQ(st->uid, L.stats_copy_uid);
  EXPECT_EQ(eagle_uids(g).count(st->uid), 0u);
  EXPECT_EQ(st->strides, (std::array<int64_t, 4>{3 * 6, 6, 1, 1}));
  for (const char* p : {"dq", "dk", "dv"}) {
    ASSERT_NE(L.find(p), nullptr) << p;
    EXPECT_TRUE(L.find(p)->output);
    EXPECT_EQ(L.find(p)->uid, n.output(p).uid());
  }
  EXPECT_FALSE(L.find("d_o")->output);
}

TEST(CudnnLowering, RaggedBackwardReadsThdStatisticsInPlace) {
  SdpaShape s;
  s.ragged = true;
  const Lowered L = lower(test::sdpa::sdpa_bwd_graph(s));
  EXPECT_EQ(L.stats_copy_uid, -1);
  const auto* st = L.find("stats");
  EXPECT_FALSE(st->in_workspace);
  EXPECT_GE(st->ragged_uid, 0);
  EXPECT_EQ(L.find("dq")->ragged_uid, L.find("q")->ragged_uid);
  EXPECT_EQ(L.find("dk")->ragged_uid, L.find("k")->ragged_uid);
}

TEST(CudnnLowering, DeclinesNameTheirReason) {
  auto declines = [](const op::Graph& g, std::initializer_list<std::string> needles) {
    test::expect_throw_with<NotSupported>([&] { lower(g); }, needles);
  };
  {
    SdpaShape s;
    s.dtype = DType::f32;
    declines(test::sdpa::sdpa_graph(s), {"cudnn", "f16 or bf16", "f32"});
  }
  {
    SdpaShape s;
    s.causal = true;
    s.s_q = 9, s.s_kv = 4;
    declines(test::sdpa::sdpa_graph(s), {"causal", "S_q 9 > S_kv 4", "9.19"});
  }
  {
    SdpaShape s;
    op::Graph g("virtual_o");
    g.op("sdpa", test::sdpa::sdpa_inputs(g, s), test::sdpa::sdpa_attrs(s, true));
    declines(g, {"o is virtual"});
  }
  {
    op::Graph g("pointwise");
    g.pointwise("exp", g.tensor({"x", {4}, DType::f16})).set_output(true);
    declines(g, {"no lowering for op exp"});
  }
  {
    SdpaShape s;
    op::Graph g("two_nodes");
    op::Tensor o = g.op("sdpa", test::sdpa::sdpa_inputs(g, s), {}).at("o");
    g.pointwise("exp", o).set_output(true);
    declines(g, {"one sdpa or sdpa_bwd node", "2 nodes"});
  }
  {
    SdpaShape s;
    s.ragged = true;
    op::Graph g("strided");
    op::Ports p = test::sdpa::sdpa_inputs(g, s);
    const op::Dims d = p[0].second.dims();
    p[0].second.set_strides({d[1] * d[2], 1, d[1]});  // a token's heads and dims swapped
    g.op("sdpa", p).at("o").set_output(true);
    declines(g, {"q must be [T, heads, dim] with each token's [heads, dim] contiguous", "THD"});
  }
  {
    SdpaShape s;
    s.ragged = true;
    op::Graph g("overlapping");
    op::Ports p = test::sdpa::sdpa_inputs(g, s);
    const op::Dims d = p[1].second.dims();
    p[1].second.set_strides({d[2], d[2], 1});  // tokens closer than a token's size
    g.op("sdpa", p).at("o").set_output(true);
    declines(g, {"k must be [T, heads, dim]", "at least heads * dim apart"});
  }
  {
    SdpaShape s;
    s.ragged = true;
    op::Graph g("cu_dtypes");
    op::Ports p = test::sdpa::sdpa_inputs(g, s);
    p[4].second.set_dtype(DType::i64);  // cu_seqlens_kv i64, cu_seqlens_q i32
    g.op("sdpa", p).at("o").set_output(true);
    declines(g, {"both be i32 or both i64"});
  }
  {
    // q, k, v packed qkv slices (tokens 3 H D apart), dq, dk, dv contiguous: cuDNN 9.19's THD
    // backward computed a wrong dq and NaN dk, dv on an H100 (session 28), so it is declined.
    SdpaShape s;
    s.ragged = true, s.one_cu = true;
    s.s_q = s.s_kv = 20, s.heads = s.kv_heads = 4, s.head_dim = s.value_dim = 16;
    op::Graph g = test::sdpa::sdpa_bwd_graph(s);
    for (const op::Node& n : g.nodes())
      for (const char* port : {"q", "k", "v"}) {
        op::Tensor t = n.input(port);
        t.set_strides({3 * 4 * 16, 16, 1});
      }
    declines(g, {"dq tokens 64 elements apart, q's 192", "laid out as its input"});
  }
}

}  // namespace
}  // namespace eagle
