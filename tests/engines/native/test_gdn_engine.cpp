// The native gdn engine (the chunked gated delta rule forward) on an H200 against the reference
// engine (float64) on fresh random inputs: o and final_state poisoned first, NaN in every
// padding row of q, k, v, g and beta, sequences of length 0, 1, C - 1, C, C + 1 (C = 64) and one
// near T, M < N slots with a repeated tail, GQA, each option on and off. The reference runs on
// the active rows only (it takes cu_seqlens ending at T); the engine on a buffer of T rows.
// Then the planning side on the CPU: what the engine is offered and what it declines, and why.
//
// Tolerance: twice test::tolerance of the io dtype for o and the final state (the chunked form
// rounds W, U, v', the chunk states and P to the io dtype before their products, as fla does).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compare.hpp"
#include "cuda_build.hpp"
#include "native_structured.hpp"
#include "planned_runs.hpp"
#include "poison.hpp"
#include "random.hpp"

namespace eagle::test::native {
namespace {

int64_t gdn_id() {
  return engine("linear_attention", "native_gdn");
}

struct GdnCase {
  GdnCase(std::string n, std::vector<int64_t> l, int64_t p)
      : name(std::move(n)), lengths(std::move(l)), pad(p) {}
  std::string name;
  std::vector<int64_t> lengths;
  int64_t pad;  // padding rows after the last sequence
  int64_t h = 2, hv = 2, dim = 64;
  DType dtype = DType::bf16;
  bool l2 = true, safe_gate = false, beta_sigmoid = false, initial_state = true;
  bool final_state = true;
  DType state_dtype = DType::f32;
  DType gate_dtype = DType::f32;       // g, beta, a_log, dt_bias
  std::optional<DType> dt_bias_dtype;  // dt_bias's, where it differs from gate_dtype
  std::optional<double> scale;
  // The engine's knobs: pipeline 1 prefetches the next chunk's rows in the state loop, solve 1
  // inverts I + A by 16 x 16 blocks in the prepare launch, schedule 1 is persistent, prepare 1
  // is the prepare launch's compact layout, state 1 a state CTA per head (0: per 32 columns; 2:
  // the state transposed in registers), stores 1 W, U and o staged through shared memory (0:
  // from the fragments).
  int64_t pipeline = 0, solve = 0, schedule = 0, prepare = 0, state = 0, stores = 1;
  std::vector<int64_t> cu() const {
    std::vector<int64_t> c = {0};
    for (int64_t l : lengths) c.push_back(c.back() + l);
    return c;
  }
  int64_t active() const { return cu().back(); }
  int64_t slots() const { return static_cast<int64_t>(lengths.size()); }
};

// The gdn graph of `c` over `rows` token rows (q first: it names the io dtype).
op::Graph gdn_graph(const GdnCase& c, int64_t rows) {
  op::Graph g("gdn");
  op::Ports ports;
  auto in = [&](const char* name, op::Dims dims, DType d) {
    ports.emplace_back(name, g.tensor({name, dims, d}));
  };
  in("q", {rows, c.h, c.dim}, c.dtype);
  in("k", {rows, c.h, c.dim}, c.dtype);
  in("v", {rows, c.hv, c.dim}, c.dtype);
  in("g", {rows, c.hv}, c.gate_dtype);
  in("beta", {rows, c.hv}, c.gate_dtype);
  in("cu_seqlens", {c.slots() + 1}, DType::i32);
  if (c.initial_state) in("initial_state", {c.slots(), c.hv, c.dim, c.dim}, c.state_dtype);
  if (c.safe_gate) {
    in("a_log", {c.hv}, c.gate_dtype);
    in("dt_bias", {c.hv}, c.dt_bias_dtype.value_or(c.gate_dtype));
  }
  op::Attrs attrs = {{"use_qk_l2norm", c.l2},
                     {"safe_gate", c.safe_gate},
                     {"use_beta_sigmoid", c.beta_sigmoid},
                     {"output_final_state", c.final_state}};
  if (c.scale) attrs.emplace_back("scale", *c.scale);
  for (auto& [port, t] : g.op("gdn", ports, attrs)) t.set_output(true);
  return g;
}

// Fresh inputs by port, over T = active + pad rows, padding rows NaN. Without the l2 norm the
// keys are drawn with |k|^2 near 1 so the recurrence stays stable (beta |k|^2 < 1).
std::map<std::string, Array> random_gdn_inputs(const GdnCase& c) {
  const int64_t t = c.active() + c.pad;
  const double kr = c.l2 ? 1.0 : std::sqrt(3.0 / static_cast<double>(c.dim));
  std::map<std::string, Array> in;
  const Device cpu = Device::cpu();
  in["q"] = random_array({t, c.h, c.dim}, c.dtype, cpu);
  in["k"] = random_array({t, c.h, c.dim}, c.dtype, cpu, -kr, kr);
  in["v"] = random_array({t, c.hv, c.dim}, c.dtype, cpu);
  const DType gd = c.gate_dtype;
  in["g"] = c.safe_gate ? random_array({t, c.hv}, gd, cpu, -1, 1)
                        : random_array({t, c.hv}, gd, cpu, -0.7, -0.02);
  in["beta"] = c.beta_sigmoid ? random_array({t, c.hv}, gd, cpu, -2, 2)
                              : random_array({t, c.hv}, gd, cpu, 0.1, 0.9);
  RaggedRows rows = rows_of(c.cu());
  rows.rows = t;
  for (const char* p : {"q", "k", "v", "g", "beta"}) poison_padding(in[p], rows);
  in["cu_seqlens"] = from_ints(c.cu(), {c.slots() + 1}, DType::i32, cpu);
  if (c.initial_state)
    in["initial_state"] =
        random_array({c.slots(), c.hv, c.dim, c.dim}, c.state_dtype, cpu, -0.5, 0.5);
  if (c.safe_gate) {
    in["a_log"] = random_array({c.hv}, gd, cpu, -1, 0);
    in["dt_bias"] = random_array({c.hv}, gd, cpu, -0.5, 0.5);
  }
  return in;
}

// Inputs by uid of `g` from inputs by port; token-row inputs cut to their first `rows` rows.
Arrays by_uid(const op::Graph& g, const std::map<std::string, Array>& in, int64_t rows) {
  Arrays out;
  for (const auto& [port, t] : g.nodes()[0].inputs()) {
    Array a = in.at(port);
    const bool token_rows =
        port == "q" || port == "k" || port == "v" || port == "g" || port == "beta";
    if (token_rows && a.shape()[0] != rows) a = a.slice(0, 0, rows).to(Device::cpu());
    out[t.uid()] = a;
  }
  return out;
}

// What the engine gave for `c` (`got`, by uid of its graph over T rows `full`) against the
// reference run on the active rows: o and the final state.
void expect_reference(const GdnCase& c, const op::Graph& full,
                      const std::map<std::string, Array>& in, const Arrays& got) {
  const int64_t active = c.active();
  const double tol = 2 * tolerance(c.dtype);
  const op::Node fn = full.nodes()[0];
  if (active == 0) {  // nothing to run: the final state is the initial state (or zeros)
    const std::vector<double> fin = values(got.at(fn.output("final_state").uid()));
    const std::vector<double> init =
        c.initial_state ? values(in.at("initial_state")) : std::vector<double>(fin.size(), 0.0);
    ASSERT_EQ(fin, init);
    return;
  }
  const op::Graph packed = gdn_graph(c, active);
  const Arrays want = reference(packed, by_uid(packed, in, active));
  const op::Node pn = packed.nodes()[0];
  {
    SCOPED_TRACE("o");
    const Array o = got.at(fn.output("o").uid()).slice(0, 0, active).to(Device::cpu());
    EXPECT_CLOSE(values(o), values(want.at(pn.output("o").uid())), tol);
  }
  if (c.final_state) {
    SCOPED_TRACE("final_state");
    EXPECT_CLOSE(values(got.at(fn.output("final_state").uid())),
                 values(want.at(pn.output("final_state").uid())), tol);
  }
}

// The engine's o (active rows) and final state against the reference's.
void check_case(const GdnCase& c) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(c.dtype)) + " K=V=" + std::to_string(c.dim) +
               " H " + std::to_string(c.h) + " HV " + std::to_string(c.hv) + (c.l2 ? " l2" : "") +
               (c.safe_gate ? " safe_gate" : "") + (c.beta_sigmoid ? " beta_sigmoid" : "") +
               (c.initial_state ? " initial_state" : "") +
               (c.pipeline ? " pipelined state loop" : "") + (c.solve ? " blocked solve" : "") +
               (c.schedule ? " schedule " + std::to_string(c.schedule) : "") +
               (c.prepare ? " compact prepare" : "") + (c.stores ? "" : " fragment stores") +
               (c.state == 1   ? " state per head"
                : c.state == 2 ? " state rows"
                : c.state == 3 ? " state rows, two CTAs per head, long sequences split"
                               : ""));
  const int64_t t = c.active() + c.pad;
  const op::Graph full = gdn_graph(c, t);
  const std::map<std::string, Array> in = random_gdn_inputs(c);
  plan::ExecutionPlans p = engines::create_execution_plan(full.clone(), kGpu, gdn_id(),
                                                          {{"pipeline", c.pipeline},
                                                           {"solve", c.solve},
                                                           {"schedule", c.schedule},
                                                           {"prepare", c.prepare},
                                                           {"state", c.state},
                                                           {"stores", c.stores}});
  p.build_plans();
  expect_reference(c, full, in, execute(p, by_uid(full, in, t), kGpu));
}

