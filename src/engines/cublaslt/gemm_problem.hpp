// The GEMM a matmul graph poses, in the terms cuBLASLt takes: sizes, one flattened batch, each
// operand's storage order, leading dimension and batch stride, the bias form and the epilogue.
// Pure analysis of the op graph (no CUDA): what it cannot express it declines with NotSupported.
#pragma once

#include <cstdint>
#include <string>

#include "eagle/core/dtype.hpp"
#include "eagle/op/graph.hpp"

namespace eagle::cublaslt {

// The pointwise node folded into the GEMM. cuBLASLt's GELU epilogue is the tanh approximation
// (torch uses it only for gelu(approximate="tanh")), so it serves gelu_tanh and not gelu (erf).
enum class Epilogue : uint8_t { none, relu, gelu_tanh };

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
  Epilogue epilogue = Epilogue::none;
  op::Tensor ta, tb, tbias;      // the graph's operands (tbias undefined without a bias)
  op::Tensor out;                // what the plan writes: matmul's c, or the epilogue node's output
  std::string describe() const;  // "bf16 batch 8 M 127 N 129 K 65, a column-major, ..."
};

// The problem `graph` poses: one matmul (2-D or batched, batch dims broadcast), optionally one
// relu or gelu_tanh node reading its virtual output. Throws NotSupported naming `engine` and the
// rule for anything else (other nodes, dtypes, layouts that are neither row- nor column-major,
// batch broadcasts that no single batch stride expresses, bias shapes cuBLASLt cannot add).
GemmProblem gemm_problem(const op::Graph& graph, const std::string& engine);

}  // namespace eagle::cublaslt
