// The matmul lowering (src/engines/cudnn/lowering_matmul.cpp): a matmul with its bias and a
// pointwise chain becomes cuDNN's [B, M, N] matmul with an epilogue; broadcast sides get stride
// 0; what cuDNN's fused matmul cannot express is declined by name.
#include <gtest/gtest.h>

#include "engines/cudnn/lowering.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using cudnn::lower;
using cudnn::Lowered;

TEST(CudnnMatmulLowering, BatchedMatmulWithBiasAndReluIsOneFusedChain) {
  op::Graph g("mm");
  const op::Tensor a = g.tensor({"a", {2, 3, 5, 16}, DType::bf16});
  const op::Tensor b = g.tensor({"b", {16, 8}, DType::bf16});  // broadcast over the batch
  const op::Tensor bias = g.tensor({"bias", {8}, DType::bf16});
  const op::Tensor c = g.matmul(a, b, bias);
  op::Tensor y = g.pointwise("relu", c);
  y.set_output(true);
  const Lowered L = lower(g);
  EXPECT_EQ(L.op, Lowered::Op::matmul);
  EXPECT_EQ(L.io, DType::bf16);
  EXPECT_EQ(L.batch, 6);
  ASSERT_GE(L.tensors.size(), 4u);
  EXPECT_EQ(L.tensors[0].uid, a.uid());
  EXPECT_EQ(L.tensors[0].rank, 3);
  EXPECT_EQ(L.tensors[0].dims, (std::array<int64_t, 4>{6, 5, 16, 1}));
  EXPECT_EQ(L.tensors[0].strides, (std::array<int64_t, 4>{5 * 16, 16, 1, 1}));
  EXPECT_EQ(L.tensors[1].dims, (std::array<int64_t, 4>{1, 16, 8, 1}));
  EXPECT_EQ(L.tensors[1].strides[0], 0);  // b broadcasts over the batch
  EXPECT_EQ(L.product, -1);               // the product is virtual: the bias add follows
  ASSERT_EQ(L.epilogue.size(), 2u);
  EXPECT_EQ(L.epilogue[0].op, "add");
  const cudnn::TensorDesc& bd = L.tensors[L.epilogue[0].other];
  EXPECT_EQ(bd.uid, bias.uid());
  EXPECT_EQ(bd.dims, (std::array<int64_t, 4>{1, 1, 8, 1}));
  EXPECT_EQ(bd.strides[1], 0);
  EXPECT_EQ(L.epilogue[0].out, -1);  // c is virtual
  EXPECT_EQ(L.epilogue[1].op, "relu");
  ASSERT_GE(L.epilogue[1].out, 0);
  EXPECT_EQ(L.tensors[L.epilogue[1].out].uid, y.uid());
  EXPECT_TRUE(L.tensors[L.epilogue[1].out].output);
  EXPECT_NE(L.summary().find("-> add -> relu"), std::string::npos) << L.summary();
}

TEST(CudnnMatmulLowering, PlainMatmulWritesTheProduct) {
  op::Graph g("mm");
  op::Tensor c = g.matmul(g.tensor({"a", {7, 9}, DType::f16}), g.tensor({"b", {9, 3}, DType::f16}));
  c.set_output(true);
  const Lowered L = lower(g);
  ASSERT_GE(L.product, 0);
  EXPECT_EQ(L.tensors[L.product].uid, c.uid());
  EXPECT_EQ(L.tensors[L.product].dims, (std::array<int64_t, 4>{1, 7, 3, 1}));
  EXPECT_TRUE(L.epilogue.empty());
}

TEST(CudnnMatmulLowering, TheChainValueMayBeTheSecondOperand) {
  op::Graph g("mm");
  const op::Tensor c =
      g.matmul(g.tensor({"a", {4, 8}, DType::f16}), g.tensor({"b", {8, 4}, DType::f16}));
  const op::Tensor r = g.tensor({"r", {4, 4}, DType::f16});
  g.pointwise("sub", r, c).set_output(true);
  const Lowered L = lower(g);
  ASSERT_EQ(L.epilogue.size(), 1u);
  EXPECT_FALSE(L.epilogue[0].chain_first);
  EXPECT_EQ(L.tensors[L.epilogue[0].other].uid, r.uid());
}

TEST(CudnnMatmulLowering, DeclinesNameTheirReason) {
  auto declines = [](const op::Graph& g, std::initializer_list<std::string> needles) {
    test::expect_throw_with<NotSupported>([&] { lower(g); }, needles);
  };
  {
    op::Graph g("f32");
    g.matmul(g.tensor({"a", {4, 8}}), g.tensor({"b", {8, 4}})).set_output(true);
    declines(g, {"f16 or bf16", "TF32"});
  }
  {
    op::Graph g("softplus");
    const op::Tensor c =
        g.matmul(g.tensor({"a", {4, 8}, DType::f16}), g.tensor({"b", {8, 4}, DType::f16}));
    g.pointwise("softplus", c).set_output(true);
    declines(g, {"no cuDNN epilogue lowering for pointwise op softplus"});
  }
  {
    op::Graph g("batch");
    g.matmul(g.tensor({"a", {2, 1, 4, 8}, DType::f16}), g.tensor({"b", {1, 3, 8, 4}, DType::f16}))
        .set_output(true);
    declines(g, {"batch dims must equal the result's or all be 1"});
  }
  {
    op::Graph g("branch");
    const op::Tensor c =
        g.matmul(g.tensor({"a", {4, 8}, DType::f16}), g.tensor({"b", {8, 4}, DType::f16}));
    const op::Tensor r = g.pointwise("relu", c);
    g.pointwise("add", r, c).set_output(true);  // c read again outside the chain
    declines(g, {"a second operand must be a graph input"});
  }
}

}  // namespace
}  // namespace eagle
