// engines::planned_segments: an op::Graph mixing engine families as planned kernels of its
// segments; recorded in order they compute what the whole graph's planned kernel computes, and
// diff::gradients through them gives the whole kernel's gradients.
#include <gtest/gtest.h>

#include <map>

#include "eagle/eagle.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using op::Tensor;

TEST(PlannedSegments, RecordedInOrderTheyMatchTheWholeGraphAndItsGradients) {
  const Device cpu = Device::cpu();
  op::Graph g("norm_matmul_mask");
  const Tensor x = g.tensor({"x", {5, 4}, DType::f64});
  const Tensor w = g.tensor({"w", {4, 3}, DType::f64});
  const Tensor keep = g.tensor({"keep", {5, 1}, DType::u8});
  const Tensor zero = g.tensor({"zero", {1}, DType::f64});
  const Tensor h = g.op("rms_norm", {{"x", x}}).at("y");
  g.where(keep, g.pointwise("silu", g.matmul(h, w)), zero).set_output(true).set_name("y");
  const std::vector<engines::PlannedSegment> segs = engines::planned_segments(g);
  ASSERT_EQ(segs.size(), 3u);  // rms_norm; matmul; silu and where
  EXPECT_EQ(segs[0].inputs, std::vector<int64_t>{x.uid()});
  EXPECT_EQ(segs[2].kernel.def().arrays.size(), 4u);  // matmul's output, keep, zero -> y
  // With epilogues: the matmul takes silu and where, and outputs its result too.
  engines::PlanningOptions fused;
  fused.fuse_epilogues = true;
  const std::vector<engines::PlannedSegment> two = engines::planned_segments(g, fused);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].kernel.def().arrays.size(), 6u);  // h, w, keep, zero -> the product, y

  const Array x0 = test::random_array({5, 4}, DType::f64, cpu);
  const Array w0 = test::random_array({4, 3}, DType::f64, cpu);
  const Array keep0 = Array::from(std::vector<uint8_t>{1, 1, 0, 1, 0}, {5, 1}, cpu);
  const Array zero0 = Array::from(std::vector<double>{0}, {1}, cpu);
  std::vector<std::vector<double>> runs;
  for (bool segmented : {false, true}) {
    Graph graph = Graph::record(
        [&](Recorder& r) {
          std::map<int64_t, Value> v = {{x.uid(), r.param("x", x0)},
                                        {w.uid(), r.param("w", w0)},
                                        {keep.uid(), r.param("keep", keep0)},
                                        {zero.uid(), r.param("zero", zero0)}};
          Value y;
          if (segmented) {
            for (const engines::PlannedSegment& s : segs) {
              std::vector<Arg> args;
              for (int64_t uid : s.inputs) args.emplace_back(v.at(uid));
              const std::vector<Value> out = r.call_all(s.kernel, args);
              for (std::size_t i = 0; i < out.size(); ++i) v.insert_or_assign(s.outputs[i], out[i]);
            }
            y = v.at(g.operand_tensors().back().uid());
          } else {
            y = r.call(engines::planned_kernel(g),
                       {v.at(x.uid()), v.at(w.uid()), v.at(keep.uid()), v.at(zero.uid())});
          }
          const Value loss = r.call(kernels::sum(), {y});
          std::vector<Value> out = diff::gradients(r, {loss}, {v.at(x.uid()), v.at(w.uid())});
          out.insert(out.begin(), y);
          r.result(out);
        },
        RecordOptions{.record = true});
    graph.build(cpu);
    std::vector<double> all;
    for (const Array& a : graph()) {
      const std::vector<double> part = a.to_vector<double>();
      all.insert(all.end(), part.begin(), part.end());
    }
    runs.push_back(all);
  }
  ASSERT_EQ(runs[0].size(), runs[1].size());
  for (std::size_t i = 0; i < runs[0].size(); ++i)
    EXPECT_NEAR(runs[1][i], runs[0][i], 1e-12 * (1 + std::abs(runs[0][i]))) << "element " << i;
}

