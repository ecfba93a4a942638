// op::backward: walks a forward op::Graph last node to first, calling each node's derivative
// rule (OpSchema::grad) through a GradContext, and keeps the cotangent of every forward tensor
// as a tensor of the backward graph (summed over readers). Forward values a rule reads come from
// the forward's operands, or from the recompute graph for what the forward keeps to itself.
#include "eagle/op/backward.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "eagle/core/error.hpp"
#include "op/grad_context.hpp"

namespace eagle::op {

namespace detail {

namespace {

// Row-major strides of `dims` with the last two dims then swapped: a transposed view's strides.
Dims swap_last(Dims d) {
  if (d.size() >= 2) std::swap(d[d.size() - 1], d[d.size() - 2]);
  return d;
}

Dims row_major(const Dims& dims) {
  Dims s(dims.size());
  int64_t n = 1;
  for (std::size_t i = dims.size(); i-- > 0;) {
    s[i] = n;
    n *= std::max<int64_t>(dims[i], 1);
  }
  return s;
}

Dims strides_of(const Tensor& t) {
  return t.strides().empty() ? row_major(t.dims()) : t.strides();
}

std::string describe(const Node& n) {
  return "node '" + n.name() + "' (op " + n.op() + ")";
}

}  // namespace

class BackwardBuilder {
 public:
  explicit BackwardBuilder(const Graph& forward)
      : forward_(forward), tensors_(forward.tensors()), nodes_(forward.nodes()) {}

  BackwardGraph run(const std::vector<Tensor>& cotangents, const std::vector<Tensor>& wrt) {
    check_arguments(cotangents, wrt);
    const std::vector<char> path = on_path(cotangents, wrt);
    for (const Tensor& t : cotangents) seeded_.insert(t.index());
    for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
      const Node& n = *it;
      if (!path[static_cast<std::size_t>(n.index())]) continue;
      bool any = false;
      for (const auto& [port, t] : n.outputs()) any = any || has_cotangent(t.index());
      if (!any) continue;
      if (!n.schema().grad)
        throw NotSupported("op::backward: " + describe(n) +
                           " lies on a path from wrt to the cotangents and its op has no "
                           "derivative rule");
      GradContext ctx(*this, n);
      n.schema().grad(ctx);
    }
    for (const Tensor& w : wrt) {
      Tensor g = cotangent(w.index());
      if (g.defined()) {
        if (g.producer() < 0 || gradient_set_.count(g.index()))
          g = out_.graph.pointwise("identity", g);
        gradient_set_.insert(g.index());
        g.set_output(true).set_name(unique(names_, "grad." + w.name()));
      }
      out_.gradients.push_back(g);
    }
    if (!out_.graph.nodes().empty()) out_.graph.validate();
    if (!out_.recompute.nodes().empty()) out_.recompute.validate();
    return std::move(out_);
  }

  // ---- what GradContext forwards to
  Graph& graph() { return out_.graph; }

  bool varies(const Tensor& t) const {
    return t.defined() && is_floating(t.dtype()) && varies_[static_cast<std::size_t>(t.index())];
  }

  // A forward operand: an input of the forward graph, or an output it exposes.
  static bool exposed(const Tensor& t) { return t.producer() < 0 || !t.is_virtual(); }

  bool has_cotangent(int index) const { return adj_.count(index) || seeded_.count(index); }

  Tensor cotangent(int index) {
    if (seeded_.erase(index)) {
      const Tensor& ft = tensors_[static_cast<std::size_t>(index)];
      Tensor c = input({"cot." + ft.name(), ft.dims(), ft.dtype()},
                       {Source::Kind::cotangent, ft.uid(), 0, false});
      adj_[index] = c;
    }
    auto it = adj_.find(index);
    return it == adj_.end() ? Tensor() : it->second;
  }

  // The cotangent of forward output `index` as an input of dims `dims` (its element count): only
  // while it is exactly the cotangent given from outside, not yet read; else undefined.
  Tensor cotangent_as(int index, const Dims& dims) {
    if (!seeded_.count(index) || adj_.count(index)) return Tensor();
    seeded_.erase(index);
    const Tensor& ft = tensors_[static_cast<std::size_t>(index)];
    return input({"cot." + ft.name(), dims, ft.dtype()},
                 {Source::Kind::cotangent, ft.uid(), 0, false});
  }

  void accumulate(int index, const Tensor& c) {
    const Tensor have = cotangent(index);
    adj_[index] = have.defined() ? out_.graph.pointwise("add", have, c) : c;
  }