class NativeGdn : public ::testing::Test {
 protected:
  void SetUp() override { EAGLE_SKIP_UNLESS_RUNS_HERE(gdn_id()); }
};

TEST_F(NativeGdn, EdgeLengthsEveryDtypeAndHeadDim) {
  for (DType d : {DType::bf16, DType::f16})
    for (int64_t dim : {64, 128}) {
      GdnCase c{"lengths 0 1 C-1 C C+1 130", {0, 1, 63, 64, 65, 130}, 9};
      c.dtype = d;
      c.dim = dim;
      check_case(c);
    }
}

TEST_F(NativeGdn, OneSequenceNearT) {
  GdnCase c{"one long sequence", {1000}, 3};
  c.dim = 128;
  c.h = 1;
  c.hv = 4;
  check_case(c);
}

TEST_F(NativeGdn, UnusedSlotsRepeatTheEnd) {
  GdnCase c{"M < N: repeated tail", {70, 200, 0, 0, 0}, 60};
  check_case(c);
  c.initial_state = false;
  c.name += ", no initial state";
  check_case(c);
}

TEST_F(NativeGdn, GroupedValueHeads) {
  for (int64_t group : {2, 4}) {
    GdnCase c{"gqa " + std::to_string(group), {33, 140, 1, 64}, 5};
    c.h = 2;
    c.hv = 2 * group;
    c.dim = 128;
    check_case(c);
  }
}

