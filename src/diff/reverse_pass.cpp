// The reverse pass: which nodes lie on a path from wrt to the seeds (forward: what depends on
// wrt; backward: what the seeds depend on, both per buffer, a whole-buffer overwrite ending a
// dependency), then the walk last to first recording each such node's vector-Jacobian product.
#include "diff/reverse_pass.hpp"

#include <map>

#include "diff/adjoints.hpp"
#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "eagle/graph/derivative.hpp"
#include "eagle/kernel/standard.hpp"

namespace eagle::diff::detail {

namespace {

std::string describe(const NodeInfo& n) {
  return "node " + std::to_string(n.id) + " '" + n.label + "' (" +
         (n.kind == NodeKind::kernel ? "kernel " + n.kernel : std::string(node_kind_name(n.kind))) +
         ")";
}

void accesses(const std::vector<NodeInfo>& nodes, int id, std::vector<NodeArgInfo>& out) {
  const NodeInfo& n = nodes[static_cast<std::size_t>(id)];
  out.insert(out.end(), n.arrays.begin(), n.arrays.end());
  for (const auto& body : n.bodies)
    for (int child : body) accesses(nodes, child, out);
}

bool whole(const NodeArgInfo& a, const std::vector<BufferInfo>& buffers) {
  return a.byte_offset == 0 && a.strides.empty() &&
         a.bytes == static_cast<int64_t>(buffers[static_cast<std::size_t>(a.buffer)].bytes);
}

bool reads_buffer(const NodeInfo& n, int buffer) {
  for (const NodeArgInfo& a : n.arrays)
    if (a.buffer == buffer && reads(a.access)) return true;
  return false;
}

// A write that replaces every byte of a buffer the node does not read: what the buffer held
// before no longer matters after it.
bool overwrites(const NodeInfo& n, const NodeArgInfo& a, const std::vector<BufferInfo>& buffers) {
  return (n.kind == NodeKind::kernel || n.kind == NodeKind::copy_in) && a.access == Access::write &&
         whole(a, buffers) && !reads_buffer(n, a.buffer);
}

bool no_gradient(const Recording& f, const NodeInfo& n) {
  return n.kind == NodeKind::kernel && f.kernel_of(n.id).def().no_gradient;
}

}  // namespace

int first_writer(const Recording& forward, const std::vector<int>& order, int buffer) {
  const auto& nodes = forward.nodes();
  for (int id : order) {
    if (nodes[static_cast<std::size_t>(id)].kind == NodeKind::save) continue;
    std::vector<NodeArgInfo> acc;
    accesses(nodes, id, acc);
    for (const NodeArgInfo& a : acc)
      if (a.buffer == buffer && writes(a.access)) return id;
  }
  return -1;
}

std::vector<Value> record_reverse(Recorder& r, const Recording& forward,
                                  const std::vector<int>& order, const std::vector<Seed>& seeds,
                                  const std::vector<Target>& wrt, const ViewMap& map,
                                  const std::string& who) {
  // Copies: when recording into the forward's own recording, its vectors grow as we record.
  const std::vector<NodeInfo> nodes = forward.nodes();
  const std::vector<BufferInfo> buffers = forward.buffers();
  const std::size_t nb = buffers.size();

  // ---- forward: what depends on wrt
  std::vector<char> varied(nb, 0), varied_node(nodes.size(), 0);
  std::map<int, std::vector<std::size_t>> starts;  // node -> wrt entries it writes first
  for (std::size_t w = 0; w < wrt.size(); ++w) {
    if (wrt[w].start < 0) {
      varied[static_cast<std::size_t>(wrt[w].view.buffer)] = 1;
    } else {
      starts[wrt[w].start].push_back(w);
    }
  }
  std::map<int, std::vector<bool>> wanted;  // per kernel node on the forward path, per argument
  for (int id : order) {
    const NodeInfo& n = nodes[static_cast<std::size_t>(id)];
    if (n.kind == NodeKind::save) continue;
    std::vector<NodeArgInfo> acc;
    accesses(nodes, id, acc);
    bool in = false;
    for (const NodeArgInfo& a : acc)
      in = in ||
           (reads(a.access) && is_floating(a.dtype) && varied[static_cast<std::size_t>(a.buffer)]);
    in = in && !no_gradient(forward, n);
    varied_node[static_cast<std::size_t>(id)] = in;
    if (in && !is_control(n.kind)) {
      std::vector<bool> want;
      for (const NodeArgInfo& a : n.arrays)
        want.push_back(reads(a.access) && is_floating(a.dtype) &&
                       varied[static_cast<std::size_t>(a.buffer)]);
      wanted[id] = std::move(want);
    }
    for (const NodeArgInfo& a : acc) {
      if (!writes(a.access) || !is_floating(a.dtype)) continue;
      char& v = varied[static_cast<std::size_t>(a.buffer)];
      if (in) {
        v = 1;
      } else if (!is_control(n.kind) && overwrites(n, a, buffers)) {
        v = 0;
      }
    }
    if (auto it = starts.find(id); it != starts.end())
      for (std::size_t w : it->second) varied[static_cast<std::size_t>(wrt[w].view.buffer)] = 1;
  }
  // ---- backward: what the seeds depend on
  std::vector<char> needed(nb, 0), on_path(nodes.size(), 0);
  for (const Seed& s : seeds) needed[static_cast<std::size_t>(s.view.buffer)] = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const NodeInfo& n = nodes[static_cast<std::size_t>(*it)];
    if (n.kind == NodeKind::save) continue;
    std::vector<NodeArgInfo> acc;
    accesses(nodes, *it, acc);
    bool out = false;
    for (const NodeArgInfo& a : acc)
      out = out || (writes(a.access) && is_floating(a.dtype) &&
                    needed[static_cast<std::size_t>(a.buffer)]);
    on_path[static_cast<std::size_t>(*it)] = out && varied_node[static_cast<std::size_t>(*it)];
    for (const NodeArgInfo& a : acc)
      if (writes(a.access) && !is_control(n.kind) && overwrites(n, a, buffers))
        needed[static_cast<std::size_t>(a.buffer)] = 0;
    if (out && !no_gradient(forward, n))
      for (const NodeArgInfo& a : acc)
        if (reads(a.access) && is_floating(a.dtype)) needed[static_cast<std::size_t>(a.buffer)] = 1;
  }