  // The forward value of forward tensor `ft` in the backward graph.
  Tensor value(const Tensor& ft, bool transposed) {
    auto& cache = transposed ? fwd_t_ : fwd_;
    if (auto it = cache.find(ft.index()); it != cache.end()) return it->second;
    Tensor t;
    if (exposed(ft)) {
      const Dims strides = strides_of(ft);
      t = input(
          {ft.name() + (transposed ? ".T" : ""), transposed ? swap_last(ft.dims()) : ft.dims(),
           ft.dtype(), transposed ? swap_last(strides) : strides},
          {Source::Kind::forward, ft.uid(), 0, transposed});
      if (!transposed && ft.ragged_offset().defined())
        t.set_ragged_offset(value(ft.ragged_offset(), false));
    } else {
      t = from_recompute(recomputed(ft), transposed);
    }
    cache[ft.index()] = t;
    return t;
  }

  // Output `port` of forward node `n`, recomputed (by one rerun of the node per forward node).
  Tensor recomputed_output(const Node& n, const std::string& port, bool transposed) {
    const std::map<std::string, Tensor>& outs = rerun(n);
    auto it = outs.find(port);
    if (it == outs.end())
      throw std::logic_error("op::backward: the rerun of " + describe(n) + " has no output '" +
                             port + "'");
    return from_recompute(it->second, transposed);
  }

  // A constant input: rank 0, or `dims` as a stride-0 broadcast of its one element (a tensor's
  // shape without its contents, so that nothing waits for them).
  Tensor constant(double v, DType dtype, const Dims& dims) {
    auto key = std::make_tuple(v, static_cast<int>(dtype), dims);
    if (auto it = constants_.find(key); it != constants_.end()) return it->second;
    TensorSpec spec{"const." + std::string(dtype_name(dtype)), dims, dtype};
    if (!dims.empty()) spec.strides = Dims(dims.size(), 0);
    Tensor c = input(std::move(spec), {Source::Kind::constant, 0, v, false});
    constants_.emplace(std::move(key), c);
    return c;
  }

 private:
  void check_arguments(const std::vector<Tensor>& cotangents, const std::vector<Tensor>& wrt) {
    auto mine = [&](const Tensor& t) {
      return t.defined() && t.index() >= 0 &&
             static_cast<std::size_t>(t.index()) < tensors_.size() &&
             tensors_[static_cast<std::size_t>(t.index())] == t;
    };
    std::set<int> seen;
    for (const Tensor& t : cotangents) {
      if (!mine(t))
        throw InvalidArgument("op::backward: a cotangent names a tensor that is not of graph '" +
                              forward_.name() + "'");
      if (t.producer() < 0 || t.is_virtual())
        throw InvalidArgument("op::backward: cotangent of '" + t.name() +
                              "': only outputs of the graph (set_output) take a cotangent");
      if (!is_floating(t.dtype()))
        throw InvalidArgument("op::backward: cotangent of '" + t.name() + "': its dtype " +
                              std::string(dtype_name(t.dtype())) + " is not floating point");
      if (!seen.insert(t.index()).second)
        throw InvalidArgument("op::backward: cotangent of '" + t.name() + "' is given twice");
    }
    for (const Tensor& t : wrt) {
      if (!mine(t))
        throw InvalidArgument("op::backward: a wrt entry names a tensor that is not of graph '" +
                              forward_.name() + "'");
      if (t.producer() >= 0)
        throw InvalidArgument("op::backward: wrt '" + t.name() +
                              "' is a node output; gradients are of graph inputs");
      if (!is_floating(t.dtype()))
        throw InvalidArgument("op::backward: wrt '" + t.name() + "': its dtype " +
                              std::string(dtype_name(t.dtype())) + " is not floating point");
    }
  }

  // Per node: whether it lies on a path from wrt to the cotangents (fills varies_).
  std::vector<char> on_path(const std::vector<Tensor>& cotangents, const std::vector<Tensor>& wrt) {
    varies_.assign(tensors_.size(), 0);
    for (const Tensor& t : wrt) varies_[static_cast<std::size_t>(t.index())] = 1;
    std::vector<char> in(nodes_.size(), 0);
    for (const Node& n : nodes_) {
      bool v = false;
      for (const auto& [port, t] : n.inputs()) v = v || varies(t);
      in[static_cast<std::size_t>(n.index())] = v;
      if (v)
        for (const auto& [port, t] : n.outputs())
          if (is_floating(t.dtype())) varies_[static_cast<std::size_t>(t.index())] = 1;
    }
    std::vector<char> needed(tensors_.size(), 0), path(nodes_.size(), 0);
    for (const Tensor& t : cotangents) needed[static_cast<std::size_t>(t.index())] = 1;
    for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
      bool out = false;
      for (const auto& [port, t] : it->outputs())
        out = out || needed[static_cast<std::size_t>(t.index())];
      if (!out || !in[static_cast<std::size_t>(it->index())]) continue;
      path[static_cast<std::size_t>(it->index())] = 1;
      for (const auto& [port, t] : it->inputs())
        if (is_floating(t.dtype())) needed[static_cast<std::size_t>(t.index())] = 1;
    }
    return path;
  }