// The state launch with the state transposed in registers (knob state = 2, and 3: two CTAs per
// head, where every sequence of these small batches is past its balanced share and is split) on
// small batches, flat and persistent: what the sanitizers run for it (every knob point also runs
// in EveryKnobsKernelsMatchTheReference).
TEST_F(NativeGdn, TheStateRowsLaunchOnSmallBatches) {
  for (int64_t state : {2, 3})
    for (int64_t schedule : {0, 2})
      for (int64_t dim : {64, 128}) {
        GdnCase c{"lengths 0 1 C-1 C C+1 130, gqa 2", {0, 1, 63, 64, 65, 130}, 7};
        c.h = 2;
        c.hv = 4;
        c.dim = dim;
        c.pipeline = 1;
        c.solve = 1;
        c.prepare = 1;
        c.schedule = schedule;
        c.state = state;
        check_case(c);
      }
}

// Knob state = 3 on a batch where some sequences are past their balanced share by a quarter
// (heads x the batch's chunks / the device's SMs, rows_split) and others are not. At one head
// (205 chunks, 132 SMs) the 200-chunk and 3-chunk sequences are split over two CTAs, half the
// value columns each, and the 1-chunk ones run whole on their first CTA (the second returns at
// once). With 48 value heads (26 chunks) only the 21-chunk sequence is split, and the flat grid
// gives a second CTA to the two longest slots only (split_rank_limit: 132 SMs / 48): the third
// and later run whole, with no second CTA at all.
TEST_F(NativeGdn, TheSplitStateRowsSplitOnlyTheLongSequences) {
  auto split_case = [](const std::string& name, int64_t longest, int64_t heads, int64_t schedule) {
    GdnCase c{name, {longest, 5, 64, 0, 130}, 9};
    c.h = c.hv = heads;
    c.pipeline = c.solve = c.prepare = 1;
    c.schedule = schedule;
    c.state = 3;
    check_case(c);
  };
  for (int64_t schedule : {0, 2}) {
    split_case("one long sequence among short ones", 12800, 1, schedule);
    split_case("48 heads, a second CTA for the two longest slots", 1300, 48, schedule);
  }
}

