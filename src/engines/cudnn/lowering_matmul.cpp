// The matmul case of the lowering: a matmul (with its bias) followed by a chain of pointwise
// nodes, each reading the previous result and at most one graph input broadcast to it, becomes
// cuDNN's matmul with a fused pointwise epilogue. Batch dims are flattened to one ([B, M, N]);
// a side whose batch dims are all 1 broadcasts with batch stride 0.
#include <set>

#include "eagle/core/error.hpp"
#include "engines/cudnn/lowering.hpp"

namespace eagle::cudnn {

namespace {

[[noreturn]] void decline(const std::string& why) {
  throw NotSupported("cudnn: " + why);
}

// eagle's pointwise ops with a cuDNN mode of the same definition on finite values; others
// (max and min among them: eagle propagates NaN through them, cuDNN's NaN rule is not
// documented) are declined by name.
const std::set<std::string>& epilogue_ops() {
  static const std::set<std::string> ops = {
      "identity", "neg",  "abs",       "exp", "log", "sqrt", "rsqrt", "tanh",         "sigmoid",
      "relu",     "gelu", "gelu_tanh", "add", "sub", "mul",  "div",   "gelu_backward"};
  return ops;
}

class MatmulLowering {
 public:
  explicit MatmulLowering(const op::Graph& g) : graph_(g) {}

  Lowered run() {
    const std::vector<op::Node> nodes = graph_.nodes();
    const op::Node& mm = nodes[0];
    const op::Tensor a = mm.input("a"), b = mm.input("b"), bias = mm.input("bias");
    const op::Tensor c = mm.output("c");
    L_.op = Lowered::Op::matmul;
    L_.io = a.dtype();
    if (L_.io != DType::f16 && L_.io != DType::bf16)
      decline(
          "matmul runs in f16 or bf16 (f32 operands would run in TF32 in cuDNN's fused "
          "matmul); a is " +
          std::string(dtype_name(L_.io)));
    if (b.dtype() != L_.io) decline("matmul: b must have a's dtype");
    const op::Dims& cd = c.dims();
    out_rank_ = cd.size();
    batch_ = op::Dims(cd.begin(), cd.end() - 2);
    L_.batch = 1;
    for (int64_t d : batch_) L_.batch *= d;
    m_ = cd[cd.size() - 2];
    n_ = cd.back();
    const int64_t k = a.dims().back();
    add_operand("a", a, m_, k);
    add_operand("b", b, k, n_);
    op::Tensor value = c;  // the chain's value
    if (bias.defined()) {
      PointwiseStep add_bias{"add", add_broadcast("bias", bias), true, -1};
      L_.epilogue.push_back(add_bias);
    }
    int last_out = add_result(c, "c");  // -1 when c is virtual
    if (bias.defined())
      L_.epilogue.back().out = last_out;
    else
      L_.product = last_out;
    for (std::size_t i = 1; i < nodes.size(); ++i) {
      const op::Node& n = nodes[i];
      const std::string where = "node " + std::to_string(i) + " (" + n.op() + ")";
      if (!epilogue_ops().count(n.op()))
        decline(
            where + ": no cuDNN epilogue lowering for pointwise op " + n.op() +
            " (lowered: relu, gelu, gelu_tanh, gelu_backward, tanh, sigmoid, add, sub, mul, div, "
            "exp, log, sqrt, rsqrt, abs, neg, identity)");
      const op::Tensor in_a = n.input("a"), in_b = n.input("b"), out = n.output("out");
      PointwiseStep step{n.op(), -1, true, -1};
      if (in_a == value) {
        if (in_b.defined()) step.other = add_broadcast("node" + std::to_string(i) + ".b", in_b);
      } else if (in_b.defined() && in_b == value) {
        step.chain_first = false;
        step.other = add_broadcast("node" + std::to_string(i) + ".a", in_a);
      } else {
        decline(where + ": the epilogue must be a chain, each node reading the previous result");
      }
      if (in_b.defined() && in_a == in_b) decline(where + " reads the chain's value twice");
      if (out.dims() != cd || out.dtype() != L_.io)
        decline(where + ": its result must keep the matmul's dims and dtype");
      step.out = add_result(out, "node" + std::to_string(i) + ".out");
      L_.epilogue.push_back(step);
      value = out;
    }
    if (value.is_virtual())
      decline("the last result is virtual: cuDNN writes it to a caller buffer");
    return L_;
  }