  // `base`, or `base.N` for the first N that is free among `used` (operand names become the
  // parameter names of planned kernels, which must differ).
  static std::string unique(std::set<std::string>& used, const std::string& base) {
    std::string name = base.empty() ? "t" : base;
    for (int n = 1; used.count(name); ++n) name = base + "." + std::to_string(n);
    used.insert(name);
    return name;
  }

  Tensor input(TensorSpec spec, const Source& source) {
    spec.name = unique(names_, spec.name);
    Tensor t = out_.graph.tensor(spec);
    out_.inputs.emplace_back(t, source);
    return t;
  }

  // Forward tensor `ft` in the recompute graph: an input when the forward exposes it, else the
  // output of a rerun of its producer.
  Tensor recomputed(const Tensor& ft) {
    if (exposed(ft)) {
      if (auto it = rc_inputs_.find(ft.index()); it != rc_inputs_.end()) return it->second;
      Tensor t = out_.recompute.tensor(
          {unique(rc_names_, ft.name()), ft.dims(), ft.dtype(), strides_of(ft)});
      out_.recompute_inputs.emplace_back(t, Source{Source::Kind::forward, ft.uid(), 0, false});
      if (ft.ragged_offset().defined()) t.set_ragged_offset(recomputed(ft.ragged_offset()));
      rc_inputs_[ft.index()] = t;
      return t;
    }
    const Node& n = nodes_[static_cast<std::size_t>(ft.producer())];
    for (const auto& [port, t] : n.outputs())
      if (t == ft) return rerun(n).at(port);
    throw std::logic_error("op::backward: tensor '" + ft.name() + "' is not its producer's output");
  }

  // Forward node `n` run again in the recompute graph (norms with training, sdpa with
  // generate_stats, so their statistics exist), once.
  const std::map<std::string, Tensor>& rerun(const Node& n) {
    if (auto it = reruns_.find(n.index()); it != reruns_.end()) return it->second;
    Ports ins;
    for (const auto& [port, t] : n.inputs()) ins.emplace_back(port, recomputed(t));
    Attrs attrs;
    for (const auto& [name, a] : n.attrs()) {
      if ((name == "training" || name == "generate_stats") && a.type() == AttrType::boolean)
        attrs.emplace_back(name, Attr(true));
      else
        attrs.emplace_back(name, a);
    }
    std::map<std::string, Tensor> outs = out_.recompute.op(n.op(), ins, attrs, n.name());
    return reruns_[n.index()] = std::move(outs);
  }

  // A recompute output as an input of the backward graph.
  Tensor from_recompute(Tensor rt, bool transposed) {
    auto& cache = transposed ? rc_t_ : rc_;
    if (auto it = cache.find(rt.index()); it != cache.end()) return it->second;
    if (rt.is_virtual()) rt.set_output(true).set_name(unique(rc_names_, rt.name()));
    const Dims strides = row_major(rt.dims());
    Tensor t =
        input({rt.name() + (transposed ? ".T" : ""), transposed ? swap_last(rt.dims()) : rt.dims(),
               rt.dtype(), transposed ? swap_last(strides) : strides},
              {Source::Kind::recomputed, rt.uid(), 0, transposed});
    cache[rt.index()] = t;
    return t;
  }

  const Graph forward_;
  const std::vector<Tensor> tensors_;
  const std::vector<Node> nodes_;
  BackwardGraph out_;
  std::vector<char> varies_;
  std::map<int, Tensor> adj_;          // forward tensor index -> its cotangent so far
  std::set<int> seeded_;               // forward outputs whose cotangent input is not made yet
  std::map<int, Tensor> fwd_, fwd_t_;  // forward tensor index -> backward input
  std::map<int, Tensor> rc_inputs_;    // forward tensor index -> recompute input
  std::map<int, std::map<std::string, Tensor>> reruns_;  // forward node -> recompute outputs
  std::map<int, Tensor> rc_, rc_t_;                      // recompute tensor index -> backward input
  std::map<std::tuple<double, int, Dims>, Tensor> constants_;
  std::set<int> gradient_set_;
  std::set<std::string> names_, rc_names_;  // operand names of the backward, recompute graphs
};

}  // namespace detail

