// The GEMM a matmul graph poses, in the terms GEMM libraries take (cuBLASLt, our CUTLASS GEMMs):
// sizes, one flattened batch, each operand's storage order, leading dimension and batch stride,
// the bias form and the epilogue. Pure analysis of the op graph (no CUDA): what no GEMM engine
// could express it declines with NotSupported; each engine then declines what it alone lacks.
#pragma once

#include <cstdint>
#include <string>

#include "eagle/core/dtype.hpp"
#include "eagle/op/graph.hpp"
#include "eagle/plan/operands.hpp"

namespace eagle::engines {

// The pointwise node folded into the GEMM: relu, gelu_tanh or gelu (erf) of the product, or
// gelu_backward(product, z) (the product the cotangent, z a graph input [M, N]: a backward's
// dx = g W^T with the derivative of the gelu before it). cuBLASLt's GELU epilogue is the tanh
// approximation (torch uses it only for gelu(approximate="tanh")).
enum class GemmEpilogue : uint8_t { none, relu, gelu_tanh, gelu, gelu_backward };

// How the matmul's bias is added: none; a vector along N broadcast over rows (and over the batch
// when its batch stride is 0), cuBLASLt's BIAS epilogue; or a full [M, N] matrix added as C with
// beta = 1.
enum class BiasForm : uint8_t { none, vector, matrix };

// One stored operand in eagle's row-major view (a [M, K], b [K, N], a bias matrix [M, N]).
struct Matrix {
  int64_t rows = 0, cols = 0;
  bool col_major = false;    // stored column-major: a transposed layout reached through strides
  int64_t ld = 0;            // elements between rows (row-major) or columns (column-major)
  int64_t batch_stride = 0;  // elements between batch slices; 0: one slice broadcast
};

struct GemmProblem {
  DType dtype = DType::f32;  // of a, b, bias and the result
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;  // the output's batch dims flattened (folded into M where a stacks: see .cpp)
  Matrix a, b;
  BiasForm bias_form = BiasForm::none;
  Matrix bias;  // a vector uses only batch_stride
  GemmEpilogue epilogue = GemmEpilogue::none;
  op::Tensor ta, tb, tbias;  // the graph's operands (tbias undefined without a bias)
  op::Tensor out;            // what the plan writes: matmul's c, or the epilogue node's output
  // With an epilogue: the matmul's c when the graph outputs it too (gelu only: the derivative
  // reads it); else undefined.
  op::Tensor product;
  op::Tensor tz;                 // gelu_backward's z (undefined otherwise)
  Matrix z;                      // its [M, N] slice, row-major
  std::string describe() const;  // "bf16 batch 8 M 127 N 129 K 65, a column-major, ..."
};

// The problem `graph` poses: one matmul (2-D or batched, batch dims broadcast), optionally one
// pointwise node after it: relu, gelu_tanh or gelu reading its output (virtual, or for gelu
// output too), or gelu_backward reading it (virtual) as the cotangent. Throws NotSupported naming
// `engine` and the rule for anything else (other nodes, dtypes, layouts that are neither row-
// nor column-major, batch broadcasts that no single batch stride expresses, bias shapes no GEMM
// adds).
GemmProblem gemm_problem(const op::Graph& graph, const std::string& engine);

// The per-call check that an operand arrives with the strides its plan was read from (a GEMM's
// leading dimensions and storage orders are fixed at build).
struct StrideRule {
  int position = -1;
  int32_t ndim = 0;
  int64_t dims[plan::kMaxOperandDims] = {};
  int64_t strides[plan::kMaxOperandDims] = {};
  std::string name;  // read only by explain()
  bool match(const plan::OperandBuffer& b) const noexcept {
    for (int32_t i = 0; i < ndim; ++i)
      if (dims[i] != 1 && b.strides[i] != strides[i]) return false;
    return true;
  }
  // Throws InvalidArgument naming the operand, its strides and the plan's, when !match(b).
  void explain(const plan::OperandBuffer& b, const std::string& engine) const;
};
StrideRule stride_rule(const plan::OperandLayout& layout, const op::Tensor& t,
                       const std::string& engine);

}  // namespace eagle::engines
