// The native varlen attention engines (sdpa, sdpa_bwd) on an H200 against the reference engine
// (float64) on fresh random inputs: outputs poisoned, every padding row of q, k, v and d_o NaN,
// sequences of length 0, 1, C - 1, C, C + 1 (C = the kernels' 128-row tile), one sequence
// filling T, M < N slots with a repeated tail, L < T; GQA ratios 1, 4, 8; causal and not; both
// schedules; the backward's deterministic mode. Then a recorded graph: captured once for the
// capacity, replayed with smaller batches, and g() throwing for a broken cu_seqlens.
//
// Tolerances (METHOD.md), as the cuDNN tests: test::tolerance of the io dtype for o, twice it
// for the gradients (P and dS are rounded to the io dtype before their products), 1e-4 for
// the f32 statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "eagle/engines/planned_kernel.hpp"
#include "eagle/ragged/validate.hpp"
#include "native_structured.hpp"
#include "sdpa_check.hpp"

namespace eagle {
namespace {

using test::Arrays;
using test::kGpu;
using test::sdpa::Layout;
using test::sdpa::SdpaShape;

int64_t fwd_engine() {
  return test::native::engine("sdpa", "native_attention");
}
int64_t bwd_engine() {
  return test::native::engine("sdpa_bwd", "native_attention_bwd");
}

class NativeAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    EAGLE_SKIP_UNLESS_RUNS_HERE(fwd_engine());
    EAGLE_SKIP_UNLESS_RUNS_HERE(bwd_engine());
  }
};

// The config (engine, knobs) built for the GPU.
plan::ExecutionPlans native_plan(const op::Graph& g, int64_t engine, const plan::Knobs& knobs) {
  plan::ExecutionPlans p = engines::create_execution_plan(g.clone(), kGpu, engine, knobs);
  p.build_plans();
  return p;
}

struct Case {
  std::string name;
  std::vector<int64_t> len_q, len_kv;
  int64_t pad;  // padding rows after the last sequence (NaN in every input)
  int64_t heads, kv_heads;
};

std::vector<Case> cases() {
  const std::vector<int64_t> edges = {0, 1, 127, 128, 129, 5};
  std::vector<Case> c = {
      {"lengths 0 1 C-1 C C+1", edges, edges, 7, 4, 4},
      {"one sequence fills T", {300}, {300}, 0, 4, 4},
      {"M < N: repeated tail, L < T", {70, 200, 0, 0, 0}, {70, 200, 0, 0, 0}, 60, 8, 2},
      {"gqa 8, kv longer", {33, 140, 1}, {90, 160, 9}, 11, 8, 1},
      {"q longer than kv (causal rows see no key)", {150, 20}, {40, 20}, 3, 4, 4},
  };
  std::vector<int64_t> lq, lkv;
  const std::vector<int64_t> cu = test::random_cu_seqlens(7, 90);
  for (std::size_t b = 1; b < cu.size(); ++b) {
    lq.push_back(cu[b] - cu[b - 1]);
    lkv.push_back(cu[b] - cu[b - 1] + test::random_ints(1, 0, 40)[0]);
  }
  c.push_back({"random lengths, gqa 4", lq, lkv, 13, 8, 2});
  return c;
}

SdpaShape shape_of(const Case& c, const Layout& l, DType d, int64_t dim, bool causal) {
  SdpaShape s;
  s.dtype = d;
  s.heads = c.heads;
  s.kv_heads = c.kv_heads;
  s.head_dim = s.value_dim = dim;
  s.causal = causal;
  s.stats = true;
  return test::sdpa::shape_for(s, l);
}

