// The derivative of a planned operation: for the outputs that receive a cotangent and the inputs
// whose gradient is wanted, op::backward builds the backward graph (and the recompute graph of
// the intermediates the forward keeps to itself) once per such combination; the rule records a
// call of each as a planned kernel, reading the forward's operands (saved when overwritten), the
// cotangents and rank-0 constants, and returns the backward's outputs as the inputs' cotangents.
//
// Across rules: a backward's last lone matmul making a gradient (dx = dy W^T) is deferred
// (Recorder::call_deferred). When the next rule's backward starts with a pointwise node reading
// that gradient as its cotangent (gelu_backward(dx, z) of the layer below), it takes the matmul
// over: its backward graph gains the matmul in front, and planned_segments fuses the two into one
// kernel (the matmul's epilogue). Anything else that reads the gradient records the matmul first.
#include "engines/planned_derivative.hpp"

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "eagle/core/error.hpp"
#include "eagle/engines/planned_kernel.hpp"
#include "eagle/graph/derivative.hpp"
#include "eagle/kernel/standard.hpp"
#include "eagle/op/backward.hpp"
#include "engines/planned_kernel_of.hpp"
#include "graph/state.hpp"
#include "graph/view_layout.hpp"

namespace eagle::engines::detail {

namespace {

using Grads = std::vector<std::optional<Value>>;

// A deferred lone matmul of a backward, for the next rule to take over: its op graph.
struct ProductTag final : Recorder::DeferredTag {
  explicit ProductTag(const op::Graph& g) : graph(g) {
    const op::Node mm = graph.nodes().front();
    for (const char* port : {"a", "b"}) {
      const op::Tensor t = mm.input(port);
      signature +=
          std::string(dtype_name(t.dtype())) + shape_str(t.dims()) + shape_str(t.strides()) + " ";
    }
  }
  op::Graph graph;        // one matmul node, no bias: inputs a, b; output c
  std::string signature;  // its operands' dtypes, dims and strides (the cache key's part)
};

struct Entry {
  op::BackwardGraph backward;
  // The planned segments of backward.recompute and .graph (engines::planned_segments).
  std::vector<PlannedSegment> recompute, kernel;
  // Inputs of backward.graph read from a taken-over matmul's arguments (its a and b), in order.
  std::vector<op::Tensor> taken;
  // The segments of `kernel` recorded deferred, by index: each a lone matmul whose output is a
  // gradient that no later segment reads.
  std::map<std::size_t, std::shared_ptr<const ProductTag>> deferred;
};

// The segments of `g` as planned kernels (planned_segments), and `e.deferred`.
std::vector<PlannedSegment> plan_backward(const op::Graph& g, const std::vector<op::Tensor>& grads,
                                          const PlanningOptions& options,
                                          const plan::Manifest& manifest, Entry* e) {
  if (g.nodes().empty()) return {};  // planned_segments (validating its graph) refuses it
  g.validate();
  // Not differentiated again: an epilogue's matmul product stays virtual.
  std::vector<Segment> segs = segments(g, options.fuse_epilogues, false);
  std::set<int64_t> gradient_uids, read_later;
  for (const op::Tensor& t : grads)
    if (t.defined()) gradient_uids.insert(t.uid());
  for (std::size_t i = segs.size(); i-- > 0;) {
    const std::vector<op::Node> nodes = segs[i].graph.nodes();
    if (e && options.fuse_epilogues && nodes.size() == 1 && nodes[0].op() == "matmul" &&
        !nodes[0].input("bias").defined() && segs[i].outputs.size() == 1 &&
        gradient_uids.count(segs[i].outputs[0]) && !read_later.count(segs[i].outputs[0]))
      e->deferred[i] = std::make_shared<const ProductTag>(segs[i].graph.clone());
    read_later.insert(segs[i].inputs.begin(), segs[i].inputs.end());
  }
  return planned_kernels_of(std::move(segs), options, manifest);
}

// Whether `b`'s first node is a pointwise node reading the cotangent of forward output `uid`,
// read through one input of `b` of the dims `dims` (so a matmul making that cotangent fuses
// with it as its epilogue).
bool starts_with_pointwise_reading(const op::BackwardGraph& b, int64_t uid, const op::Dims& dims) {
  const std::vector<op::Node> nodes = b.graph.nodes();
  if (nodes.empty() || nodes[0].schema().kind != op::OpKind::pointwise) return false;
  op::Tensor input;
  for (const auto& [t, src] : b.inputs) {
    if (src.kind != op::Source::Kind::cotangent || src.uid != uid) continue;
    if (input.defined() || src.transposed || t.dims() != dims) return false;
    input = t;
  }
  if (!input.defined()) return false;
  for (const auto& [port, t] : nodes[0].inputs())
    if (t == input) return true;
  return false;
}

class PlannedRule final : public VjpRule {
 public:
  PlannedRule(const op::Graph& graph, PlanningOptions options, const plan::Manifest& manifest)
      : graph_(graph.clone()),
        operands_(graph_.operand_tensors()),
        options_(std::move(options)),
        manifest_(manifest) {
    for (std::size_t k = 0; k < operands_.size(); ++k)
      slot_[operands_[k].uid()] = static_cast<int>(k);
  }