TEST_F(NativeGdn, EachOptionOnAndOff) {
  for (int mask = 0; mask < 16; ++mask) {
    GdnCase c{"options " + std::to_string(mask), {100, 64, 7}, 4};
    c.l2 = mask & 1;
    c.safe_gate = mask & 2;
    c.beta_sigmoid = mask & 4;
    c.initial_state = mask & 8;
    if (mask == 5) c.scale = 0.3;
    check_case(c);
  }
  GdnCase f{"no final state", {80, 3}, 2};
  f.final_state = false;
  check_case(f);
}

TEST_F(NativeGdn, StatesInSixteenBitDtypes) {
  for (DType sd : {DType::bf16, DType::f16}) {
    GdnCase c{"state " + std::string(dtype_name(sd)), {90, 20}, 3};
    c.state_dtype = sd;
    check_case(c);
  }
}

// g, beta, a_log and dt_bias in 16-bit dtypes (the kernels read them by their dtype), with
// safe_gate and use_beta_sigmoid off and on.
TEST_F(NativeGdn, GatesInSixteenBitDtypes) {
  for (DType gd : {DType::bf16, DType::f16})
    for (bool options : {false, true}) {
      GdnCase c{"gates " + std::string(dtype_name(gd)) + (options ? " safe_gate beta_sigmoid" : ""),
                {90, 20},
                3};
      c.gate_dtype = gd;
      c.safe_gate = c.beta_sigmoid = options;
      check_case(c);
    }
}

// One graph recorded for a capacity of 400 rows in 5 slots, replayed with batches of every
// shape up to it (fewer sequences, one sequence of all 400 rows, none): each replay gives that
// batch's o and final states (the kernels read the batch from the device only), nothing rebuilt.
TEST_F(NativeGdn, ARecordedGraphServesEveryBatchUpToItsCapacity) {
  constexpr int64_t kRows = 400, kSlots = 5;
  auto case_of = [&](std::vector<int64_t> lens) {
    lens.resize(static_cast<std::size_t>(kSlots), 0);
    GdnCase c{"replay", lens, 0};
    c.hv = 4;
    c.pad = kRows - c.active();
    return c;
  };
  const GdnCase c0 = case_of({100, 30, 129, 1, 0});
  const op::Graph og = gdn_graph(c0, kRows);
  RecordedOp g(og, by_uid(og, random_gdn_inputs(c0), kRows), kGpu, "gdn");
  for (const std::vector<int64_t>& lens :
       std::vector<std::vector<int64_t>>{{100, 30, 129, 1, 0}, {400}, {3, 0, 77}, {}, {64, 65}}) {
    SCOPED_TRACE("batch of " + std::to_string(lens.size()) + " sequences");
    const GdnCase c = case_of(lens);
    const std::map<std::string, Array> in = random_gdn_inputs(c);
    expect_reference(c, og, in, g.replay(by_uid(og, in, kRows)));
  }
  EXPECT_EQ(g.graph().rebuild_count(), 0);
}