// Every case, dtype, head dim, causal flag and schedule: the forward (o and stats), then the
// backward from the reference forward's o and stats with a fresh d_o.
TEST_F(NativeAttention, MatchesTheReferenceForwardAndBackward) {
  for (const Case& c : cases())
    for (DType d : {DType::bf16, DType::f16})
      for (int64_t dim : {64, 128})
        for (bool causal : {false, true}) {
          SCOPED_TRACE(c.name + " " + std::string(dtype_name(d)) + " D " + std::to_string(dim) +
                       (causal ? " causal" : ""));
          const Layout l = test::sdpa::thd(c.len_q, c.len_kv, c.pad);
          const SdpaShape s = shape_of(c, l, d, dim, causal);
          const op::Graph fwd = test::sdpa::sdpa_graph(s);
          const Arrays fin = test::sdpa::random_inputs(fwd, l);
          const Arrays fout = test::reference(fwd, fin);
          for (int64_t schedule : {0, 1}) {
            SCOPED_TRACE("schedule " + std::to_string(schedule));
            const plan::ExecutionPlans p = native_plan(fwd, fwd_engine(), {{"schedule", schedule}});
            test::sdpa::compare(fwd, l, test::execute(p, fin, kGpu), fout, 1.0);
          }
          const op::Graph bwd = test::sdpa::sdpa_bwd_graph(s);
          const Arrays in = test::sdpa::backward_inputs(fwd, fin, fout, bwd, l);
          const Arrays want = test::reference(bwd, in);
          for (int64_t schedule : {0, 1})
            for (int64_t det : {0, 1}) {
              SCOPED_TRACE("backward schedule " + std::to_string(schedule) + " deterministic " +
                           std::to_string(det));
              const plan::ExecutionPlans p =
                  native_plan(bwd, bwd_engine(), {{"deterministic", det}, {"schedule", schedule}});
              test::sdpa::compare(bwd, l, test::execute(p, in, kGpu), want, 2.0);
            }
        }
}

// Rows that see no key: o = 0 and stats = -inf (the reference's definition); dq = 0 there, and
// kv rows no query sees get dk = dv = 0.
TEST_F(NativeAttention, RowsThatSeeNoKeyGiveZeroAndMinusInfinity) {
  const Case c{"", {10, 4}, {6, 4}, 2, 4, 4};  // causal: q rows 0..3 of sequence 0 see no key
  const Layout l = test::sdpa::thd(c.len_q, c.len_kv, c.pad);
  const SdpaShape s = shape_of(c, l, DType::bf16, 64, true);
  const op::Graph g = test::sdpa::sdpa_graph(s);
  const Arrays in = test::sdpa::random_inputs(g, l);
  test::sdpa::expect_rows_see_no_key(
      g, test::execute(native_plan(g, fwd_engine(), {{"schedule", 0}}), in, kGpu), s, 4);
}

// The deterministic backward gives bitwise the same gradients on every run.
TEST_F(NativeAttention, TheDeterministicBackwardRepeatsBitwise) {
  const Case c{"", {300, 129, 64}, {300, 129, 64}, 5, 8, 2};
  const Layout l = test::sdpa::thd(c.len_q, c.len_kv, c.pad);
  const SdpaShape s = shape_of(c, l, DType::bf16, 128, true);
  const op::Graph fwd = test::sdpa::sdpa_graph(s);
  const Arrays fin = test::sdpa::random_inputs(fwd, l);
  const Arrays fout = test::reference(fwd, fin);
  const op::Graph bwd = test::sdpa::sdpa_bwd_graph(s);
  const op::Node n = bwd.nodes()[0];
  const Arrays in = test::sdpa::backward_inputs(fwd, fin, fout, bwd, l);
  const plan::ExecutionPlans p =
      native_plan(bwd, bwd_engine(), {{"deterministic", 1}, {"schedule", 1}});
  const Arrays a = test::execute(p, in, kGpu), b = test::execute(p, in, kGpu);
  for (const char* port : {"dq", "dk", "dv"}) {
    const int64_t uid = n.output(port).uid();
    const std::vector<double> x = test::sdpa::active(a.at(uid), port[1] == 'q' ? &l.q : &l.kv);
    const std::vector<double> y = test::sdpa::active(b.at(uid), port[1] == 'q' ? &l.q : &l.kv);
    ASSERT_EQ(x.size(), y.size());
    for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], y[i]) << port << " at " << i;
  }
}

// The THD plan list holds the native engine with both schedules, flat then persistent, side by
// side; where cuDNN offers nothing it leads (else the measured rule of rank_attention places it).
TEST_F(NativeAttention, TheThdPlanListHoldsEverySchedule) {
  const Layout l = test::sdpa::thd({40, 9}, {40, 9}, 0);
  const SdpaShape s = shape_of({"", {}, {}, 0, 4, 4}, l, DType::bf16, 128, true);
  const plan::ExecutionPlans plans =
      engines::create_execution_plans(test::sdpa::sdpa_graph(s), kGpu);
  int first = -1;
  bool backend = false;
  for (int i = 0; i < plans.count(); ++i) {
    backend |= plans.at(i).engine_id < plan::kBackendIdEnd;
    if (first < 0 && plans.at(i).engine_id == fwd_engine()) first = i;
  }
  ASSERT_GE(first, 0) << plans.describe();
  ASSERT_LT(first + 1, plans.count());
  EXPECT_EQ(plans.at(first).knobs.at("schedule"), 0);
  EXPECT_EQ(plans.at(first + 1).engine_id, fwd_engine());
  EXPECT_EQ(plans.at(first + 1).knobs.at("schedule"), 1);
  if (!backend) {
    EXPECT_EQ(first, 0) << plans.describe();
  }
}

