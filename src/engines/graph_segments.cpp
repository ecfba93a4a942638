#include "engines/graph_segments.hpp"

#include <functional>
#include <map>
#include <set>
#include <string>

namespace eagle::engines::detail {

namespace {

// Whether `n` continues a matmul's epilogue whose value so far is tensor `value` (dims `dims`):
// a pointwise node reading it, with `value`'s dims and dtype, whose other operand (if any) comes
// from outside the segment (`made`: the segment's tensors), as a fused epilogue reads it.
bool continues_epilogue(const op::Node& n, const op::Tensor& value, const std::set<int>& made) {
  if (n.schema().kind != op::OpKind::pointwise) return false;
  const op::Tensor out = n.output("out");
  if (out.dims() != value.dims() || out.dtype() != value.dtype()) return false;
  bool reads_value = false;
  for (const auto& [port, t] : n.inputs()) {
    if (t == value) {
      if (reads_value) return false;  // the value twice (mul(c, c)): not an epilogue
      reads_value = true;
    } else if (made.count(t.index())) {
      return false;
    }
  }
  return reads_value;
}

// Node -> segment: consecutive pointwise nodes share one (nodes are in data-flow order, so a run
// of consecutive nodes is closed under the paths between its nodes) while the run stays within
// what the fused pointwise engine serves: one output dims, kMaxRunNodes nodes and kMaxRunInputs
// inputs from outside the run. A matmul takes the chain of pointwise nodes right after it that
// each read the previous result (its epilogue, kMaxEpilogueNodes at most) into its segment, and
// its result index goes to `kept`. `count` receives the number of segments.
std::vector<int> assign_segments(const std::vector<op::Node>& nodes, bool fuse, int& count,
                                 std::set<int>& kept) {
  constexpr std::size_t kMaxRunNodes = 32, kMaxRunInputs = 8, kMaxEpilogueNodes = 4;
  std::vector<int> segment_of(nodes.size());
  count = 0;
  std::size_t run_nodes = 0;
  std::set<int> run_made, run_inputs;  // tensor indices made in / read from outside the run
  op::Dims run_dims;
  const auto inputs_with = [&](const op::Node& n) {
    std::set<int> inputs = run_inputs;
    for (const auto& [port, t] : n.inputs())
      if (!run_made.count(t.index())) inputs.insert(t.index());
    return inputs;
  };
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const op::Node& n = nodes[i];
    const bool pointwise = n.schema().kind == op::OpKind::pointwise;
    const bool joins = pointwise && run_nodes > 0 && n.output("out").dims() == run_dims &&
                       run_nodes < kMaxRunNodes && inputs_with(n).size() <= kMaxRunInputs;
    if (!joins) {
      ++count;
      run_nodes = 0;
      run_made.clear();
      run_inputs.clear();
    }
    segment_of[i] = count - 1;
    if (fuse && n.op() == "matmul") {
      op::Tensor value = n.output("c");
      std::set<int> made = {value.index()};
      std::size_t j = i + 1;
      while (j < nodes.size() && j - i <= kMaxEpilogueNodes &&
             continues_epilogue(nodes[j], value, made)) {
        segment_of[j] = count - 1;
        value = nodes[j].output("out");
        made.insert(value.index());
        ++j;
      }
      if (j > i + 1) kept.insert(n.output("c").index());
      i = j - 1;
      continue;
    }
    if (!pointwise) continue;
    ++run_nodes;
    run_dims = n.output("out").dims();
    run_inputs = inputs_with(n);
    run_made.insert(n.output("out").index());
  }
  return segment_of;
}

// Segment `s` as an op::Graph of its own: tensors it reads from elsewhere become its inputs, and
// what it makes that the whole graph outputs or another segment reads becomes its outputs.
Segment build_segment(const op::Graph& whole, const std::vector<op::Node>& nodes,
                      const std::vector<int>& segment_of,
                      const std::map<int, std::set<int>>& readers, const std::set<int>& kept,
                      int s) {
  op::Graph sub(whole.name() + "." + std::to_string(s));
  std::map<int, op::Tensor> local;   // whole tensor index -> tensor of sub
  std::map<int, int64_t> whole_uid;  // sub tensor index -> whole uid
  std::set<std::string> names;
  auto unique = [&](const std::string& base) {
    std::string name = base.empty() ? "t" : base;
    for (int n = 1; names.count(name); ++n) name = base + "." + std::to_string(n);
    names.insert(name);
    return name;
  };
  std::function<op::Tensor(const op::Tensor&)> input = [&](const op::Tensor& t) {
    if (auto it = local.find(t.index()); it != local.end()) return it->second;
    op::Tensor in = sub.tensor({unique(t.name()), t.dims(), t.dtype(), t.strides()});
    if (t.ragged_offset().defined()) in.set_ragged_offset(input(t.ragged_offset()));
    local[t.index()] = in;
    whole_uid[in.index()] = t.uid();
    return in;
  };
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (segment_of[i] != s) continue;
    const op::Node& n = nodes[i];
    op::Ports ports;
    for (const auto& [port, t] : n.inputs()) ports.emplace_back(port, input(t));
    op::Attrs attrs(n.attrs().begin(), n.attrs().end());
    std::map<std::string, op::Tensor> outs = sub.op(n.op(), ports, attrs, n.name());
    for (const auto& [port, t] : n.outputs()) {
      op::Tensor& o = outs.at(port);
      if (t.strides() != o.strides()) o.set_strides(t.strides());  // a declared layout stays
      local[t.index()] = o;
      whole_uid[o.index()] = t.uid();
      const auto r = readers.find(t.index());
      const bool read_elsewhere =
          r != readers.end() && (r->second.size() > 1 || *r->second.begin() != s);
      if (!t.is_virtual() || read_elsewhere || kept.count(t.index()))
        o.set_output(true).set_name(unique(t.name()));
    }
  }
  Segment seg{sub, {}, {}};
  for (const op::Tensor& t : sub.operand_tensors())
    (t.producer() < 0 ? seg.inputs : seg.outputs).push_back(whole_uid.at(t.index()));
  return seg;
}

}  // namespace

std::vector<Segment> segments(const op::Graph& whole, bool fuse_epilogues, bool keep_products) {
  const std::vector<op::Node> nodes = whole.nodes();
  int count = 0;
  std::set<int> kept;
  const std::vector<int> segment_of = assign_segments(nodes, fuse_epilogues, count, kept);
  if (!keep_products) kept.clear();
  std::map<int, std::set<int>> readers;  // tensor index -> segments reading it
  for (std::size_t i = 0; i < nodes.size(); ++i)
    for (const auto& [port, t] : nodes[i].inputs()) readers[t.index()].insert(segment_of[i]);
  std::vector<Segment> out;
  for (int s = 0; s < count; ++s) {
    Segment seg = build_segment(whole, nodes, segment_of, readers, kept, s);
    seg.epilogue = seg.graph.nodes().size() > 1 && seg.graph.nodes()[0].op() == "matmul";
    if (!seg.outputs.empty()) out.push_back(std::move(seg));
  }
  return out;
}

}  // namespace eagle::engines::detail