TEST_F(NativeGdn, NoActiveTokens) {
  GdnCase c{"every slot empty", {0, 0, 0}, 16};
  check_case(c);
}

// The kernels' 16-byte accesses need q, k, v and o 16-byte aligned: an o that starts one element
// into its storage (a caller's view may) is refused by name, with the leading knobs, not run.
TEST_F(NativeGdn, AnOutputNot16ByteAlignedIsRefusedByName) {
  GdnCase c{"o one element into its storage", {70, 3}, 2};
  const int64_t t = c.active() + c.pad;
  const op::Graph full = gdn_graph(c, t);
  const std::map<std::string, Array> in = random_gdn_inputs(c);
  plan::ExecutionPlans p = engines::create_execution_plan(full.clone(), kGpu, gdn_id(),
                                                          {{"pipeline", 1},
                                                           {"solve", 1},
                                                           {"schedule", 0},
                                                           {"prepare", 1},
                                                           {"state", 2},
                                                           {"stores", 1}});
  p.build_plans();
  test::expect_invalid([&] { execute(p, by_uid(full, in, t), kGpu, 1); },
                       {"native gdn", "16-byte aligned"});
}

// The knobs' other kernels: the state loop with the next chunk's rows prefetched by cp.async
// (pipeline = 1), the blocked inverse (solve = 1), the persistent schedule (schedule = 1; per
// stage: 2 the state launch alone, 3 the chunk launches alone) and the compact prepare
// (prepare = 1, with each inverse) and the fragment stores (stores = 0), alone and together,
// over the cases above:
// long sequences (many chunks through both buffers) and short ones, empty slots, a capacity far
// above the batch.
TEST_F(NativeGdn, EveryKnobsKernelsMatchTheReference) {
  struct Knobs {
    int64_t pipeline, solve, schedule, prepare, state = 0, stores = 1;
  };
  for (const Knobs& knobs :
       {Knobs{1, 0, 0, 0}, Knobs{0, 1, 0, 0}, Knobs{0, 0, 1, 0}, Knobs{1, 1, 1, 0},
        Knobs{1, 0, 0, 1}, Knobs{1, 1, 1, 1}, Knobs{1, 1, 2, 0}, Knobs{0, 1, 3, 1},
        Knobs{1, 1, 0, 1, 1}, Knobs{0, 1, 2, 1, 1}, Knobs{1, 1, 0, 1, 2}, Knobs{1, 1, 2, 1, 2},
        Knobs{1, 1, 0, 1, 3}, Knobs{1, 1, 2, 1, 3}, Knobs{1, 1, 0, 1, 2, 0},
        Knobs{0, 0, 1, 0, 0, 0}}) {
    const int64_t pipeline = knobs.pipeline, solve = knobs.solve, schedule = knobs.schedule;
    const int64_t prepare = knobs.prepare, state = knobs.state, stores = knobs.stores;
    for (DType d : {DType::bf16, DType::f16})
      for (int64_t dim : {64, 128}) {
        GdnCase c{"lengths 0 1 C-1 C C+1 130", {0, 1, 63, 64, 65, 130}, 9};
        c.dtype = d;
        c.dim = dim;
        c.pipeline = pipeline;
        c.solve = solve;
        c.schedule = schedule;
        c.prepare = prepare;
        c.state = state;
        c.stores = stores;
        check_case(c);
      }
    GdnCase long_one{"one long sequence", {1000}, 3};
    long_one.dim = 128;
    long_one.h = 1;
    long_one.hv = 4;
    GdnCase tail{"M < N: repeated tail", {70, 200, 0, 0, 0}, 60};
    GdnCase gqa{"gqa 2", {33, 140, 1, 64}, 5};
    gqa.h = 2;
    gqa.hv = 4;
    GdnCase options{"l2 safe_gate beta_sigmoid, no initial state", {100, 64, 7}, 4};
    options.safe_gate = options.beta_sigmoid = true;
    options.initial_state = false;
    GdnCase empty{"every slot empty", {0, 0, 0}, 16};
    GdnCase spare{"capacity far above the batch", {5, 0, 70, 0, 0, 0, 0, 0, 0, 0}, 900};
    for (GdnCase* c : {&long_one, &tail, &gqa, &options, &empty, &spare}) {
      c->pipeline = pipeline;
      c->solve = solve;
      c->schedule = schedule;
      c->prepare = prepare;
      c->state = state;
      c->stores = stores;
      check_case(*c);
    }
  }
}