// A graph recorded once for capacity (T rows, N slots) and replayed with smaller batches (fewer
// sequences, fewer active rows, NaN in the rows past the active end) gives each batch's
// attention; a broken cu_seqlens makes g() throw and writes nothing out of bounds
// (compute-sanitizer memcheck runs this test on the H200).
TEST_F(NativeAttention, ARecordedGraphServesEveryBatchUpToItsCapacity) {
  const int64_t slots = 6;
  const Layout full = test::sdpa::thd({100, 30, 129, 1, 0, 40}, {100, 30, 129, 1, 0, 40}, 20);
  const SdpaShape s = shape_of({"", {}, {}, 0, 8, 2}, full, DType::bf16, 64, true);
  const op::Graph og = test::sdpa::sdpa_graph(s);
  // OPENSOURCE: the plan list without the cuDNN backend, so the native engine leads.
  const Kernel attention = engines::planned_kernel(og, {plan::HeurMode::OPENSOURCE});
  const Arrays in0 = test::sdpa::random_inputs(og, full);
  const op::Node n = og.nodes()[0];
  auto dev = [&](const Arrays& a, const char* port) { return a.at(n.input(port).uid()).to(kGpu); };
  const Array o_out = test::poisoned(n.output("o").dims(), n.output("o").dtype(), kGpu);
  const Array stats_out = test::poisoned(n.output("stats").dims(), n.output("stats").dtype(), kGpu);
  Graph g = Graph::record([&](Recorder& r) {
    std::vector<Value> in;  // the planned kernel's operands in uid order: q, k, v, cu_q, cu_kv
    for (const char* p : {"q", "k", "v", "cu_seqlens_q", "cu_seqlens_kv"})
      in.push_back(r.param(p, dev(in0, p)));
    ragged::validate(r, in[3], s.s_q, "cu_seqlens_q");
    ragged::validate(r, in[4], s.s_kv, "cu_seqlens_kv");
    // Outputs into NaN-filled arrays of ours: the padding rows the kernels leave alone stay
    // defined (compute-sanitizer initcheck reads every row when they come back).
    r.result(r.call_all(attention, std::vector<Arg>(in.begin(), in.end()),
                        CallOptions{{o_out, stats_out}, "attention"}));
  });
  g.build(kGpu);
  // A batch: lengths padded with empty slots to N, rows past its active end NaN.
  auto run = [&](const std::vector<int64_t>& lengths) {
    std::vector<int64_t> len = lengths;
    len.resize(slots, 0);
    Layout l = test::sdpa::thd(len, len, 0);
    l.q.rows = l.kv.rows = s.s_q;  // the capacity: everything past the active end is padding
    const Arrays in = test::sdpa::random_inputs(og, l);
    for (const char* p : {"q", "k", "v", "cu_seqlens_q", "cu_seqlens_kv"}) g.bind(p, dev(in, p));
    g();
    Arrays got;
    got[n.output("o").uid()] = o_out.to(Device::cpu());
    got[n.output("stats").uid()] = stats_out.to(Device::cpu());
    test::sdpa::compare(og, l, got, test::reference(og, in), 1.0);
  };
  run({100, 30, 129, 1, 0, 40});
  run({250});
  run({3, 0, 77});
  run({});
  auto cu = [&](std::vector<int64_t> v) {
    return test::from_ints(v, {slots + 1}, DType::i32, Device::cpu()).to(kGpu);
  };
  const std::vector<std::vector<int64_t>> broken = {{0, 50, 40, 60, 60, 60, 60},
                                                    {0, 50, 60, 60, 60, 60, s.s_q + 500},
                                                    {3, 50, 60, 60, 60, 60, 60}};
  for (const std::vector<int64_t>& b : broken) {
    g.bind("cu_seqlens_q", cu(b));
    if (ragged::checks_enabled())
      EXPECT_THROW(g(), InvalidArgument) << b[0] << ", " << b[2] << ", " << b[6];
    else
      g();  // unreported without the check, and still in bounds
  }
  run({12, 12});  // the graph stays usable
  EXPECT_EQ(g.rebuild_count(), 0);
}

}  // namespace
}  // namespace eagle
