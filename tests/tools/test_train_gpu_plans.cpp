// Whether a GPU's engines serve every piece of the training job's step, checked without a GPU:
// each forward segment of the model's operation graphs (as engines::planned_segments cuts them)
// and each segment of their backward and recompute graphs (as a planned kernel's derivative
// records them) gets a plan list for a stand-in H200 descriptor (sm 90) in which some entry's
// engine accepts the graph (check_support). Ranking and check_support read capabilities, facts
// and the descriptor alone, so this runs in a CPU-only build too; it says nothing of whether the
// plans then build and run on a GPU (EAGLE_TRAIN_PLANS_VERBOSE=1 prints each list's first entry).
// In a build without CUDA a decline for want of kernels or CUDA libraries counts as accepting.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "eagle/op/backward.hpp"
#include "engines/graph_segments.hpp"
#include "test_util.hpp"
#include "train/model.hpp"

namespace eagle {
namespace {

bool is_float(DType d) {
  return d == DType::f32 || d == DType::f64 || d == DType::f16 || d == DType::bf16;
}

// "" when some engine plans `g` for the stand-in GPU, else why not.
std::string unplanned(const op::Graph& g) {
  try {
    const plan::ExecutionPlans plans = plan::ExecutionPlans::create(
        g.clone(), engines::builtin_manifest(), test::stand_in_gpu(90), {plan::HeurMode::A});
    if (std::getenv("EAGLE_TRAIN_PLANS_VERBOSE"))
      std::printf("%s: %s\n", g.name().c_str(), plans.count() > 0 ? plans.name_at(0).c_str() : "-");
    if (plans.count() == 0) return "an empty plan list";
    // Some entry's engine must accept the graph (its check_support, which the build runs
    // first); a backend entry (cuDNN, when this build has it) is taken on trust.
    std::string declines;
    for (int i = 0; i < plans.count(); ++i) {
      const plan::Engine* e = engines::builtin_manifest().engine(plans.at(i).engine_id);
      if (!e) return "";
      try {
        e->check_support(plans.graph(), plans.facts(), test::stand_in_gpu(90));
        return "";
      } catch (const NotSupported& why) {
        declines += std::string(" [") + why.what() + "]";
#ifndef EAGLE_HAVE_CUDA
        // A build without CUDA holds no kernels: such a decline says nothing of a GPU build's.
        const std::string text = why.what();
        if (text.find("in this build") != std::string::npos ||
            text.find("no CUDA") != std::string::npos)
          return "";
#endif
      }
    }
    return "every entry declines:" + declines;
  } catch (const NotSupported& e) {
    return e.what();
  }
}

std::string describe(const op::Graph& g) {
  std::ostringstream s;
  for (const op::Node& n : g.nodes()) {
    s << n.op() << "(";
    for (const auto& [port, t] : n.inputs())
      s << port << ":" << dtype_name(t.dtype()) << shape_str(t.dims()) << " ";
    s << ") ";
  }
  return s.str();
}

// "" when `s` plans whole, or, for a matmul with its epilogue, when each of its unfused pieces
// does (what its planned kernel falls back to where no engine fuses them).
std::string unplanned_segment(const engines::detail::Segment& s) {
  std::string why = unplanned(s.graph);
  if (why.empty() || !s.epilogue) return why;
  for (const engines::detail::Segment& piece : engines::detail::segments(s.graph, false))
    if (const std::string p = unplanned(piece.graph); !p.empty())
      return why + "; unfused, " + describe(piece.graph) + "-> " + p;
  return "";
}

class TrainGpuPlans : public ::testing::TestWithParam<DType> {};

TEST_P(TrainGpuPlans, EverySegmentOfTheStepHasAPlanOnAnH200) {
  train::ModelConfig c;  // eagle train's GPU defaults, at a smaller capacity
  c.dim = 512;
  c.heads = 8;
  c.attention_dtype = DType::bf16;
  c.matmul_dtype = GetParam();
  train::Model model(c);
  std::vector<std::string> failures;
  auto check = [&](const op::Graph& g, const std::string& where) {
    if (g.nodes().empty()) return;
    for (const engines::detail::Segment& s : engines::detail::segments(g)) {
      const std::string why = unplanned_segment(s);
      if (!why.empty()) failures.push_back(where + ": " + describe(s.graph) + "-> " + why);
    }
  };
  for (const op::Graph& g : model.op_graphs(512, 8)) {
    for (const engines::detail::Segment& s : engines::detail::segments(g)) {
      const std::string where = g.name() + " segment " + describe(s.graph);
      const std::string why = unplanned_segment(s);
      if (!why.empty()) failures.push_back(where + "-> " + why);
      std::vector<op::Tensor> cotangents, wrt;
      for (const op::Tensor& t : s.graph.operand_tensors()) {
        if (!is_float(t.dtype())) continue;
        (t.producer() < 0 ? wrt : cotangents).push_back(t);
      }
      if (cotangents.empty() || wrt.empty()) continue;
      const op::BackwardGraph b = op::backward(s.graph, cotangents, wrt);
      check(b.recompute, where + " recompute");
      check(b.graph, where + " backward");
    }
  }
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

// The projections in f32 (the default) and in bf16 (--matmul-dtype bf16).
INSTANTIATE_TEST_SUITE_P(MatmulDtypes, TrainGpuPlans, ::testing::Values(DType::f32, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace eagle
