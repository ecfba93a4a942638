#include "train/plans.hpp"

#include <string>
#include <vector>

#include "eagle/core/error.hpp"
#include "eagle/engines/builtin.hpp"
#include "eagle/op/backward.hpp"
#include "engines/graph_segments.hpp"

namespace eagle::train {

namespace {

// One op graph's plan list and choice; false when no entry builds.
bool print_one(const op::Graph& g, const std::string& where, Device device, std::FILE* to) {
  if (g.nodes().empty()) return true;
  std::string ops;
  for (const op::Node& n : g.nodes()) ops += (ops.empty() ? "" : " ") + n.op();
  std::fprintf(to, "%s [%s]\n", where.c_str(), ops.c_str());
  try {
    plan::ExecutionPlans plans = engines::create_execution_plans(g, device);
    std::fprintf(to, "%s", plans.describe().c_str());
    const int chosen = plans.build_plans();
    std::fprintf(to, "  chosen: entry %d\n", chosen);
    return true;
  } catch (const NotSupported& e) {
    std::fprintf(to, "  no engine serves it: %s\n", e.what());
    return false;
  }
}

}  // namespace

int print_plans(const ModelConfig& config, int64_t capacity, int64_t slots, Device device,
                std::FILE* to) {
  Model model(config);
  int unserved = 0;
  for (const op::Graph& g : model.op_graphs(capacity, slots)) {
    int index = 0;
    for (const engines::detail::Segment& s : engines::detail::segments(g)) {
      const std::string where = g.name() + " segment " + std::to_string(index++);
      unserved += print_one(s.graph, where, device, to) ? 0 : 1;
      std::vector<op::Tensor> cotangents, wrt;
      for (const op::Tensor& t : s.graph.operand_tensors()) {
        const DType d = t.dtype();
        if (d != DType::f32 && d != DType::f64 && d != DType::bf16 && d != DType::f16) continue;
        (t.producer() < 0 ? wrt : cotangents).push_back(t);
      }
      if (cotangents.empty() || wrt.empty()) continue;
      const op::BackwardGraph b = op::backward(s.graph, cotangents, wrt);
      for (const auto& [part, graph] :
           {std::pair{"recompute", &b.recompute}, {"backward", &b.graph}})
        for (const engines::detail::Segment& piece : engines::detail::segments(*graph))
          unserved += print_one(piece.graph, where + " " + part, device, to) ? 0 : 1;
    }
  }
  return unserved;
}

}  // namespace eagle::train
