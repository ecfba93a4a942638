// Running a planned graph on a device and on the reference engine (float64, CPU), for the
// engines' GPU tests: inputs copied over, outputs poisoned, a handle and a workspace as the plan
// asks, outputs back on the host by uid.
#pragma once

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "eagle/eagle.hpp"
#include "engines/reference/math/dense.hpp"
#include "test_util.hpp"

namespace eagle::test {

using Arrays = std::map<int64_t, Array>;  // by uid

inline const Device kGpu = Device::cuda(0);

// The graph's outputs (the node results the caller receives).
inline std::vector<op::Tensor> outputs(const op::Graph& g) {
  std::vector<op::Tensor> out;
  for (const op::Tensor& t : g.tensors())
    if (t.producer() >= 0 && !t.is_virtual()) out.push_back(t);
  return out;
}

// Runs the built plans over a filled variant pack on `device`: one handle of the plan's library,
// a workspace, a stream waited for.
inline void execute_pack(const plan::ExecutionPlans& plans, const plan::VariantPack& pack,
                         Device device) {
  const Stream stream(device);
  const std::size_t ws_bytes = plans.workspace_size();
  const Array ws =
      ws_bytes ? Array::empty({static_cast<int64_t>(ws_bytes)}, DType::u8, device) : Array();
  const Library* lib = plans.compiled()->library();
  void* handle = lib ? lib->create(device, stream.native()) : nullptr;
  plan::ExecutionContext ctx{stream.native(), handle, ws_bytes ? ws.data() : nullptr, ws_bytes};
  ctx.device = device;
  plans.execute(pack, ctx);
  stream.synchronize();
  if (lib) lib->destroy(handle);
}

// Runs a planned graph: inputs copied to `device`, outputs poisoned there, one handle of the
// plan's library and a workspace; returns the outputs on the host, by uid. `output_offset`: each
// output a view that starts that many elements into its storage (a caller's slice or a DLPack
// import may start at any element).
inline Arrays execute(const plan::ExecutionPlans& plans, const Arrays& host_in, Device device,
                      int64_t output_offset = 0) {
  plan::VariantPack pack(plans.layout());
  std::vector<Array> keep;
  for (const auto& [uid, a] : host_in) {
    keep.push_back(a.to(device));
    pack.set(uid, plan::Operand(keep.back()));
  }
  Arrays out;
  for (const op::Tensor& t : outputs(plans.graph())) {
    if (output_offset == 0) {
      out[t.uid()] = test::poisoned(t.dims(), t.dtype(), device);
    } else {
      const Array base =
          test::poisoned({reference::count(t.dims()) + output_offset}, t.dtype(), device);
      out[t.uid()] = Array::on_storage(base.storage(), t.dims(), t.dtype(),
                                       output_offset * static_cast<int64_t>(itemsize(t.dtype())));
    }
    pack.set(t.uid(), plan::Operand(out[t.uid()]));
  }
  execute_pack(plans, pack, device);
  for (auto& [uid, a] : out) a = a.to(Device::cpu());
  return out;
}

// A graph recorded once around a one-op graph's planned kernel (HeurMode::A): its read operands
// as params named after their tensors (bound to `in0` first), its outputs into NaN-poisoned
// arrays on `device`, built there. replay(in) binds every read operand to `in` (by uid), runs
// the graph and returns the outputs on the host by uid: what a recorded graph serving new
// batches without a rebuild gives.
class RecordedOp {
 public:
  RecordedOp(const op::Graph& og, const Arrays& in0, Device device, const std::string& label)
      : device_(device) {
    const Kernel k = engines::planned_kernel(og, {plan::HeurMode::A});
    for (const op::Tensor& t : og.operand_tensors()) (t.producer() < 0 ? in_ : out_).push_back(t);
    for (const op::Tensor& t : out_) outs_.push_back(poisoned(t.dims(), t.dtype(), device));
    graph_.emplace(Graph::record([&](Recorder& r) {
      std::vector<Arg> args;
      for (const op::Tensor& t : in_)
        args.emplace_back(r.param(t.name(), in0.at(t.uid()).to(device)));
      r.result(r.call_all(
          k, args,
          CallOptions{std::vector<std::variant<Array, Value>>(outs_.begin(), outs_.end()), label}));
    }));
    graph_->build(device);
  }

  Arrays replay(const Arrays& in) {
    for (const op::Tensor& t : in_) graph_->bind(t.name(), in.at(t.uid()).to(device_));
    const std::vector<Array>& ran = (*graph_)();
    Arrays got;
    for (std::size_t i = 0; i < out_.size(); ++i) got[out_[i].uid()] = ran[i].to(Device::cpu());
    return got;
  }

  const Graph& graph() const { return *graph_; }

 private:
  Device device_;
  std::vector<op::Tensor> in_, out_;
  std::vector<Array> outs_;
  std::optional<Graph> graph_;
};

inline Arrays reference(const op::Graph& g, const Arrays& in) {
  plan::ExecutionPlans ref = engines::create_execution_plans(g.clone(), Device::cpu());
  ref.build_plans();
  EXPECT_EQ(ref.name_at(ref.selected()), "reference");
  return execute(ref, in, Device::cpu());
}

// The reference engine checks that cu_seqlens ends at T, so a ragged op's batch with padding
// rows runs there as the same batch without them: `exact` is the one-node graph at T = L, whose
// per-token inputs (`per_token(port)`) get the first rows of `padded`'s inputs in `in` (copied
// as they are) and whose other inputs are `in`'s own. Its outputs come back under `padded`'s
// output uids, per-token ones grown with NaN rows where the padding was (never compared).
template <class PerToken>
Arrays reference_without_padding(const op::Graph& padded, const op::Graph& exact, const Arrays& in,
                                 PerToken per_token) {
  std::map<std::string, int64_t> uid;
  for (const auto& [port, t] : padded.nodes()[0].inputs()) uid[port] = t.uid();
  Arrays cut;
  for (const auto& [port, t] : exact.nodes()[0].inputs()) {
    const Array& a = in.at(uid.at(port));
    if (!per_token(port)) {
      cut[t.uid()] = a;
      continue;
    }
    const std::vector<double> v = values(a);
    const auto keep = static_cast<std::ptrdiff_t>(reference::count(t.dims()));
    cut[t.uid()] = from_doubles(std::vector<double>(v.begin(), v.begin() + keep), t.dims(),
                                t.dtype(), Device::cpu());
  }
  const Arrays ran = reference(exact, cut);
  Arrays want;
  std::map<std::string, int64_t> out_uid;
  for (const auto& [port, t] : exact.nodes()[0].outputs()) out_uid[port] = t.uid();
  for (const auto& [port, t] : padded.nodes()[0].outputs()) {
    if (t.is_virtual()) continue;
    std::vector<double> v = values(ran.at(out_uid.at(port)));
    v.resize(static_cast<std::size_t>(reference::count(t.dims())),
             std::numeric_limits<double>::quiet_NaN());
    want[t.uid()] = from_doubles(v, t.dims(), DType::f64, Device::cpu());
  }
  return want;
}

}  // namespace eagle::test