// ---- GradContext

Graph& GradContext::graph() {
  return b_.graph();
}

Tensor GradContext::cot(const std::string& port) {
  const Tensor t = node_.output(port);
  return t.defined() ? b_.cotangent(t.index()) : Tensor();
}

Tensor GradContext::cot_as(const std::string& port, const Dims& dims) {
  const Tensor t = node_.output(port);
  return t.defined() ? b_.cotangent_as(t.index(), dims) : Tensor();
}

bool GradContext::wants(const std::string& port) const {
  return b_.varies(node_.input(port));
}

Tensor GradContext::value(const std::string& port) {
  if (const Tensor in = node_.input(port); in.defined()) return b_.value(in, false);
  if (const Tensor out = node_.output(port); out.defined() && b_.exposed(out))
    return b_.value(out, false);
  return b_.recomputed_output(node_, port, false);
}

Tensor GradContext::transposed(const std::string& port) {
  if (const Tensor in = node_.input(port); in.defined()) return b_.value(in, true);
  if (const Tensor out = node_.output(port); out.defined() && b_.exposed(out))
    return b_.value(out, true);
  return b_.recomputed_output(node_, port, true);
}

bool GradContext::exposed(const std::string& port) const {
  const Tensor out = node_.output(port);
  return out.defined() && detail::BackwardBuilder::exposed(out);
}

std::vector<Tensor> GradContext::values(const std::vector<std::string>& ports) {
  bool all = true;
  for (const std::string& p : ports) all = all && exposed(p);
  std::vector<Tensor> out;
  for (const std::string& p : ports)
    out.push_back(all ? b_.value(node_.output(p), false) : b_.recomputed_output(node_, p, false));
  return out;
}

Tensor GradContext::constant(double value, DType dtype, const Dims& dims) {
  return b_.constant(value, dtype, dims);
}

void GradContext::grad(const std::string& port, const Tensor& contribution) {
  if (!wants(port)) return;
  const Tensor in = node_.input(port);
  Tensor c = contribution;
  const Dims& want = in.dims();
  if (c.dims() != want) {
    const std::size_t n = c.dims().size(), m = want.size();
    if (n < m) refuse("a contribution to '" + port + "' has fewer dims than the input");
    if (n > m) {
      std::vector<int64_t> lead;
      for (std::size_t i = 0; i < n - m; ++i) lead.push_back(static_cast<int64_t>(i));
      c = sum(c, lead, false);
    }
    std::vector<int64_t> ones;
    for (std::size_t i = 0; i < m; ++i)
      if (want[i] == 1 && c.dims()[i] != 1) ones.push_back(static_cast<int64_t>(i));
    if (!ones.empty()) c = sum(c, ones, true);
    if (c.dims() != want) refuse("a contribution to '" + port + "' does not reduce to its dims");
  }
  if (c.dtype() != in.dtype()) c = cast(c, in.dtype());
  b_.accumulate(in.index(), c);
}

void GradContext::refuse(const std::string& why) const {
  throw NotSupported("op::backward: node '" + node_.name() + "' (op " + node_.op() + "): " + why);
}

Tensor GradContext::pw(const std::string& op, const Tensor& a) {
  return graph().pointwise(op, a);
}

Tensor GradContext::pw(const std::string& op, const Tensor& a, const Tensor& b) {
  return graph().pointwise(op, a, b);
}

Tensor GradContext::where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return graph().where(cond, a, b);
}

Tensor GradContext::cast(const Tensor& a, DType dtype) {
  return graph().pointwise("cast", a, {{"dtype", Attr(dtype)}});
}

// Both broadcast through a stride-0 constant of `dims` as where's condition, not through a
// forward tensor of those dims: the backward then reads no such tensor and does not wait for it.
Tensor GradContext::expand(const Tensor& x, const Dims& dims) {
  if (x.dims() == dims) return x;
  return where(constant(1.0, x.dtype(), dims), x, x);
}

Tensor GradContext::zeros(const Dims& dims, DType dtype) {
  const Tensor zero = constant(0.0, dtype);
  return where(constant(1.0, dtype, dims), zero, zero);
}

Tensor GradContext::sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return graph()
      .op("reduction", {{"x", x}},
          {{"mode", Attr("sum")}, {"axes", Attr(axes)}, {"keepdim", Attr(keepdim)}})
      .at("y");
}

BackwardGraph backward(const Graph& forward, const std::vector<Tensor>& cotangents,
                       const std::vector<Tensor>& wrt) {
  return detail::BackwardBuilder(forward).run(cotangents, wrt);
}

}  // namespace eagle::op
