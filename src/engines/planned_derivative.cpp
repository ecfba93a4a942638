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
#include "eagle/op/backward.hpp"

namespace eagle::engines::detail {

namespace {

using Grads = std::vector<std::optional<Value>>;

struct Entry {
  op::BackwardGraph backward;
  // The planned segments of backward.recompute and .graph (engines::planned_segments).
  std::vector<PlannedSegment> recompute, kernel;
};

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
    const Entry& e = entry(key, cots, wrt);
    if (e.kernel.empty()) return out;

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
          return r.constant(s.value, t.dtype());  // one fill per value in this arm
      }
      const int rank = static_cast<int>(v.shape().size());
      if (s.transposed) return v.transpose(rank - 2, rank - 1);
      return v.shape() == t.dims() ? v : v.reshape(t.dims());  // a cotangent in keepdim dims
    };
    recomputed = run(r, e.recompute, e.backward.recompute_inputs, value_of);
    const std::map<int64_t, Value> by_uid = run(r, e.kernel, e.backward.inputs, value_of);
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
    // A backward without intermediates to recompute has an empty recompute graph, which
    // planned_segments (validating its graph) refuses.
    const auto plan = [&](const op::Graph& g) {
      return g.nodes().empty() ? std::vector<PlannedSegment>{}
                               : planned_segments(g, options_, manifest_);
    };
    e->recompute = plan(e->backward.recompute);
    e->kernel = plan(e->backward.graph);
    return *entries_.emplace(key, std::move(e)).first->second;
  }

  // Records the calls of a derived graph's segments, its inputs from `sources`; returns every
  // value made, by the graph's uids (its outputs among them).
  template <class ValueOf>
  static std::map<int64_t, Value> run(Recorder& r, const std::vector<PlannedSegment>& calls,
                                      const std::vector<std::pair<op::Tensor, op::Source>>& sources,
                                      ValueOf& value_of) {
    std::map<int64_t, Value> values;
    for (const auto& [t, s] : sources) values[t.uid()] = value_of(t, s);
    for (const PlannedSegment& c : calls) {
      std::vector<Arg> args;
      for (int64_t uid : c.inputs) args.emplace_back(values.at(uid));
      const std::vector<Value> outs = r.call_all(c.kernel, args);
      for (std::size_t i = 0; i < outs.size(); ++i) values[c.outputs[i]] = outs[i];
    }
    return values;
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