// The forward's time at the issue's shape (bf16, H = HV = 32, K = V = 128, T = 32768 in 8
// sequences: equal lengths and zipf-like ones), when EAGLE_GDN_BENCH is set: the median of 20
// runs after 3 warm-up runs, host clock around a synchronized stream.
TEST_F(NativeGdn, TimesTheIssueShapeWhenAsked) {
  if (!std::getenv("EAGLE_GDN_BENCH")) GTEST_SKIP() << "set EAGLE_GDN_BENCH=1 to time";
  const std::vector<std::vector<int64_t>> batches = {
      {4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096},
      {12000, 6000, 4000, 3000, 2400, 2000, 1700, 1668}};
  for (const std::vector<int64_t>& lengths : batches)
    for (const auto& [pipeline, solve] :
         {std::pair<int64_t, int64_t>{0, 0}, {1, 0}, {0, 1}, {1, 1}}) {
      GdnCase c{"bench", lengths, 0};
      c.h = c.hv = 32;
      c.dim = 128;
      const op::Graph g = gdn_graph(c, c.active());
      const std::map<std::string, Array> host = random_gdn_inputs(c);
      plan::ExecutionPlans p = engines::create_execution_plan(g.clone(), kGpu, gdn_id(),
                                                              {{"pipeline", pipeline},
                                                               {"solve", solve},
                                                               {"schedule", 0},
                                                               {"prepare", 1},
                                                               {"state", 0},
                                                               {"stores", 1}});
      p.build_plans();
      plan::VariantPack pack(p.layout());
      std::vector<Array> keep;
      for (const auto& [uid, a] : by_uid(g, host, c.active())) {
        keep.push_back(a.to(kGpu));
        pack.set(uid, plan::Operand(keep.back()));
      }
      for (const op::Tensor& t : outputs(g)) {
        keep.push_back(Array::empty(t.dims(), t.dtype(), kGpu));
        pack.set(t.uid(), plan::Operand(keep.back()));
      }
      const Stream stream(kGpu);
      const std::size_t bytes = p.workspace_size();
      const Array ws = Array::empty({static_cast<int64_t>(bytes)}, DType::u8, kGpu);
      plan::ExecutionContext ctx{stream.native(), nullptr, ws.data(), bytes};
      ctx.device = kGpu;
      std::vector<double> ms;
      for (int i = 0; i < 23; ++i) {
        stream.synchronize();
        const auto t0 = std::chrono::steady_clock::now();
        p.execute(pack, ctx);
        stream.synchronize();
        const auto t1 = std::chrono::steady_clock::now();
        if (i >= 3) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      std::printf(
          "native_gdn forward bf16 H=HV=32 K=V=128 T=32768 lengths %s, pipeline %lld solve %lld: "
          "median %.3f ms (min %.3f, max %.3f), workspace %.1f MiB\n",
          lengths[0] == lengths[1] ? "8 x 4096" : "zipf-like 12000..1668",
          static_cast<long long>(pipeline), static_cast<long long>(solve), ms[ms.size() / 2],
          ms.front(), ms.back(), static_cast<double>(bytes) / (1 << 20));
    }
}

// ---- planning on the CPU (a stand-in Hopper) ----

TEST(NativeGdnPlanning, IsOfferedFirstOnHopper) {
  EAGLE_SKIP_WITHOUT_CUDA_BUILD();
  GdnCase c{"", {10, 20}, 0};
  c.dim = 128;
  plan::ExecutionPlans plans = plan::ExecutionPlans::create(gdn_graph(c, 30), manifest(), hopper());
  ASSERT_GT(plans.count(), 0);
  EXPECT_EQ(plans.at(0).engine_id, gdn_id()) << plans.describe();
  // The measured points lead (the compact prepare among them); the per-stage schedules wait for
  // bench 14b.
  EXPECT_EQ(plans.at(0).knobs, (plan::Knobs{{"pipeline", 1},
                                            {"prepare", 1},
                                            {"schedule", 0},
                                            {"solve", 1},
                                            {"state", 3},
                                            {"stores", 1}}));
}

TEST(NativeGdnPlanning, DeclinesWhatItDoesNotServe) {
  GdnCase other_dim{"", {10}, 0};
  other_dim.dim = 96;
  sweep::expect_declines(manifest(), gdn_id(), gdn_graph(other_dim, 10), hopper(),
                         {"native_gdn", "K = V in {64, 128}"});
  GdnCase f32{"", {10}, 0};
  f32.dtype = DType::f32;
  sweep::expect_declines(manifest(), gdn_id(), gdn_graph(f32, 10), hopper(), {"io dtype f32"});
  GdnCase f64_gates{"", {10}, 0};
  f64_gates.gate_dtype = DType::f64;
  sweep::expect_declines(manifest(), gdn_id(), gdn_graph(f64_gates, 10), hopper(),
                         {"native_gdn", "g must be f32, f16 or bf16, not f64"});
  GdnCase mixed_gate{"", {10}, 0};
  mixed_gate.safe_gate = true;
  mixed_gate.dt_bias_dtype = DType::bf16;
  sweep::expect_declines(manifest(), gdn_id(), gdn_graph(mixed_gate, 10), hopper(),
                         {"native_gdn", "a_log and dt_bias must share one dtype"});
  GdnCase ampere{"", {10}, 0};
  sweep::expect_declines(manifest(), gdn_id(), gdn_graph(ampere, 10), stand_in_gpu(80), {"sm 90"});
  DeviceProperties cpu;
  cpu.device = "cpu";
  sweep::expect_declines(manifest(), gdn_id(), gdn_graph(ampere, 10), cpu, {"CUDA devices"});
}

TEST(NativeGdnPlanning, DeclinesOtherKeyAndValueDims) {
  op::Graph g("kv");
  op::Ports ports;
  auto in = [&](const char* name, op::Dims dims, DType d) {
    ports.emplace_back(name, g.tensor({name, dims, d}));
  };
  in("q", {8, 1, 64}, DType::bf16);
  in("k", {8, 1, 64}, DType::bf16);
  in("v", {8, 1, 128}, DType::bf16);
  in("g", {8, 1}, DType::f32);
  in("beta", {8, 1}, DType::f32);
  in("cu_seqlens", {2}, DType::i32);
  g.op("gdn", ports).at("o").set_output(true);
  sweep::expect_declines(manifest(), gdn_id(), g, hopper(), {"K = 64, V = 128"});
}

}  // namespace
}  // namespace eagle::test::native