  Grads vjp(Recorder& r, const VjpArgs& a) const override {
    std::vector<op::Tensor> cots, wrt;
    std::vector<int> wrt_slot;
    std::string key;
    for (std::size_t k = 0; k < operands_.size(); ++k) {
      const op::Tensor& t = operands_[k];
      const bool in = t.producer() < 0;
      const bool take = in ? (a.wanted[k] && is_floating(t.dtype())) : a.cotangents[k].has_value();
      key += take ? '1' : '0';
      if (!take) continue;
      if (in) {
        wrt.push_back(t);
        wrt_slot.push_back(static_cast<int>(k));
      } else {
        cots.push_back(t);
      }
    }
    Grads out(operands_.size());
    if (cots.empty() || wrt.empty()) return out;
    const Entry* chosen = &entry(key, cots, wrt);
    if (chosen->kernel.empty()) return out;
    // A cotangent whose matmul the previous rule deferred, taken over when this backward starts
    // with a pointwise node reading it.
    std::map<int64_t, Value> taken;
    for (const op::Tensor& t : cots) {
      const Value& v = *a.cotangents[static_cast<std::size_t>(slot_.at(t.uid()))];
      const auto* tag = dynamic_cast<const ProductTag*>(r.deferred_tag(v));
      if (!tag || !starts_with_pointwise_reading(chosen->backward, t.uid(),
                                                 tag->graph.nodes()[0].output("c").dims()))
        continue;
      chosen = &absorbed_entry(key, *chosen, t.uid(), *tag);
      const std::vector<Arg> args = r.take_deferred(v);
      for (std::size_t i = 0; i < chosen->taken.size(); ++i)
        taken[chosen->taken[i].uid()] = std::get<Value>(args[i].get());
      break;
    }
    const Entry& e = *chosen;

    std::map<int64_t, Value> recomputed;  // recompute output uid -> value
    auto value_of = [&](const op::Tensor& t, const op::Source& s) -> Value {
      Value v;
      switch (s.kind) {
        case op::Source::Kind::forward:
          v = a.arrays[static_cast<std::size_t>(slot_.at(s.uid))];
          break;
        case op::Source::Kind::cotangent:
          v = *a.cotangents[static_cast<std::size_t>(slot_.at(s.uid))];
          break;
        case op::Source::Kind::recomputed:
          v = recomputed.at(s.uid);
          break;
        case op::Source::Kind::constant: {  // one fill per value in this arm
          const Value c = r.constant(s.value, t.dtype());
          return t.dims().empty() ? c : c.broadcast_to(t.dims());
        }
      }
      const int rank = static_cast<int>(v.shape().size());
      if (s.transposed) return v.transpose(rank - 2, rank - 1);
      return v.shape() == t.dims() ? v : v.reshape(t.dims());  // a cotangent in keepdim dims
    };
    recomputed = run(r, e.recompute, e.backward.recompute_inputs, value_of, {}, {});
    const std::map<int64_t, Value> by_uid = run(r, e.kernel, e.backward.inputs, value_of, taken,
                                                e.deferred, laid_out_gradients(r, e, a, wrt_slot));
    for (std::size_t w = 0; w < wrt.size(); ++w)
      if (const op::Tensor& g = e.backward.gradients[w]; g.defined())
        out[static_cast<std::size_t>(wrt_slot[w])] = by_uid.at(g.uid());
    return out;
  }

  // Every forward operand some backward of this graph reads: the union, over each floating
  // output alone, of what its backward with respect to every floating input reads (a
  // combination of outputs reads the union of what each reads; an output whose backward is
  // refused takes part in no backward). All operands when a backward fails otherwise.
  bool reads(int slot) const override {
    std::call_once(reads_once_, [&] {
      std::vector<op::Tensor> outs, wrt;
      for (const op::Tensor& t : operands_) {
        if (!is_floating(t.dtype())) continue;
        (t.producer() < 0 ? wrt : outs).push_back(t);
      }
      for (const op::Tensor& o : outs) {
        try {
          const op::BackwardGraph b = op::backward(graph_, {o}, wrt);
          for (const auto* list : {&b.inputs, &b.recompute_inputs})
            for (const auto& [t, s] : *list)
              if (s.kind == op::Source::Kind::forward) reads_.insert(s.uid);
        } catch (const NotSupported&) {
          // never differentiated through: reads nothing
        } catch (const Error&) {
          for (const op::Tensor& t : operands_) reads_.insert(t.uid());
        }
      }
    });
    return reads_.count(operands_[static_cast<std::size_t>(slot)].uid()) != 0;
  }

