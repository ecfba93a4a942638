// The GEMM a matmul graph poses (src/engines/cublaslt/gemm_problem.cpp): storage orders, leading
// dimensions, flattened batch strides, bias forms and epilogues read from the op graph, and the
// declines for what cuBLASLt cannot express. Pure analysis: runs without a GPU.
#include "engines/cublaslt/gemm_problem.hpp"

#include <gtest/gtest.h>

#include "test_util.hpp"

namespace eagle::cublaslt {
namespace {

using op::Dims;

op::Tensor input(op::Graph& g, const std::string& name, Dims dims, Dims strides = {},
                 DType dtype = DType::f32) {
  return g.tensor({name, std::move(dims), dtype, std::move(strides)});
}

void expect_decline(const op::Graph& g, std::initializer_list<std::string> needles) {
  test::expect_throw_with<NotSupported>([&] { gemm_problem(g, "cublaslt"); }, needles);
}

TEST(CublasLtProblem, TwoDRowMajor) {
  op::Graph g;
  g.matmul(input(g, "a", {3, 7}), input(g, "b", {7, 5})).set_output(true);
  const GemmProblem p = gemm_problem(g, "cublaslt");
  EXPECT_EQ(p.m, 3);
  EXPECT_EQ(p.n, 5);
  EXPECT_EQ(p.k, 7);
  EXPECT_EQ(p.batch, 1);
  EXPECT_FALSE(p.a.col_major);
  EXPECT_FALSE(p.b.col_major);
  EXPECT_EQ(p.a.ld, 7);
  EXPECT_EQ(p.b.ld, 5);
  EXPECT_EQ(p.bias_form, BiasForm::none);
  EXPECT_EQ(p.epilogue, Epilogue::none);
  EXPECT_TRUE(p.out == g.nodes()[0].output("c"));
}

TEST(CublasLtProblem, TransposesThroughStrides) {
  op::Graph g;
  // a [M=3, K=7] stored as [7, 3] row-major; b [K=7, N=5] stored as [5, 7] row-major.
  g.matmul(input(g, "a", {3, 7}, {1, 3}), input(g, "b", {7, 5}, {1, 7})).set_output(true);
  const GemmProblem p = gemm_problem(g, "cublaslt");
  EXPECT_TRUE(p.a.col_major);
  EXPECT_EQ(p.a.ld, 3);
  EXPECT_TRUE(p.b.col_major);
  EXPECT_EQ(p.b.ld, 7);
  EXPECT_NE(p.describe().find("a column-major"), std::string::npos);
}

TEST(CublasLtProblem, PaddedRowsKeepTheirLeadingDimension) {
  op::Graph g;
  g.matmul(input(g, "a", {3, 7}, {16, 1}), input(g, "b", {7, 5})).set_output(true);
  EXPECT_EQ(gemm_problem(g, "cublaslt").a.ld, 16);
}

TEST(CublasLtProblem, BatchesFlattenWithBroadcastAsStrideZero) {
  {
    op::Graph g;  // a [2,3,M,K] stacked, against a shared b [K,N]: one GEMM of 6 * M rows
    g.matmul(input(g, "a", {2, 3, 4, 6}), input(g, "b", {6, 5})).set_output(true);
    const GemmProblem p = gemm_problem(g, "cublaslt");
    EXPECT_EQ(p.batch, 1);
    EXPECT_EQ(p.m, 24);
    EXPECT_EQ(p.a.rows, 24);
    EXPECT_EQ(p.a.ld, 6);
  }
  {
    op::Graph g;  // the same, with a slice stride that does not stack the rows: stays a batch
    g.matmul(input(g, "a", {2, 3, 4, 6}, {144, 48, 6, 1}), input(g, "b", {6, 5})).set_output(true);
    const GemmProblem p = gemm_problem(g, "cublaslt");
    EXPECT_EQ(p.batch, 6);
    EXPECT_EQ(p.m, 4);
    EXPECT_EQ(p.a.batch_stride, 48);
    EXPECT_EQ(p.b.batch_stride, 0);
  }
  {
    op::Graph g;  // a shared a [1,M,K] against b [4,K,N]
    g.matmul(input(g, "a", {1, 4, 6}), input(g, "b", {4, 6, 5})).set_output(true);
    const GemmProblem p = gemm_problem(g, "cublaslt");
    EXPECT_EQ(p.batch, 4);
    EXPECT_EQ(p.a.batch_stride, 0);
    EXPECT_EQ(p.b.batch_stride, 30);
  }
  {
    op::Graph g;  // a batched, column-major b with padded batch slices
    g.matmul(input(g, "a", {3, 4, 6}), input(g, "b", {3, 6, 5}, {40, 1, 8})).set_output(true);
    const GemmProblem p = gemm_problem(g, "cublaslt");
    EXPECT_TRUE(p.b.col_major);
    EXPECT_EQ(p.b.ld, 8);
    EXPECT_EQ(p.b.batch_stride, 40);
  }
}

TEST(CublasLtProblem, BiasVectorAndMatrix) {
  {
    op::Graph g;  // a linear layer: folded into one GEMM, one bias vector
    g.matmul(input(g, "a", {2, 4, 6}), input(g, "b", {6, 5}), input(g, "bias", {5}))
        .set_output(true);
    const GemmProblem p = gemm_problem(g, "cublaslt");
    EXPECT_EQ(p.bias_form, BiasForm::vector);
    EXPECT_EQ(p.bias.batch_stride, 0);
    EXPECT_EQ(p.batch, 1);
    EXPECT_EQ(p.m, 8);
  }
  {
    op::Graph g;  // one bias vector per batch slice: stays a batch
    g.matmul(input(g, "a", {2, 4, 6}), input(g, "b", {6, 5}), input(g, "bias", {2, 1, 5}))
        .set_output(true);
    const GemmProblem p = gemm_problem(g, "cublaslt");
    EXPECT_EQ(p.bias_form, BiasForm::vector);
    EXPECT_EQ(p.bias.batch_stride, 5);
    EXPECT_EQ(p.batch, 2);
  }
  {
    op::Graph g;  // a full [M, N] bias, shared by the batch: added as C, stays a batch
    g.matmul(input(g, "a", {2, 4, 6}), input(g, "b", {6, 5}), input(g, "bias", {4, 5}))
        .set_output(true);
    const GemmProblem p = gemm_problem(g, "cublaslt");
    EXPECT_EQ(p.bias_form, BiasForm::matrix);
    EXPECT_EQ(p.batch, 2);
    EXPECT_EQ(p.bias.ld, 5);
    EXPECT_EQ(p.bias.batch_stride, 0);
  }
}

TEST(CublasLtProblem, Epilogues) {
  for (const auto& [op, want] :
       {std::pair{"relu", Epilogue::relu}, std::pair{"gelu_tanh", Epilogue::gelu_tanh}}) {
    op::Graph g;
    const op::Tensor c = g.matmul(input(g, "a", {3, 7}), input(g, "b", {7, 5}), input(g, "z", {5}));
    const op::Tensor y = g.pointwise(op, c).set_output(true);
    const GemmProblem p = gemm_problem(g, "cublaslt");
    EXPECT_EQ(p.epilogue, want) << op;
    EXPECT_EQ(p.bias_form, BiasForm::vector);
    EXPECT_TRUE(p.out == y);
  }
}

// ---- declines ----

TEST(CublasLtProblemDeclines, GeluErfFormAndOtherPointwiseOps) {
  {
    op::Graph g;
    g.pointwise("gelu", g.matmul(input(g, "a", {3, 7}), input(g, "b", {7, 5}))).set_output(true);
    expect_decline(g, {"cublaslt", "gelu (erf form)", "tanh approximation"});
  }
  {
    op::Graph g;
    g.pointwise("sigmoid", g.matmul(input(g, "a", {3, 7}), input(g, "b", {7, 5}))).set_output(true);
    expect_decline(g, {"no cuBLASLt epilogue for pointwise op sigmoid"});
  }
}

TEST(CublasLtProblemDeclines, GraphShapes) {
  {
    op::Graph g;  // two pointwise nodes after the matmul
    g.pointwise("relu", g.pointwise("relu", g.matmul(input(g, "a", {3, 7}), input(g, "b", {7, 5}))))
        .set_output(true);
    expect_decline(g, {"serves one matmul"});
  }
  {
    op::Graph g;  // the pre-activation result is wanted too
    op::Tensor c = g.matmul(input(g, "a", {3, 7}), input(g, "b", {7, 5}));
    c.set_output(true);
    g.pointwise("relu", c).set_output(true);
    expect_decline(g, {"an epilogue needs it virtual"});
  }
  {
    op::Graph g;  // a binary node after the matmul
    const op::Tensor c = g.matmul(input(g, "a", {3, 7}), input(g, "b", {7, 5}));
    g.pointwise("add", c, input(g, "z", {3, 5})).set_output(true);
    expect_decline(g, {"one unary pointwise node"});
  }
  {
    op::Graph g;
    g.pointwise("relu", input(g, "x", {3, 5})).set_output(true);
    expect_decline(g, {"serves one matmul"});
  }
}

TEST(CublasLtProblemDeclines, Layouts) {
  {
    op::Graph g;  // neither row- nor column-major: every other element of a row
    g.matmul(input(g, "a", {3, 7}, {14, 2}), input(g, "b", {7, 5})).set_output(true);
    expect_decline(g, {"a has strides [14,2]", "neither row-major nor column-major"});
  }
  {
    op::Graph g;  // broadcast rows through stride 0 inside the matrix
    g.matmul(input(g, "a", {3, 7}), input(g, "b", {7, 5}, {0, 1})).set_output(true);
    expect_decline(g, {"b has strides [0,1]"});
  }
  {
    op::Graph g;  // an inner batch dim broadcast under an outer one
    g.matmul(input(g, "a", {2, 1, 4, 6}), input(g, "b", {3, 6, 5})).set_output(true);
    expect_decline(g, {"a dims [2,1,4,6]", "no single batch stride"});
  }
  {
    op::Graph g;  // a column-major result
    op::Tensor c = g.matmul(input(g, "a", {3, 7}), input(g, "b", {7, 5}));
    c.set_strides({1, 3}).set_output(true);
    expect_decline(g, {"must be dense row-major"});
  }
}

TEST(CublasLtProblemDeclines, BiasShapes) {
  {
    op::Graph g;  // one bias per row
    g.matmul(input(g, "a", {3, 7}), input(g, "b", {7, 5}), input(g, "z", {3, 1})).set_output(true);
    expect_decline(g, {"bias dims [3,1]", "broadcast along N"});
  }
  {
    op::Graph g;  // a column-major bias matrix
    g.matmul(input(g, "a", {3, 7}), input(g, "b", {7, 5}), input(g, "z", {3, 5}, {1, 3}))
        .set_output(true);
    expect_decline(g, {"bias matrix must be row-major"});
  }
  {
    op::Graph g;  // a full bias with an epilogue
    g.pointwise("relu",
                g.matmul(input(g, "a", {3, 7}), input(g, "b", {7, 5}), input(g, "z", {3, 5})))
        .set_output(true);
    expect_decline(g, {"full [M, N] bias with an epilogue"});
  }
}

TEST(CublasLtProblemDeclines, Dtypes) {
  {
    op::Graph g;
    g.matmul(input(g, "a", {3, 7}, {}, DType::f64), input(g, "b", {7, 5}, {}, DType::f64))
        .set_output(true);
    expect_decline(g, {"serves f32, f16 and bf16", "f64"});
  }
  {
    op::Graph g;
    g.matmul(input(g, "a", {3, 7}, {}, DType::bf16), input(g, "b", {7, 5}, {}, DType::f16))
        .set_output(true);
    expect_decline(g, {"share one dtype", "f16", "bf16"});
  }
}

}  // namespace
}  // namespace eagle::cublaslt