  // ---- the walk, last to first
  Adjoints adj(r, buffers);
  for (const Seed& s : seeds) adj.add(s.view, s.cotangent);
  std::vector<std::optional<Value>> grads(wrt.size());
  auto keep = [&](std::optional<Value> g) -> std::optional<Value> {
    if (g && adj.owns(*g)) return r.call(kernels::copy(), {*g});
    return g;
  };
  auto zero_written = [&](const NodeInfo& n) {
    for (const NodeArgInfo& a : n.arrays)
      if (writes(a.access) && is_floating(a.dtype)) adj.zero(a);
  };
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int id = *it;
    const NodeInfo& n = nodes[static_cast<std::size_t>(id)];
    if (auto s = starts.find(id); s != starts.end())
      for (std::size_t w : s->second) grads[w] = keep(adj.read(wrt[w].view));
    if (n.kind == NodeKind::save) continue;
    const bool path = on_path[static_cast<std::size_t>(id)];
    if (is_control(n.kind)) {
      if (path)
        throw NotSupported(who + ": " + describe(n) +
                           " lies on a path from wrt to the seeds; reversing device control flow "
                           "(if, switch, while, for) and forks is not done yet");
      continue;
    }
    if (!path) {
      zero_written(n);
      continue;
    }
    if (n.kind == NodeKind::copy_in) {  // dst = src
      const std::optional<Value> g = keep(adj.read(n.arrays[1]));
      adj.zero(n.arrays[1]);
      if (g) adj.add(n.arrays[0], *g);
      continue;
    }
    const Kernel& kernel = forward.kernel_of(id);
    const VjpRule* rule = derivative_of(kernel);
    if (!rule)
      throw NotSupported(who + ": " + describe(n) +
                         " lies on a path from wrt to the seeds and has no derivative; give the "
                         "kernel one (KernelDef::derivative = vjp_rule(...)) or keep it off the "
                         "path");
    VjpArgs args;
    args.scalars = n.scalars;
    args.wanted = wanted.at(id);
    bool any = false;
    for (std::size_t k = 0; k < n.arrays.size(); ++k) {
      const NodeArgInfo& a = n.arrays[k];
      args.cotangents.push_back(writes(a.access) && is_floating(a.dtype) ? adj.read(a)
                                                                         : std::nullopt);
      any = any || args.cotangents.back().has_value();
    }
    if (!any) continue;  // nothing flows back through it
    for (std::size_t k = 0; k < n.arrays.size(); ++k) {
      const NodeArgInfo& a = n.arrays[k];
      if (!rule->reads(static_cast<int>(k))) {
        args.arrays.push_back(map(a));
        continue;
      }
      const Snapshot snap = forward.snapshot(id, static_cast<int>(k));
      if (snap.state == Snapshot::State::lost)
        throw RecordError(who + ": the derivative of " + describe(n) + " reads its argument '" +
                          a.param + "', which " + snap.lost_to +
                          " overwrote; take every gradient in one call, or write the new value "
                          "to another array");
      args.arrays.push_back(map(snap.state == Snapshot::State::saved ? snap.saved : a));
    }
    std::vector<std::optional<Value>> contrib;
    try {
      contrib = rule->vjp(r, args);
    } catch (const NotSupported& e) {  // a rule refusing a case it does not cover
      throw NotSupported(who + ": the derivative of " + describe(n) + ": " + e.what());
    }
    if (contrib.size() != n.arrays.size())
      throw InvalidArgument(who + ": the derivative of kernel " + n.kernel + " returned " +
                            std::to_string(contrib.size()) + " entries for " +
                            std::to_string(n.arrays.size()) + " array parameters");
    for (std::size_t k = 0; k < n.arrays.size(); ++k) {
      std::optional<Value>& c = contrib[k];
      if (!c || !args.wanted[k]) {
        c.reset();
        continue;
      }
      const NodeArgInfo& a = n.arrays[k];
      if (c->shape() != a.shape || c->dtype() != a.dtype)
        throw InvalidArgument(who + ": the derivative of kernel " + n.kernel + " returned " +
                              std::string(dtype_name(c->dtype())) + shape_str(c->shape()) +
                              " for '" + a.param + "', which is " +
                              std::string(dtype_name(a.dtype)) + shape_str(a.shape));
      c = keep(c);
    }
    zero_written(n);
    for (std::size_t k = 0; k < n.arrays.size(); ++k)
      if (contrib[k]) adj.add(n.arrays[k], *contrib[k]);
  }
  std::vector<Value> out;
  for (std::size_t w = 0; w < wrt.size(); ++w) {
    if (wrt[w].start < 0) grads[w] = keep(adj.read(wrt[w].view));
    if (!grads[w]) {
      const Value zero = r.empty(wrt[w].view.shape, wrt[w].view.dtype);
      r.call(kernels::fill(), {0.0}, buffer(zero));
      grads[w] = zero;
    }
    out.push_back(*grads[w]);
  }
  return out;
}

}  // namespace eagle::diff::detail