 private:
  const Entry& entry(const std::string& key, const std::vector<op::Tensor>& cots,
                     const std::vector<op::Tensor>& wrt) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) return *it->second;
    auto e = std::make_shared<Entry>();
    try {
      e->backward = op::backward(graph_, cots, wrt);
    } catch (const NotSupported& err) {
      throw NotSupported("planned kernel '" + graph_.name() + "': " + err.what());
    }
    e->recompute = plan_backward(e->backward.recompute, {}, options_, manifest_, nullptr);
    e->kernel =
        plan_backward(e->backward.graph, e->backward.gradients, options_, manifest_, e.get());
    return *entries_.emplace(key, std::move(e)).first->second;
  }

  // `base`'s backward with the deferred matmul `tag` in front, making the cotangent of forward
  // output `uid` (virtual), so that planned_segments fuses it with the pointwise node reading it.
  const Entry& absorbed_entry(const std::string& key, const Entry& base, int64_t uid,
                              const ProductTag& tag) const {
    const std::string full = key + "|" + std::to_string(uid) + "|" + tag.signature;
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = entries_.find(full); it != entries_.end()) return *it->second;
    auto e = std::make_shared<Entry>();
    const op::Graph& from = base.backward.graph;
    op::Graph g(from.name());
    const op::Node mm = tag.graph.nodes().front();
    for (const char* port : {"a", "b"}) {
      const op::Tensor t = mm.input(port);
      e->taken.push_back(
          g.tensor({std::string("taken.") + port, t.dims(), t.dtype(), t.strides()}));
    }
    const op::Tensor product = g.matmul(e->taken[0], e->taken[1]);
    std::map<int, op::Tensor> to;  // tensor index in `from` -> tensor of g
    for (const auto& [t, src] : base.backward.inputs) {
      if (src.kind == op::Source::Kind::cotangent && src.uid == uid) {
        to[t.index()] = product;
        continue;
      }
      to[t.index()] = g.tensor({t.name(), t.dims(), t.dtype(), t.strides()});
      e->backward.inputs.emplace_back(to[t.index()], src);
    }
    for (const auto& [t, src] : base.backward.inputs)
      if (t.ragged_offset().defined())
        to.at(t.index()).set_ragged_offset(to.at(t.ragged_offset().index()));
    for (const op::Node& n : from.nodes()) {
      op::Ports ports;
      for (const auto& [port, t] : n.inputs()) ports.emplace_back(port, to.at(t.index()));
      const op::Attrs attrs(n.attrs().begin(), n.attrs().end());
      std::map<std::string, op::Tensor> outs = g.op(n.op(), ports, attrs, n.name());
      for (const auto& [port, t] : n.outputs()) {
        op::Tensor& o = outs.at(port);
        to[t.index()] = o;
        if (!t.is_virtual()) o.set_output(true).set_name(t.name());
      }
    }
    for (const op::Tensor& t : base.backward.gradients)
      e->backward.gradients.push_back(t.defined() ? to.at(t.index()) : op::Tensor());
    e->backward.graph = g;
    e->backward.recompute_inputs = base.backward.recompute_inputs;
    e->recompute = base.recompute;
    e->kernel = plan_backward(g, e->backward.gradients, options_, manifest_, e.get());
    return *entries_.emplace(full, std::move(e)).first->second;
  }

  // Where the gradients declared in their input's strided layout (sdpa's dq, dk, dv of packed
  // qkv slices) go, by gradient uid: views laid out as the forward's views of their input, in
  // one new array per forward buffer, shaped as that buffer (so slices of one packed array get
  // slices of one gradient array). Empty when every gradient is row-major.
  static std::map<int64_t, Value> laid_out_gradients(Recorder& r, const Entry& e, const VjpArgs& a,
                                                     const std::vector<int>& wrt_slot) {
    std::map<int64_t, Value> into;
    std::map<int, Value> base;                         // forward buffer -> its gradients' array
    std::map<int, std::vector<NodeArgInfo>> views_of;  // forward buffer -> the views written
    for (std::size_t w = 0; w < wrt_slot.size(); ++w) {
      const op::Tensor& g = e.backward.gradients[w];
      if (!g.defined() || g.strides() == contiguous_strides(g.dims())) continue;
      const Value& fv = a.arrays[static_cast<std::size_t>(wrt_slot[w])];
      if (fv.strides() != g.strides() || fv.shape() != g.dims() || fv.dtype() != g.dtype())
        continue;  // not the forward's layout: the call allocates it (and its plan refuses)
      auto it = base.find(fv.buffer());
      if (it == base.end()) {
        const BufferInfo& b = r.recording().buffers()[static_cast<std::size_t>(fv.buffer())];
        it = base.emplace(fv.buffer(), r.empty(b.shape, b.dtype, "grad " + b.label)).first;
      }
      const Value view = r.view(it->second.buffer(), it->second.byte_offset() + fv.byte_offset(),
                                fv.shape(), fv.dtype(), fv.strides());
      views_of[fv.buffer()].push_back(view_arg_info("", Access::write, view.buffer(),
                                                    view.byte_offset(), view.shape(), view.dtype(),
                                                    view.strides()));
      into.emplace(g.uid(), view);
    }
    // Zero where no gradient lands, so that the reverse pass may take the whole array as the
    // buffer's cotangent (Adjoints::adopt) instead of gathering each view out of it; views that
    // cover it (q, k, v slices of one packed array) leave no such place.
    for (const auto& [b, array] : base) {
      const BufferInfo& info = r.recording().buffers()[static_cast<std::size_t>(b)];
      if (!eagle::detail::views_tile(views_of[b], static_cast<int64_t>(info.bytes)))
        r.call(kernels::fill(), {0.0}, buffer(array));
    }
    return into;
  }

  // Records the calls of a derived graph's segments, its inputs from `sources` and `values`
  // (taken-over arguments), the `deferred` ones deferred, outputs named in `into` written there
  // (the others allocated); returns every value made, by the graph's uids (its outputs among
  // them).
  template <class ValueOf>
  static std::map<int64_t, Value> run(
      Recorder& r, const std::vector<PlannedSegment>& calls,
      const std::vector<std::pair<op::Tensor, op::Source>>& sources, ValueOf& value_of,
      std::map<int64_t, Value> values,
      const std::map<std::size_t, std::shared_ptr<const ProductTag>>& deferred,
      const std::map<int64_t, Value>& into = {}) {
    for (const auto& [t, s] : sources) values[t.uid()] = value_of(t, s);
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const PlannedSegment& c = calls[i];
      std::vector<Arg> args;
      for (int64_t uid : c.inputs) args.emplace_back(values.at(uid));
      const auto d = deferred.find(i);
      const std::vector<Value> outs = d == deferred.end()
                                          ? r.call_all(c.kernel, args, buffers_of(r, c, args, into))
                                          : r.call_deferred(c.kernel, args, d->second);
      for (std::size_t o = 0; o < outs.size(); ++o) values[c.outputs[o]] = outs[o];
    }
    return values;
  }

  // The call's output buffers when `into` names one of its outputs: those views, and new arrays
  // (the kernel's output shapes) for the rest before them.
  static CallOptions buffers_of(Recorder& r, const PlannedSegment& c, const std::vector<Arg>& args,
                                const std::map<int64_t, Value>& into) {
    CallOptions options;
    std::size_t last = 0;
    for (std::size_t o = 0; o < c.outputs.size(); ++o)
      if (into.count(c.outputs[o])) last = o + 1;
    if (last == 0) return options;
    std::vector<ArrayMeta> given;
    for (const Arg& a : args) {
      const Value& v = std::get<Value>(a.get());
      given.push_back({v.shape(), v.dtype()});
    }
    const std::vector<ArrayMeta> metas = c.kernel.def().infer(given, {});
    for (std::size_t o = 0; o < last; ++o) {
      const auto it = into.find(c.outputs[o]);
      options.buffers.emplace_back(it != into.end() ? it->second
                                                    : r.empty(metas[o].shape, metas[o].dtype));
    }
    return options;
  }

  op::Graph graph_;
  std::vector<op::Tensor> operands_;  // the kernel's array parameters, in order
  std::map<int64_t, int> slot_;       // operand uid -> parameter
  PlanningOptions options_;
  const plan::Manifest& manifest_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::shared_ptr<Entry>> entries_;
  mutable std::once_flag reads_once_;
  mutable std::set<int64_t> reads_;
};

}  // namespace

std::shared_ptr<const Derivative> planned_derivative(const op::Graph& graph,
                                                     const PlanningOptions& options,
                                                     const plan::Manifest& manifest) {
  return std::make_shared<PlannedRule>(graph, options, manifest);
}

}  // namespace eagle::engines::detail
