// cuDNN's THD attention over a packed qkv array (GPU; skips without one or without cuDNN): q, k
// and v are column slices of one [T, 3 * H * D] array (one qkv projection's output, as
// FlashAttention's qkvpacked varlen and Transformer Engine's t3hd layout), tokens 3 * H * D
// apart; the backward writes dq, dk and dv into the slices of one such array. Against the
// reference on the same values held contiguously (fresh random inputs, padding rows NaN, the
// packed outputs poisoned first); tolerances as test_sdpa_gpu.cpp.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_runs.hpp"
#include "sdpa_check.hpp"
#include "sdpa_graphs.hpp"

namespace eagle {
namespace {

using test::Arrays;
using test::cudnn::cudnn_plans;
using test::cudnn::CudnnGpu;
using test::cudnn::kGpu;
using test::cudnn::reference;
using test::sdpa::Layout;
using test::sdpa::SdpaShape;

const char* const kQkv[] = {"q", "k", "v"};

// The tensor of `g`'s one node at port `port` (an input, or an output: dq, dk, dv).
op::Tensor named(const op::Graph& g, const std::string& port) {
  const op::Node n = g.nodes().at(0);
  const op::Tensor in = n.input(port);
  if (in.defined()) return in;
  const op::Tensor out = n.output(port);
  if (out.defined()) return out;
  throw std::logic_error("no port " + port);
}

// A clone of `g` whose tensors named in `names` are declared as slices of a packed [T, 3 H D].
op::Graph packed(const op::Graph& g, const std::vector<std::string>& names, int64_t row) {
  op::Graph out = g.clone();
  for (const std::string& n : names) {
    op::Tensor t = named(out, n);
    t.set_strides({row, t.dims()[2], 1});
  }
  return out;
}

// One [T, 3 H D] array on the GPU holding q | k | v of `in` (by name in `g`), and the views of it.
struct Packed {
  Array base;
  Array views[3];
};
Packed pack(const op::Graph& g, const Arrays& in, int64_t rows, int64_t width, DType dtype) {
  Packed p;
  std::vector<double> host(static_cast<std::size_t>(rows * 3 * width), 0.0);
  for (int j = 0; j < 3; ++j) {
    const std::vector<double> v = in.at(named(g, kQkv[j]).uid()).to_vector<double>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < width; ++c)
        host[static_cast<std::size_t>(r * 3 * width + j * width + c)] =
            v[static_cast<std::size_t>(r * width + c)];
  }
  p.base = test::from_doubles(host, {rows, 3 * width}, dtype, kGpu);
  return p;
}
void slice_views(Packed& p, const op::Graph& g, int64_t width) {
  const auto item = static_cast<int64_t>(itemsize(p.base.dtype()));
  for (int j = 0; j < 3; ++j) {
    const op::Tensor t = named(g, kQkv[j]);
    p.views[j] = Array::wrap(static_cast<char*>(p.base.data()) + j * width * item, t.dims(),
                             p.base.dtype(), kGpu, t.strides(), p.base.storage());
  }
}

// Runs the built plans over the given GPU operands (by uid; the outputs among them written).
void run(const plan::ExecutionPlans& plans, const std::map<int64_t, Array>& operands) {
  plan::VariantPack vp(plans.layout());
  for (const auto& [uid, a] : operands) vp.set(uid, plan::Operand(a));
  test::execute_pack(plans, vp, kGpu);
}

// dq, dk and dv are written into slices of one packed array (q's layout), as the reverse pass
// lays them out. Contiguous gradients of packed inputs are declined by the lowering (cuDNN 9.19
// computed a wrong dq and NaN dk, dv on an H100 in session 28:
// CudnnLowering.DeclinesNameTheirReason).
void packed_case(DType d, bool one_cu) {
  SCOPED_TRACE(std::string(dtype_name(d)) + (one_cu ? ", self-attention" : ", two cu"));
  SdpaShape s;
  s.dtype = d, s.heads = s.kv_heads = 4, s.head_dim = s.value_dim = 64;
  s.causal = one_cu, s.one_cu = one_cu;
  // Two cu_seqlens (as many rows on both sides: one array): a sequence with keys and no
  // queries, whose dk, dv rows the plan zeroes (in the packed array: only their k and v
  // slices).
  const Layout l = one_cu ? test::sdpa::thd({7, 0, 1, 33, 12}, {7, 0, 1, 33, 12}, 5)
                          : test::sdpa::thd({7, 0, 1, 33, 12}, {7, 4, 1, 29, 12}, 5);
  s = test::sdpa::shape_for(s, l);
  const int64_t rows = s.s_q, width = s.heads * s.head_dim, row = 3 * width;

  const op::Graph fwd = test::sdpa::sdpa_graph(s);
  const Arrays fin = test::sdpa::random_inputs(fwd, l);
  const Arrays fout = reference(fwd, fin);
  const op::Graph pfwd = packed(fwd, {"q", "k", "v"}, row);
  Packed in = pack(fwd, fin, rows, width, d);
  slice_views(in, pfwd, width);
  std::map<int64_t, Array> ops;
  for (int j = 0; j < 3; ++j) ops[named(pfwd, kQkv[j]).uid()] = in.views[j];
  for (const auto& [uid, a] : fin)
    if (!ops.count(uid)) ops[uid] = a.to(kGpu);
  Arrays got;
  for (const op::Tensor& t : test::outputs(pfwd))
    ops[t.uid()] = got[t.uid()] = test::poisoned(t.dims(), t.dtype(), kGpu);
  run(cudnn_plans(pfwd), ops);
  for (auto& [uid, a] : got) a = a.to(Device::cpu());
  test::sdpa::compare(fwd, l, got, fout, 1.0);

  const op::Graph bwd = test::sdpa::sdpa_bwd_graph(s);
  const Arrays bin = test::sdpa::backward_inputs(fwd, fin, fout, bwd, l);
  const op::Graph pbwd = packed(bwd, {"q", "k", "v", "dq", "dk", "dv"}, row);
  Packed bq = pack(bwd, bin, rows, width, d);
  slice_views(bq, pbwd, width);
  Packed grads;
  grads.base = test::poisoned({rows, row}, d, kGpu);
  std::map<int64_t, Array> bops;
  for (int j = 0; j < 3; ++j) bops[named(pbwd, kQkv[j]).uid()] = bq.views[j];
  for (const auto& [uid, a] : bin)
    if (!bops.count(uid)) bops[uid] = a.to(kGpu);
  for (int j = 0; j < 3; ++j) {
    const op::Tensor t = named(pbwd, std::string("d") + kQkv[j]);
    const auto item = static_cast<int64_t>(itemsize(d));
    bops[t.uid()] = Array::wrap(static_cast<char*>(grads.base.data()) + j * width * item, t.dims(),
                                d, kGpu, t.strides(), grads.base.storage());
  }
  run(cudnn_plans(pbwd), bops);
  Arrays bgot;
  for (const op::Tensor& t : test::outputs(pbwd))
    bgot[t.uid()] = bops.at(t.uid()).to(Device::cpu());
  test::sdpa::compare(bwd, l, bgot, reference(bwd, bin), 2.0);
}

TEST_F(CudnnGpu, PackedQkvSlicesOfOneArrayMatchTheReference) {
  for (DType d : {DType::f16, DType::bf16})
    for (bool one_cu : {true, false}) packed_case(d, one_cu);
}

}  // namespace
}  // namespace eagle
