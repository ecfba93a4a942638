// The norm case of the lowering: layer_norm and rms_norm forward over the trailing
// normalized_ndim dims become cuDNN's layernorm / rmsnorm on x seen as [N, C, 1, 1] (N the
// leading dims, C the normalized ones), training phase when eagle receives the statistics.
#include "eagle/core/error.hpp"
#include "engines/cudnn/lowering.hpp"

namespace eagle::cudnn {

namespace {

[[noreturn]] void decline(const std::string& why) {
  throw NotSupported("cudnn: " + why);
}

bool row_major(const op::Tensor& t) {
  int64_t expect = 1;
  for (std::size_t i = t.dims().size(); i-- > 0;) {
    if (t.dims()[i] != 1 && t.strides()[i] != expect) return false;
    expect *= t.dims()[i];
  }
  return true;
}

TensorDesc desc(const std::string& name, const op::Tensor& t, int64_t rows, int64_t cols,
                bool output) {
  if (!row_major(t)) decline(name + " must be dense row-major");
  TensorDesc d;
  d.name = name;
  d.uid = t.uid();
  d.dtype = t.dtype();
  d.output = output;
  d.dims = {rows, cols, 1, 1};
  d.strides = {cols, 1, cols, cols};
  return d;
}

}  // namespace

Lowered lower_norm(const op::Graph& graph) {
  const op::Node n = graph.nodes()[0];
  Lowered L;
  const bool layer = n.op() == "layer_norm";
  L.op = layer ? Lowered::Op::layer_norm : Lowered::Op::rms_norm;
  const op::Tensor x = n.input("x"), scale = n.input("scale"), bias = n.input("bias");
  L.io = x.dtype();
  if (L.io != DType::f16 && L.io != DType::bf16 && L.io != DType::f32)
    decline(n.op() + " runs in f32, f16 or bf16, not " + std::string(dtype_name(L.io)));
  if (!scale.defined()) decline(n.op() + " without scale: cuDNN's norms multiply by one");
  if (layer && !bias.defined()) decline("layer_norm without bias: cuDNN's layernorm adds one");
  const int64_t nd = n.attr("normalized_ndim").as_int("normalized_ndim");
  const op::Dims& d = x.dims();
  int64_t rows = 1, cols = 1;
  for (std::size_t i = 0; i < d.size(); ++i) (i + nd < d.size() ? rows : cols) *= d[i];
  L.batch = rows;
  L.epsilon = n.attr("epsilon").as_real("epsilon");
  L.tensors.push_back(desc("x", x, rows, cols, false));
  L.tensors.push_back(desc("scale", scale, 1, cols, false));
  if (bias.defined()) L.tensors.push_back(desc("bias", bias, 1, cols, false));
  const op::Tensor y = n.output("y");
  if (y.is_virtual()) decline("y is virtual: cuDNN writes it to a caller buffer (set_output)");
  L.tensors.push_back(desc("y", y, rows, cols, true));
  // Training when the caller receives every statistic; virtual statistics are not computed.
  const std::vector<const char*> stats = layer ? std::vector<const char*>{"mean", "inv_variance"}
                                               : std::vector<const char*>{"inv_rms"};
  L.stats = true;
  for (const char* s : stats)
    L.stats = L.stats && n.output(s).defined() && !n.output(s).is_virtual();
  if (L.stats)
    for (const char* s : stats) {
      if (n.output(s).dtype() != DType::f32) decline(std::string(s) + " must be f32");
      TensorDesc t = desc(s, n.output(s), rows, 1, true);
      t.strides = {1, 1, 1, 1};
      L.tensors.push_back(t);
    }
  return L;
}

}  // namespace eagle::cudnn
