// The GEMM a matmul graph poses (src/engines/gemm_problem.cpp): storage orders, leading
// dimensions, flattened batch strides, bias forms and epilogues read from the op graph, the
// declines for what no GEMM engine expresses, and cuBLASLt's own (engines/cublaslt/gemm_plan.hpp).
// Pure analysis: runs without a GPU.
#include "engines/gemm_problem.hpp"

#include "engines/cublaslt/gemm_plan.hpp"

#include <gtest/gtest.h>

#include "test_util.hpp"

namespace eagle::engines {
namespace {

using op::Dims;

op::Tensor input(op::Graph& g, const std::string& name, Dims dims, Dims strides = {},
                 DType dtype = DType::f32) {
  return g.tensor({name, std::move(dims), dtype, std::move(strides)});
}

void expect_decline(const op::Graph& g, std::initializer_list<std::string> needles) {
  test::expect_throw_with<NotSupported>([&] { gemm_problem(g, "cublaslt"); }, needles);
}

// What cuBLASLt's engine checks: the problem, then the epilogues it has.
void expect_cublaslt_decline(const op::Graph& g, std::initializer_list<std::string> needles) {
  test::expect_throw_with<NotSupported>(
      [&] { cublaslt::require_cublaslt_epilogue(gemm_problem(g, "cublaslt"), "cublaslt"); },
      needles);
}

TEST(GemmProblem, TwoDRowMajor) {
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
  EXPECT_EQ(p.epilogue, GemmEpilogue::none);
  EXPECT_TRUE(p.out == g.nodes()[0].output("c"));
}

TEST(GemmProblem, TransposesThroughStrides) {
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

TEST(GemmProblem, PaddedRowsKeepTheirLeadingDimension) {
  op::Graph g;
  g.matmul(input(g, "a", {3, 7}, {16, 1}), input(g, "b", {7, 5})).set_output(true);
  EXPECT_EQ(gemm_problem(g, "cublaslt").a.ld, 16);
}

TEST(GemmProblem, BatchesFlattenWithBroadcastAsStrideZero) {
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

TEST(GemmProblem, BiasVectorAndMatrix) {
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

TEST(GemmProblem, Epilogues) {
  for (const auto& [op, want] :
       {std::pair{"relu", GemmEpilogue::relu}, std::pair{"gelu_tanh", GemmEpilogue::gelu_tanh}}) {
    op::Graph g;
    const op::Tensor c = g.matmul(input(g, "a", {3, 7}), input(g, "b", {7, 5}), input(g, "z", {5}));
    const op::Tensor y = g.pointwise(op, c).set_output(true);
    const GemmProblem p = gemm_problem(g, "cublaslt");
    EXPECT_EQ(p.epilogue, want) << op;
    EXPECT_EQ(p.bias_form, BiasForm::vector);
    EXPECT_TRUE(p.out == y);
  }
}

TEST(GemmProblem, GeluKeepsItsProduct) {
  op::Graph g;
  op::Tensor c = g.matmul(input(g, "a", {2, 3, 8}), input(g, "b", {8, 16}));
  c.set_output(true);
  const op::Tensor y = g.pointwise("gelu", c).set_output(true);
  const GemmProblem p = gemm_problem(g, "native_gemm");
  EXPECT_EQ(p.epilogue, GemmEpilogue::gelu);
  EXPECT_TRUE(p.product == c);
  EXPECT_TRUE(p.out == y);
  EXPECT_EQ(p.m, 6);  // the batch folded into the rows
  EXPECT_EQ(p.batch, 1);
  expect_cublaslt_decline(g, {"gelu (erf form)"});
}

TEST(GemmProblem, GeluBackwardReadsZ) {
  op::Graph g;  // dx = gelu_backward(g W^T, z), W^T a transposed view of W [16, 8]
  const op::Tensor w = input(g, "w", {8, 16}, {1, 8});
  const op::Tensor z = input(g, "z", {4, 16});
  const op::Tensor dx = g.pointwise("gelu_backward", g.matmul(input(g, "g", {4, 8}), w), z);
  op::Tensor(dx).set_output(true);
  const GemmProblem p = gemm_problem(g, "native_gemm");
  EXPECT_EQ(p.epilogue, GemmEpilogue::gelu_backward);
  EXPECT_TRUE(p.tz == z);
  EXPECT_TRUE(p.b.col_major);
  EXPECT_EQ(p.b.ld, 8);
  EXPECT_EQ(p.z.ld, 16);
  EXPECT_FALSE(p.product.defined());
  expect_cublaslt_decline(g, {"gelu_backward"});
}

TEST(GemmProblemDeclines, GeluBackwardForms) {
  {
    op::Graph g;  // the product as z, not as the cotangent
    const op::Tensor c = g.matmul(input(g, "a", {4, 8}), input(g, "b", {8, 16}));
    g.pointwise("gelu_backward", input(g, "d", {4, 16}), c).set_output(true);
    expect_decline(g, {"gelu_backward after matmul must read the product as its cotangent"});
  }
  {
    op::Graph g;  // z broadcast
    const op::Tensor c = g.matmul(input(g, "a", {4, 8}), input(g, "b", {8, 16}));
    g.pointwise("gelu_backward", c, input(g, "z", {16})).set_output(true);
    expect_decline(g, {"z has dims [16]", "must match"});
  }
  {
    op::Graph g;  // z transposed
    const op::Tensor c = g.matmul(input(g, "a", {4, 8}), input(g, "b", {8, 16}));
    g.pointwise("gelu_backward", c, input(g, "z", {4, 16}, {1, 4})).set_output(true);
    expect_decline(g, {"z must be dense row-major"});
  }
  {
    op::Graph g;  // the product kept
    op::Tensor c = g.matmul(input(g, "a", {4, 8}), input(g, "b", {8, 16}));
    c.set_output(true);
    g.pointwise("gelu_backward", c, input(g, "z", {4, 16})).set_output(true);
    expect_decline(g, {"gelu_backward's epilogue needs it virtual"});
  }
}

// ---- declines ----

TEST(GemmProblemDeclines, GeluErfFormAndOtherPointwiseOps) {
  {
    op::Graph g;
    g.pointwise("gelu", g.matmul(input(g, "a", {3, 7}), input(g, "b", {7, 5}))).set_output(true);
    expect_cublaslt_decline(g, {"cublaslt", "gelu (erf form)", "tanh approximation"});
  }
  {
    op::Graph g;
    g.pointwise("sigmoid", g.matmul(input(g, "a", {3, 7}), input(g, "b", {7, 5}))).set_output(true);
    expect_decline(g, {"no GEMM epilogue for pointwise op sigmoid"});
  }
}

TEST(GemmProblemDeclines, GraphShapes) {
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
    expect_decline(g, {"a relu epilogue needs it virtual", "only gelu's keeps it"});
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

TEST(GemmProblemDeclines, Layouts) {
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

TEST(GemmProblemDeclines, BiasShapes) {
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

TEST(GemmProblemDeclines, Dtypes) {
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
}  // namespace eagle::engines
