#include "engines/gemm_problem.hpp"

#include <algorithm>
#include <climits>
#include <optional>
#include <utility>

#include "eagle/core/error.hpp"

namespace eagle::engines {

namespace {

using op::Dims;

std::string dims_str(const Dims& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

// A tensor's dims and strides padded on the left to `rank` (size 1, stride 0), so they line up
// with the result's [batch..., M, N].
std::pair<Dims, Dims> aligned(const op::Tensor& t, std::size_t rank) {
  Dims d = t.dims(), s = t.strides();
  while (d.size() < rank) {
    d.insert(d.begin(), 1);
    s.insert(s.begin(), 0);
  }
  return {d, s};
}

// The one stride between consecutive batch slices, when the result's batch dims `bd` are
// flattened row-major, of an operand whose batch dims (aligned) are `d` with strides `s`: the
// operand's offset must be flat_index * stride. A broadcast dim (size 1 against a larger one)
// contributes stride 0. None when no single stride expresses it.
std::optional<int64_t> flat_batch_stride(const Dims& bd, const Dims& d, const Dims& s) {
  std::optional<int64_t> base;
  int64_t span = 1;  // batch slices under dim i
  for (std::size_t i = bd.size(); i-- > 0;) {
    if (bd[i] == 1) continue;
    const int64_t stride = d[i] == 1 ? 0 : s[i];
    if (!base)
      base = stride;
    else if (stride != *base * span)
      return std::nullopt;
    span *= bd[i];
  }
  return base.value_or(0);
}

// A [rows, cols] slice with strides (sr, sc) as cuBLASLt can read it: row-major (sc = 1) or
// column-major (sr = 1) with a leading dimension covering the other extent. Strides of a dim of
// size 1 do not matter.
std::optional<Matrix> matrix_of(int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
  if (cols == 1 || sc == 1) {
    const int64_t ld = rows == 1 ? cols : sr;
    if (ld >= cols) return Matrix{rows, cols, false, ld, 0};
  }
  if (rows == 1 || sr == 1) {
    const int64_t ld = cols == 1 ? rows : sc;
    if (ld >= rows) return Matrix{rows, cols, true, ld, 0};
  }
  return std::nullopt;
}

bool dense_row_major(const Dims& d, const Dims& s) {
  int64_t expect = 1;
  for (std::size_t i = d.size(); i-- > 0;) {
    if (d[i] != 1 && s[i] != expect) return false;
    expect *= d[i];
  }
  return true;
}

bool served_dtype(DType d) {
  return d == DType::f32 || d == DType::f16 || d == DType::bf16;
}

}  // namespace

std::string GemmProblem::describe() const {
  std::string s = std::string(dtype_name(dtype)) + " batch " + std::to_string(batch) + " M " +
                  std::to_string(m) + " N " + std::to_string(n) + " K " + std::to_string(k);
  if (a.col_major) s += ", a column-major";
  if (b.col_major) s += ", b column-major";
  if (bias_form == BiasForm::vector) s += ", bias vector";
  if (bias_form == BiasForm::matrix) s += ", bias matrix";
  if (epilogue == GemmEpilogue::relu) s += ", relu";
  if (epilogue == GemmEpilogue::gelu_tanh) s += ", gelu_tanh";
  if (epilogue == GemmEpilogue::gelu) s += product.defined() ? ", gelu (product kept)" : ", gelu";
  if (epilogue == GemmEpilogue::gelu_backward) s += ", gelu_backward";
  return s;
}

namespace {

[[noreturn]] void decline(const std::string& engine, const std::string& why) {
  throw NotSupported(engine + ": " + why);
}

// The pointwise node after the matmul, as an epilogue: sets p.epilogue, p.out, and p.product or
// p.tz where the form has one.
void read_epilogue(const op::Node& pw, const op::Tensor& c, GemmProblem& p,
                   const std::string& engine) {
  const auto& ins = pw.inputs();
  const bool reads_c = !ins.empty() && ins[0].second == c;
  if (pw.op() == "gelu_backward") {
    // gelu_backward(a, b) = a gelu'(b): the product must be the cotangent a, z = b from outside.
    if (!reads_c || ins.size() != 2 || ins[1].second == c)
      decline(engine,
              "gelu_backward after matmul must read the product as its cotangent (a) "
              "and z (b) from outside the graph");
    if (!c.is_virtual())
      decline(engine,
              "the matmul result is an output too; gelu_backward's epilogue needs it "
              "virtual");
    p.tz = ins[1].second;
    if (p.tz.producer() >= 0)
      decline(engine, "gelu_backward's z must be a graph input, not computed in the graph");
    p.epilogue = GemmEpilogue::gelu_backward;
    p.out = pw.output("out");
    return;
  }
  if (pw.schema().kind != op::OpKind::pointwise || ins.size() != 1 || !reads_c)
    decline(engine,
            "the node after matmul must be one unary pointwise node reading its result "
            "(or gelu_backward reading it as the cotangent), not " +
                pw.op());
  if (pw.op() == "relu") {
    p.epilogue = GemmEpilogue::relu;
  } else if (pw.op() == "gelu_tanh") {
    p.epilogue = GemmEpilogue::gelu_tanh;
  } else if (pw.op() == "gelu") {
    p.epilogue = GemmEpilogue::gelu;
  } else {
    decline(engine, "no GEMM epilogue for pointwise op " + pw.op() +
                        " (served: relu, gelu_tanh, gelu, gelu_backward)");
  }
  if (!c.is_virtual()) {
    if (p.epilogue != GemmEpilogue::gelu)
      decline(engine, "the matmul result is an output too; a " + pw.op() +
                          " epilogue needs it virtual (only gelu's keeps it)");
    p.product = c;
  }
  p.out = pw.output("out");
}

// gelu_backward's z: [M, N] like the result, each row's elements packed, one row per output row
// (the batch folded into the rows, as the result's).
void read_z(GemmProblem& p, const std::string& engine) {
  const Dims& d = p.tz.dims();
  const Dims& s = p.tz.strides();
  if (d != p.out.dims())
    decline(engine, "gelu_backward's z has dims " + dims_str(d) + ", the result " +
                        dims_str(p.out.dims()) + ": they must match (no broadcast)");
  if (!dense_row_major(d, s))
    decline(engine, "gelu_backward's z must be dense row-major, its strides are " + dims_str(s));
  p.z = Matrix{p.m, p.n, false, p.n, p.m * p.n};
}

// One of f32, f16, bf16 throughout (f32 accumulation).
void read_dtype(const op::Tensor& c, GemmProblem& p, const std::string& engine) {
  p.dtype = p.ta.dtype();
  if (!served_dtype(p.dtype))
    decline(engine, "serves f32, f16 and bf16 operands, not " + std::string(dtype_name(p.dtype)));
  for (const op::Tensor& t : {p.tb, p.tbias, c, p.out, p.tz})
    if (t.defined() && t.dtype() != p.dtype)
      decline(engine, "operands must share one dtype: " + t.name() + " is " +
                          std::string(dtype_name(t.dtype())) + ", a is " +
                          std::string(dtype_name(p.dtype)));
}

// a or b: row- or column-major slices, one batch stride over the result's batch dims `bd`.
Matrix read_operand(const op::Tensor& t, const char* what, const Dims& bd,
                    const std::string& engine) {
  const std::size_t rank = bd.size() + 2;
  const auto [d, s] = aligned(t, rank);
  std::optional<Matrix> mat = matrix_of(d[rank - 2], d[rank - 1], s[rank - 2], s[rank - 1]);
  if (!mat)
    decline(engine, std::string(what) + " has strides " + dims_str(t.strides()) +
                        ": its last two dims are neither row-major nor column-major (a "
                        "transposed layout); make it contiguous first");
  const std::optional<int64_t> stride =
      flat_batch_stride(bd, Dims(d.begin(), d.end() - 2), Dims(s.begin(), s.end() - 2));
  if (!stride)
    decline(engine, std::string(what) + " dims " + dims_str(t.dims()) + " strides " +
                        dims_str(t.strides()) + " against the batch " + dims_str(bd) +
                        ": no single batch stride expresses its batch dims (broadcast inner "
                        "batch dims under outer ones)");
  mat->batch_stride = *stride;
  return *mat;
}

// The bias: a [N] vector broadcast over rows (BIAS epilogue), or a full matrix added as C.
void read_bias(const Dims& bd, GemmProblem& p, const std::string& engine) {
  const std::size_t rank = bd.size() + 2;
  const auto [d, s] = aligned(p.tbias, rank);
  const int64_t bm = d[rank - 2], bn = d[rank - 1];
  const std::string what = "bias dims " + dims_str(p.tbias.dims());
  if (bn == 1 && p.n > 1)
    decline(engine, what +
                        " broadcast along N (one value per row); cuBLASLt adds a bias vector "
                        "along N or a full [M, N] matrix");
  const std::optional<int64_t> stride =
      flat_batch_stride(bd, Dims(d.begin(), d.end() - 2), Dims(s.begin(), s.end() - 2));
  if (!stride)
    decline(engine, what + " strides " + dims_str(p.tbias.strides()) +
                        ": no single batch stride expresses its batch dims");
  if (bm == 1) {
    if (p.n > 1 && s[rank - 1] != 1)
      decline(engine, "a bias vector must be packed (stride 1 along N), its strides are " +
                          dims_str(p.tbias.strides()));
    p.bias_form = BiasForm::vector;
    p.bias = Matrix{1, p.n, false, p.n, *stride};
    return;
  }
  const std::optional<Matrix> mat = matrix_of(bm, bn, s[rank - 2], s[rank - 1]);
  if (!mat || mat->col_major)
    decline(engine, "a bias matrix must be row-major like the result, its strides are " +
                        dims_str(p.tbias.strides()));
  // Whether cuBLASLt applies the activation after beta * C as well is not what every version's
  // documentation says: a full bias with an activation is not fused.
  if (p.epilogue != GemmEpilogue::none)
    decline(engine,
            "a full [M, N] bias with an epilogue is not fused (only a bias vector along N)");
  p.bias_form = BiasForm::matrix;
  p.bias = *mat;
  p.bias.batch_stride = *stride;
}

// A batch of row-major a slices that sit one after another (stride M * ld) against one shared b
// is one GEMM of batch * M rows: the result is dense row-major, so its slices stack the same way.
// One large GEMM rather than a strided batch of small ones (a linear layer over [B, T, D]).
void fold_batch_into_rows(GemmProblem& p) {
  if (p.batch == 1 || p.b.batch_stride != 0 || p.a.col_major || p.a.batch_stride != p.m * p.a.ld ||
      p.bias_form == BiasForm::matrix ||
      (p.bias_form == BiasForm::vector && p.bias.batch_stride != 0))
    return;
  p.m *= p.batch;
  p.a.rows = p.m;
  p.batch = 1;
  p.a.batch_stride = p.b.batch_stride = p.bias.batch_stride = 0;
}

}  // namespace

void StrideRule::explain(const plan::OperandBuffer& b, const std::string& engine) const {
  if (match(b)) return;
  throw InvalidArgument(engine + ": operand " + name + " has strides " +
                        dims_str(Dims(b.strides, b.strides + b.ndim)) +
                        "; the plan was built for " + dims_str(Dims(strides, strides + ndim)) +
                        " (plan the graph with the layout the call brings)");
}

StrideRule stride_rule(const plan::OperandLayout& layout, const op::Tensor& t,
                       const std::string& engine) {
  if (t.dims().size() > static_cast<std::size_t>(plan::kMaxOperandDims))
    throw NotSupported(engine + ": " + t.name() + " has more than " +
                       std::to_string(plan::kMaxOperandDims) + " dims");
  StrideRule r;
  r.position = layout.index_of(t);
  r.ndim = static_cast<int32_t>(t.dims().size());
  std::copy(t.dims().begin(), t.dims().end(), r.dims);
  std::copy(t.strides().begin(), t.strides().end(), r.strides);
  r.name = t.name();
  return r;
}

GemmProblem gemm_problem(const op::Graph& graph, const std::string& engine) {
  const std::vector<op::Node> nodes = graph.nodes();
  if (nodes.empty() || nodes[0].op() != "matmul" || nodes.size() > 2)
    decline(engine,
            "serves one matmul, optionally followed by one relu, gelu_tanh, gelu or "
            "gelu_backward node");
  GemmProblem p;
  const op::Node& mm = nodes[0];
  const op::Tensor c = mm.output("c");
  p.ta = mm.input("a");
  p.tb = mm.input("b");
  p.tbias = mm.input("bias");
  p.out = c;
  if (nodes.size() == 2) read_epilogue(nodes[1], c, p, engine);
  if (p.out.is_virtual()) decline(engine, "the result is virtual (set_output(true) to receive it)");
  read_dtype(c, p, engine);

  // Sizes and the flattened batch.
  const Dims& cd = c.dims();
  p.m = cd[cd.size() - 2];
  p.n = cd[cd.size() - 1];
  p.k = p.ta.dims().back();
  if (p.m == 0 || p.n == 0 || p.k == 0)
    decline(engine, "empty sizes (M " + std::to_string(p.m) + ", N " + std::to_string(p.n) +
                        ", K " + std::to_string(p.k) + ") are not served");
  const Dims bd(cd.begin(), cd.end() - 2);
  for (int64_t d : bd) p.batch *= d;
  if (p.batch > INT_MAX)
    decline(engine, "a batch of " + std::to_string(p.batch) + " exceeds cuBLASLt's int");
  if (!dense_row_major(p.out.dims(), p.out.strides()))
    decline(engine, "the result " + p.out.name() + " must be dense row-major, its strides are " +
                        dims_str(p.out.strides()));

  p.a = read_operand(p.ta, "a", bd, engine);
  p.b = read_operand(p.tb, "b", bd, engine);
  if (p.tbias.defined()) read_bias(bd, p, engine);
  if (p.product.defined() && !dense_row_major(p.product.dims(), p.product.strides()))
    decline(engine, "the kept product " + p.product.name() +
                        " must be dense row-major, its strides are " +
                        dims_str(p.product.strides()));
  fold_batch_into_rows(p);
  if (p.tz.defined()) read_z(p, engine);
  return p;
}

}  // namespace eagle::engines
