// A planned operation whose engine builds its own CUDA graph nodes (cudnn-frontend's
// populate_cuda_graph / update_cuda_graph): the recorded graph takes its nodes as a child graph,
// bind() updates them in place, and the engine's library handle and workspace come from the
// executor that owns them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "eagle/eagle.hpp"
#include "test_util.hpp"
#include "testing_engines.hpp"

namespace eagle {
namespace {

class PlannedEntry : public test::OnDevice {
 protected:
  void SetUp() override {
    OnDevice::SetUp();
    auto& c = test::engine_counts();
    c.runs = c.populates = c.updates = c.handles_made = c.handles_freed = 0;
    c.handle_seen = false;
    c.workspace_bytes_seen = 0;
  }
};
EAGLE_ON_EVERY_DEVICE(PlannedEntry);

TEST_P(PlannedEntry, AnEngineThatPopulatesItsNodesIsUpdatedOnBind) {
  op::Graph og("identity");
  const op::Tensor x = og.tensor({"x", {300}, DType::f32});
  og.pointwise("identity", x).set_output(true).set_name("y");
  const Kernel k = engines::planned_kernel(og, {plan::HeurMode::A}, test::populating_manifest());
  const Array x0 = test::random_array({300}, DType::f32, device());
  const Array x1 = test::random_array({300}, DType::f32, device());
  auto& c = test::engine_counts();
  {
    Graph g = Graph::record([&](Recorder& r) { r.result(r.call(k, {r.param("x", x0)})); });
    std::vector<std::string> warnings;
    g.set_warning_handler([&](const std::string& w) { warnings.push_back(w); });
    g.build(device());
    EXPECT_EQ(g()[0].to_vector<float>(), x0.to_vector<float>());
    g.bind("x", x1);
    EXPECT_EQ(g()[0].to_vector<float>(), x1.to_vector<float>());
    EXPECT_EQ(g.rebuild_count(), 0) << (warnings.empty() ? "" : warnings[0]);
    EXPECT_TRUE(c.handle_seen);
    EXPECT_EQ(c.workspace_bytes_seen, 512);
    EXPECT_EQ(c.handles_made, 1);
    if (device().is_cuda()) {
      EXPECT_EQ(c.populates, 1);
      EXPECT_EQ(c.updates, 1);
      EXPECT_EQ(c.runs, 0);  // never stream-captured
      EXPECT_NE(g.schedule().find("1 child graphs"), std::string::npos) << g.schedule();
    } else {
      EXPECT_EQ(c.runs, 2);
    }
  }
  EXPECT_EQ(c.handles_freed, 1);
}

}  // namespace
}  // namespace eagle