 private:
  // Dims of `t` right-aligned to the result's rank (missing leading dims are 1).
  op::Dims aligned(const op::Tensor& t) const {
    op::Dims d(out_rank_, 1);
    const op::Dims& td = t.dims();
    if (td.size() > out_rank_) decline(t.name() + " has more dims than the result");
    for (std::size_t i = 0; i < td.size(); ++i) d[out_rank_ - td.size() + i] = td[i];
    return d;
  }
  op::Dims aligned_strides(const op::Tensor& t) const {
    op::Dims s(out_rank_, 0);
    const op::Dims& ts = t.strides();
    for (std::size_t i = 0; i < ts.size(); ++i) s[out_rank_ - ts.size() + i] = ts[i];
    return s;
  }

  // The batch extent and stride of a tensor's leading dims: 1 (broadcast) when all are 1, the
  // result's batch when they equal it and flatten to one stride.
  std::pair<int64_t, int64_t> batch_of(const op::Tensor& t, const op::Dims& d,
                                       const op::Dims& s) const {
    const std::size_t nb = out_rank_ - 2;
    bool ones = true, same = true;
    for (std::size_t i = 0; i < nb; ++i) {
      ones = ones && d[i] == 1;
      same = same && d[i] == batch_[i];
    }
    if (ones) return {1, 0};
    if (!same)
      decline(t.name() +
              ": batch dims must equal the result's or all be 1 (cuDNN's matmul has one "
              "batch dim)");
    for (std::size_t i = 0; i + 1 < nb; ++i)
      if (d[i] > 1 && s[i] != s[i + 1] * d[i + 1])
        decline(t.name() + ": its batch dims do not flatten to one stride");
    return {L_.batch, nb ? s[nb - 1] : 0};
  }

  void add_operand(const char* name, const op::Tensor& t, int64_t rows, int64_t cols) {
    if (t.ragged_offset().defined()) decline(std::string(name) + " has a ragged offset");
    const op::Dims d = aligned(t), s = aligned_strides(t);
    const auto [bd, bs] = batch_of(t, d, s);
    TensorDesc x;
    x.name = name;
    x.uid = t.uid();
    x.dtype = t.dtype();
    x.rank = 3;
    x.dims = {bd, rows, cols, 1};
    x.strides = {bs, s[out_rank_ - 2], s[out_rank_ - 1], 1};
    L_.tensors.push_back(x);
  }

  // A graph input broadcast to the result ([B or 1, M or 1, N or 1]).
  int add_broadcast(const std::string& name, const op::Tensor& t) {
    if (t.producer() >= 0) decline(name + ": a second operand must be a graph input");
    if (t.dtype() != L_.io) decline(name + ": must have the matmul's dtype");
    const op::Dims d = aligned(t), s = aligned_strides(t);
    const auto [bd, bs] = batch_of(t, d, s);
    const int64_t r = d[out_rank_ - 2], c = d[out_rank_ - 1];
    if ((r != 1 && r != m_) || (c != 1 && c != n_))
      decline(name + " does not broadcast to the result");
    TensorDesc x;
    x.name = name;
    x.uid = t.uid();
    x.dtype = t.dtype();
    x.rank = 3;
    x.dims = {bd, r, c, 1};
    x.strides = {bs, r == 1 ? 0 : s[out_rank_ - 2], c == 1 ? 0 : s[out_rank_ - 1], 1};
    L_.tensors.push_back(x);
    return static_cast<int>(L_.tensors.size()) - 1;
  }

  // A node's result: an output the caller receives (a tensor of the variant pack), or -1.
  int add_result(const op::Tensor& t, const std::string& name) {
    if (t.is_virtual()) return -1;
    const op::Dims s = aligned_strides(t);
    TensorDesc x;
    x.name = name;
    x.uid = t.uid();
    x.dtype = t.dtype();
    x.rank = 3;
    x.output = true;
    const std::size_t nb = out_rank_ - 2;
    for (std::size_t i = 0; i + 1 < nb; ++i)
      if (s[i] != s[i + 1] * batch_[i + 1])
        decline(name + ": its batch dims do not flatten to one stride");
    x.dims = {L_.batch, m_, n_, 1};
    x.strides = {nb ? s[nb - 1] : m_ * n_, s[out_rank_ - 2], s[out_rank_ - 1], 1};
    L_.tensors.push_back(x);
    return static_cast<int>(L_.tensors.size()) - 1;
  }

  const op::Graph& graph_;
  Lowered L_;
  std::size_t out_rank_ = 2;
  op::Dims batch_;
  int64_t m_ = 0, n_ = 0;
};

}  // namespace

Lowered lower_matmul(const op::Graph& graph) {
  return MatmulLowering(graph).run();
}

}  // namespace eagle::cudnn
