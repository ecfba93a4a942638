// The derivative of a planned operation: for the outputs that receive a cotangent and the inputs
// whose gradient is wanted, op::backward builds the backward graph (and the recompute graph of
// the intermediates the forward keeps to itself) once per such combination; the rule records a
// call of each as a planned kernel, reading the forward's operands (saved when overwritten), the
// cotangents and rank-0 constants, and returns the backward's outputs as the inputs' cotangents.
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

namespace eagle::engines::detail {

namespace {

using Grads = std::vector<std::optional<Value>>;

struct Entry {
  op::BackwardGraph backward;
  std::optional<Kernel> recompute, kernel;
};

class PlannedRule final : public VjpRule {
 public:
  PlannedRule(const op::Graph& graph, std::vector<plan::HeurMode> modes,
              const plan::Manifest& manifest)
      : graph_(graph.clone()),
        operands_(graph_.operand_tensors()),
        modes_(std::move(modes)),
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
    const Entry& e = entry(key, cots, wrt);
    if (e.backward.graph.nodes().empty()) return out;

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
        case op::Source::Kind::constant:
          v = r.empty({}, t.dtype());
          r.call(kernels::fill(), {s.value}, buffer(v));
          return v;
      }
      const int rank = static_cast<int>(v.shape().size());
      return s.transposed ? v.transpose(rank - 2, rank - 1) : v;
    };
    if (e.recompute) {
      const std::vector<Value> outs =
          call(r, *e.recompute, e.backward.recompute, e.backward.recompute_inputs, value_of);
      std::size_t i = 0;
      for (const op::Tensor& t : e.backward.recompute.operand_tensors())
        if (t.producer() >= 0) recomputed[t.uid()] = outs[i++];
    }
    const std::vector<Value> outs =
        call(r, *e.kernel, e.backward.graph, e.backward.inputs, value_of);
    std::map<int64_t, Value> by_uid;
    std::size_t i = 0;
    for (const op::Tensor& t : e.backward.graph.operand_tensors())
      if (t.producer() >= 0) by_uid[t.uid()] = outs[i++];
    for (std::size_t w = 0; w < wrt.size(); ++w)
      if (const op::Tensor& g = e.backward.gradients[w]; g.defined())
        out[static_cast<std::size_t>(wrt_slot[w])] = by_uid.at(g.uid());
    return out;
  }

  // Every forward operand any backward of this graph reads (that of all outputs with respect to
  // all floating inputs reads the most); all of them when that backward is refused.
  bool reads(int slot) const override {
    std::call_once(reads_once_, [&] {
      std::vector<op::Tensor> cots, wrt;
      for (const op::Tensor& t : operands_) {
        if (!is_floating(t.dtype())) continue;
        (t.producer() < 0 ? wrt : cots).push_back(t);
      }
      try {
        const op::BackwardGraph b = op::backward(graph_, cots, wrt);
        for (const auto* list : {&b.inputs, &b.recompute_inputs})
          for (const auto& [t, s] : *list)
            if (s.kind == op::Source::Kind::forward) reads_.insert(s.uid);
      } catch (const Error&) {
        for (const op::Tensor& t : operands_) reads_.insert(t.uid());
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
    if (!e->backward.recompute.nodes().empty())
      e->recompute = planned_kernel(e->backward.recompute, modes_, manifest_);
    if (!e->backward.graph.nodes().empty())
      e->kernel = planned_kernel(e->backward.graph, modes_, manifest_);
    return *entries_.emplace(key, std::move(e)).first->second;
  }

  // Records a call of `kernel` (planned from `g`) with its inputs from `sources`.
  template <class ValueOf>
  static std::vector<Value> call(Recorder& r, const Kernel& kernel, const op::Graph& g,
                                 const std::vector<std::pair<op::Tensor, op::Source>>& sources,
                                 ValueOf& value_of) {
    std::map<int64_t, const op::Source*> by_uid;
    for (const auto& [t, s] : sources) by_uid[t.uid()] = &s;
    std::vector<Arg> args;
    for (const op::Tensor& t : g.operand_tensors())
      if (t.producer() < 0) args.emplace_back(value_of(t, *by_uid.at(t.uid())));
    return r.call_all(kernel, args);
  }

  op::Graph graph_;
  std::vector<op::Tensor> operands_;  // the kernel's array parameters, in order
  std::map<int64_t, int> slot_;       // operand uid -> parameter
  std::vector<plan::HeurMode> modes_;
  const plan::Manifest& manifest_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::shared_ptr<Entry>> entries_;
  mutable std::once_flag reads_once_;
  mutable std::set<int64_t> reads_;
};

}  // namespace

std::shared_ptr<const Derivative> planned_derivative(const op::Graph& graph,
                                                     const std::vector<plan::HeurMode>& modes,
                                                     const plan::Manifest& manifest) {
  return std::make_shared<PlannedRule>(graph, modes, manifest);
}

}  // namespace eagle::engines::detail