// A matmul with its epilogue (fuse_epilogues), one segment, on cuda:0 against the same segment on
// the CPU: cuDNN fuses it in bf16 and f16; in f32 no engine does and the segment runs its pieces
// in one call. The matmul's result (kept for the
// derivative) is compared too. Odd sizes (not tile multiples), b given row-major or as the
// transpose of a row-major array, outputs poisoned first.
struct EpilogueCase {
  const char* name;
  DType dtype;
  bool transposed_b;
  const char* op;  // gelu, or gelu_backward reading a third operand z
};

class EpilogueOnGpu : public ::testing::TestWithParam<EpilogueCase> {};

TEST_P(EpilogueOnGpu, MatchesTheCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const EpilogueCase& p = GetParam();
  const int64_t m = 200, k = 72, n = 136;
  op::Graph g("epilogue");
  const Tensor a = g.tensor({"a", {m, k}, p.dtype});
  const Tensor b = p.transposed_b ? g.tensor({"b", {k, n}, p.dtype, op::Dims{1, k}})
                                  : g.tensor({"b", {k, n}, p.dtype});
  const Tensor c = g.matmul(a, b);
  const bool binary = std::string(p.op) == "gelu_backward";
  const Tensor z = binary ? g.tensor({"z", {m, n}, p.dtype}) : Tensor();
  (binary ? g.pointwise(p.op, c, z) : g.pointwise(p.op, c)).set_output(true).set_name("y");
  engines::PlanningOptions options;
  options.fuse_epilogues = true;
  const std::vector<engines::PlannedSegment> segs = engines::planned_segments(g, options);
  ASSERT_EQ(segs.size(), 1u);
  ASSERT_EQ(segs[0].outputs.size(), 2u);  // the matmul's result, then y
  const Device cpu = Device::cpu(), gpu = Device::cuda(0);
  const Array a0 = test::random_array({m, k}, p.dtype, cpu);
  const Array b0 = test::random_array(p.transposed_b ? Shape{n, k} : Shape{k, n}, p.dtype, cpu);
  const Array z0 = test::random_array({m, n}, p.dtype, cpu);
  auto run = [&](Device d) {
    Graph graph = Graph::record([&](Recorder& r) {
      std::vector<Arg> args = {r.param("a", a0.to(d))};
      const Value bv = r.param("b", b0.to(d));
      args.emplace_back(p.transposed_b ? bv.transpose(0, 1) : bv);
      if (binary) args.emplace_back(r.param("z", z0.to(d)));
      r.result(r.call_all(
          segs[0].kernel, args,
          CallOptions{{test::poisoned({m, n}, p.dtype, d), test::poisoned({m, n}, p.dtype, d)},
                      ""}));
    });
    graph.build(d);
    std::vector<std::vector<double>> out;
    for (const Array& x : graph()) out.push_back(x.to(cpu).to_vector<double>());
    return out;
  };
  const auto want = run(cpu), got = run(gpu);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_CLOSE(got[0], want[0], test::tolerance(p.dtype));  // the matmul's result
  EXPECT_CLOSE(got[1], want[1], test::tolerance(p.dtype));  // the epilogue's
}

INSTANTIATE_TEST_SUITE_P(
    PlannedSegments, EpilogueOnGpu,
    ::testing::Values(EpilogueCase{"bf16_gelu", DType::bf16, false, "gelu"},
                      EpilogueCase{"f16_gelu", DType::f16, false, "gelu"},
                      EpilogueCase{"bf16_gelu_backward_bt", DType::bf16, true, "gelu_backward"},
                      EpilogueCase{"f32_gelu_unfused", DType::f32, false, "gelu"},
                      EpilogueCase{"f32_gelu_backward_bt_unfused", DType::f32, true,
                                   "gelu_backward"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace eagle
