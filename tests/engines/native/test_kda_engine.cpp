// The native kda / gdn2 forward engine (native_kda):
//  * on the CPU, the chunk algebra its kernels compute (G = per-channel cumsum in the chunk,
//    A = strictly-lower (b k)(k e^{G_i - G_j})^T, T = (I + A)^-1, W = T (b k e^G), U = T (w v),
//    v' = U - W h, h <- diag(e^{G_last}) h + (k e^{G_last - G})^T v', o = (q e^G) h + Aqk v')
//    written out in float64 on the host and checked against the reference recurrence;
//  * planning for a stand-in H200: what it serves and what it declines, with the reason;
//  * on an H200, against the reference engine (float64) on fresh random inputs: outputs
//    poisoned, NaN in every padding row of every input, lengths 0, 1, C - 1, C, C + 1 and a
//    long one, M < N tails, GQA, each option on and off, both rules, o and final_state.
//
// Tolerance: the kernels round their chunk operands (k e^{...}, T, W, U, v', h) to bf16 before
// each tensor-core product (as fla does), so o and the final state are held to 2e-2 relative
// for both io dtypes (bf16 operands land between 1e-3 and 1e-2; the chain of products adds a
// few roundings).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#ifdef EAGLE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "engines/native/linear_attention/kda_kernels.hpp"
#include "engines/reference/math/linear_attention.hpp"
#include "native_structured.hpp"
#include "planned_runs.hpp"

namespace eagle {
namespace {

using test::Arrays;
using test::kGpu;

int64_t kda_engine() {
  return test::native::engine("linear_attention", "native_kda");
}

// ---- the chunk algebra on the host (float64) -------------------------------------------------

struct HostCase {
  std::vector<int64_t> cu;
  int64_t h, hv, d;
  bool gdn2;
};

// The chunked forward of one rule written exactly as the kernels factor it, without rounding.
reference::DeltaForward chunked(const HostCase& c, const reference::DeltaInputs& in, double scale) {
  const int64_t C = 64, D = c.d, HV = c.hv, group = c.hv / c.h, N = c.cu.size() - 1;
  const int64_t T = c.cu.back();
  reference::DeltaForward out{reference::Dense({T, HV, D}), reference::Dense({N, HV, D, D})};
  auto q = [&](int64_t t, int64_t h, int64_t i) {
    return scale * in.q->data[((t * c.h) + h / group) * D + i];
  };
  auto k = [&](int64_t t, int64_t h, int64_t i) {
    return in.k->data[((t * c.h) + h / group) * D + i];
  };
  auto at = [&](int64_t t, int64_t h, int64_t i) { return (t * HV + h) * D + i; };
  auto bgate = [&](int64_t t, int64_t h, int64_t i) {
    return c.gdn2 ? in.b->data[at(t, h, i)] : in.beta->data[t * HV + h];
  };
  auto wgate = [&](int64_t t, int64_t h, int64_t i) {
    return c.gdn2 ? in.w->data[at(t, h, i)] : in.beta->data[t * HV + h];
  };
  for (int64_t s = 0; s < N; ++s)
    for (int64_t h = 0; h < HV; ++h) {
      std::vector<double> S(D * D, 0.0);
      if (in.initial_state)
        for (int64_t i = 0; i < D * D; ++i) S[i] = in.initial_state->data[(s * HV + h) * D * D + i];
      for (int64_t r0 = c.cu[s]; r0 < c.cu[s + 1]; r0 += C) {
        const int64_t n = std::min(C, c.cu[s + 1] - r0);
        std::vector<double> G(n * D), A(n * n, 0.0), Tm(n * n, 0.0), W(n * D), U(n * D), Vn(n * D);
        for (int64_t i = 0; i < D; ++i) {
          double acc = 0;
          for (int64_t r = 0; r < n; ++r) G[r * D + i] = acc += in.g->data[at(r0 + r, h, i)];
        }
        for (int64_t r = 0; r < n; ++r)
          for (int64_t j = 0; j < r; ++j)
            for (int64_t i = 0; i < D; ++i)
              A[r * n + j] += bgate(r0 + r, h, i) * k(r0 + r, h, i) * k(r0 + j, h, i) *
                              std::exp(G[r * D + i] - G[j * D + i]);
        for (int64_t r = 0; r < n; ++r) {  // T = (I + A)^-1 by forward substitution
          Tm[r * n + r] = 1;
          for (int64_t col = 0; col < r; ++col) {
            double x = 0;
            for (int64_t m = col; m < r; ++m) x -= A[r * n + m] * Tm[m * n + col];
            Tm[r * n + col] = x;
          }
        }
        for (int64_t r = 0; r < n; ++r)
          for (int64_t i = 0; i < D; ++i) {
            double w = 0, u = 0;
            for (int64_t m = 0; m <= r; ++m) {
              w += Tm[r * n + m] * bgate(r0 + m, h, i) * k(r0 + m, h, i) * std::exp(G[m * D + i]);
              u += Tm[r * n + m] * wgate(r0 + m, h, i) * in.v->data[at(r0 + m, h, i)];
            }
            W[r * D + i] = w;
            U[r * D + i] = u;
          }
        for (int64_t r = 0; r < n; ++r)  // v' = U - W S
          for (int64_t col = 0; col < D; ++col) {
            double x = U[r * D + col];
            for (int64_t i = 0; i < D; ++i) x -= W[r * D + i] * S[i * D + col];
            Vn[r * D + col] = x;
          }
        for (int64_t r = 0; r < n; ++r)  // o = (q e^G) S + Aqk v'
          for (int64_t col = 0; col < D; ++col) {
            double o = 0;
            for (int64_t i = 0; i < D; ++i)
              o += q(r0 + r, h, i) * std::exp(G[r * D + i]) * S[i * D + col];
            for (int64_t j = 0; j <= r; ++j) {
              double a = 0;
              for (int64_t i = 0; i < D; ++i)
                a += q(r0 + r, h, i) * k(r0 + j, h, i) * std::exp(G[r * D + i] - G[j * D + i]);
              o += a * Vn[j * D + col];
            }
            out.o.data[at(r0 + r, h, col)] = o;
          }
        std::vector<double> next(D * D);  // S = diag(e^{G_last}) S + (k e^{G_last - G})^T v'
        for (int64_t i = 0; i < D; ++i)
          for (int64_t col = 0; col < D; ++col) {
            double x = std::exp(G[(n - 1) * D + i]) * S[i * D + col];
            for (int64_t r = 0; r < n; ++r)
              x += k(r0 + r, h, i) * std::exp(G[(n - 1) * D + i] - G[r * D + i]) * Vn[r * D + col];
            next[i * D + col] = x;
          }
        S = next;
      }
      for (int64_t i = 0; i < D * D; ++i) out.final_state.data[(s * HV + h) * D * D + i] = S[i];
    }
  return out;
}

reference::Dense host_random(reference::Dims dims, double lo, double hi) {
  reference::Dense x(dims);
  x.data = test::random_values(x.data.size(), lo, hi);
  return x;
}

TEST(KdaChunkAlgebra, TheChunkedFormEqualsTheRecurrence) {
  std::printf("%s\n", test::reproduce_line().c_str());
  for (bool gdn2 : {false, true}) {
    SCOPED_TRACE(gdn2 ? "gdn2" : "kda");
    const HostCase c{{0, 0, 1, 64, 127, 192, 257}, 1, 2, 4, gdn2};
    const int64_t T = c.cu.back(), N = c.cu.size() - 1;
    const reference::Dense q = host_random({T, c.h, c.d}, -1, 1),
                           k = host_random({T, c.h, c.d}, -0.4, 0.4),
                           v = host_random({T, c.hv, c.d}, -1, 1),
                           g = host_random({T, c.hv, c.d}, -6, -0.01),
                           beta = host_random({T, c.hv}, 0.1, 0.9),
                           b = host_random({T, c.hv, c.d}, 0.1, 0.9),
                           w = host_random({T, c.hv, c.d}, 0.2, 1),
                           h0 = host_random({N, c.hv, c.d, c.d}, -0.5, 0.5);
    reference::DeltaInputs in;
    in.q = &q;
    in.k = &k;
    in.v = &v;
    in.g = &g;
    if (gdn2) {
      in.b = &b;
      in.w = &w;
    } else {
      in.beta = &beta;
    }
    in.initial_state = &h0;
    in.cu_seqlens = c.cu;
    const double scale = 0.5;
    const reference::DeltaForward want =
        reference::delta_forward(gdn2 ? reference::DeltaRule::gdn2 : reference::DeltaRule::kda, in,
                                 {scale, false, false, false});
    const reference::DeltaForward got = chunked(c, in, scale);
    EXPECT_CLOSE(got.o.data, want.o.data, 1e-11);
    EXPECT_CLOSE(got.final_state.data, want.final_state.data, 1e-11);
  }
}

// ---- planning for a stand-in H200 -----------------------------------------------------------

struct Spec {
  std::string rule = "kda";
  DType io = DType::bf16, gate = DType::f32, state = DType::f32;
  int64_t t = 10, h = 2, hv = 4, dk = 128, dv = 128, slots = 3;
  bool initial_state = true, l2 = false, final_state = true;
  std::optional<double> scale;
};

op::Graph delta_graph(const Spec& s) {
  op::Graph g(s.rule);
  op::Ports ports;
  auto in = [&](const char* name, op::Dims dims, DType d) {
    ports.emplace_back(name, g.tensor({name, std::move(dims), d}));
  };
  in("q", {s.t, s.h, s.dk}, s.io);
  in("k", {s.t, s.h, s.dk}, s.io);
  in("v", {s.t, s.hv, s.dv}, s.io);
  in("g", {s.t, s.hv, s.dk}, s.gate);
  if (s.rule == "gdn2") {
    in("b", {s.t, s.hv, s.dk}, s.gate);
    in("w", {s.t, s.hv, s.dv}, s.gate);
  } else {
    in("beta", {s.t, s.hv}, s.gate);
  }
  in("cu_seqlens", {s.slots + 1}, DType::i32);
  if (s.initial_state) in("initial_state", {s.slots, s.hv, s.dk, s.dv}, s.state);
  op::Attrs attrs = {{"use_qk_l2norm", s.l2}, {"output_final_state", s.final_state}};
  if (s.scale) attrs.emplace_back("scale", *s.scale);
  for (auto& [port, t] : g.op(s.rule, ports, attrs)) t.set_output(true);
  return g;
}

bool kernels_built(const Spec& s) {
  native::kda::Shape shape;
  shape.slots = s.slots;
  shape.heads = static_cast<int>(s.h);
  shape.value_heads = static_cast<int>(s.hv);
  shape.dim = static_cast<int>(s.dk);
  shape.dtype = s.io;
  return native::kda::served(shape);
}

TEST(NativeKdaPlanning, ServesKdaAndGdn2FirstOnHopper) {
  for (const char* rule : {"kda", "gdn2"})
    for (DType d : {DType::bf16, DType::f16})
      for (int64_t dim : {64, 128}) {
        Spec s;
        s.rule = rule;
        s.io = d;
        s.dk = s.dv = dim;
        if (!kernels_built(s)) GTEST_SKIP() << "no sm_90a kernels in this build";
        plan::ExecutionPlans plans = plan::ExecutionPlans::create(
            delta_graph(s), test::native::manifest(), test::native::hopper());
        const int first = plans.build_plans();
        EXPECT_EQ(plans.at(first).engine_id, kda_engine()) << plans.describe();
        // The measured points lead (the compact prepare with its products' fragments in
        // registers among them); the per-stage schedules (2, 3) wait for bench 14b.
        EXPECT_EQ(plans.at(first).knobs, (plan::Knobs{{"intra", 1},
                                                      {"pipeline", 1},
                                                      {"prepare", 2},
                                                      {"schedule", 0},
                                                      {"state", 3},
                                                      {"stores", 1}}));
      }
}

TEST(NativeKdaPlanning, DeclinesWhatItDoesNotServeWithTheReason) {
  const auto declines = [](const Spec& s, std::initializer_list<std::string> why) {
    test::sweep::expect_declines(test::native::manifest(), kda_engine(), delta_graph(s),
                                 test::native::hopper(), why);
  };
  Spec s;
  s.io = DType::f32;
  declines(s, {"q must be bf16 or f16, not f32"});
  s = Spec();
  s.gate = DType::bf16;
  declines(s, {"the gate g must be f32, not bf16"});
  s = Spec();
  s.rule = "gdn2";
  s.gate = DType::f16;
  declines(s, {"the gate g must be f32"});
  s = Spec();
  s.state = DType::bf16;
  declines(s, {"initial_state must be f32"});
  s = Spec();
  s.dk = s.dv = 96;
  declines(s, {"serves K = V in {64, 128}, got K = 96, V = 96"});
  s = Spec();
  s.dv = 64;
  declines(s, {"serves K = V in {64, 128}, got K = 128, V = 64"});
  test::sweep::expect_declines(test::native::manifest(), kda_engine(), delta_graph(Spec()),
                               test::stand_in_gpu(80), {"serves sm 90 to 90, not sm 80"});
}

// ---- on the GPU, against the reference ------------------------------------------------------

class NativeKda : public ::testing::Test {
 protected:
  void SetUp() override { EAGLE_SKIP_UNLESS_RUNS_HERE(kda_engine()); }
};

struct Case {
  std::string name;
  std::vector<int64_t> lens;
  int64_t pad;  // padding rows after the last sequence (NaN in every input)
  int64_t h, hv;
};

// Log decays like real models': most in [-1, -0.01), a fifth strong in [-5, -1).
Array gate_array(const op::Dims& dims) {
  std::vector<double> g =
      test::random_values(static_cast<std::size_t>(reference::count(dims)), -1, -0.01);
  const std::vector<double> strong = test::random_values(g.size(), -5, -1);
  const std::vector<double> pick = test::random_values(g.size(), 0, 1);
  for (std::size_t i = 0; i < g.size(); ++i)
    if (pick[i] < 0.2) g[i] = strong[i];
  return test::from_doubles(g, dims, DType::f32, Device::cpu());
}

Arrays inputs(const op::Graph& g, const test::RaggedRows& rows, const std::vector<int64_t>& cu,
              bool l2) {
  Arrays in;
  const op::Node n = g.nodes()[0];
  for (const auto& [port, t] : n.inputs()) {
    Array a;
    if (port == "cu_seqlens") {
      in[t.uid()] = test::from_ints(cu, t.dims(), t.dtype(), Device::cpu());
      continue;
    }
    if (port == "g") {
      a = gate_array(t.dims());
    } else if (port == "k") {
      // Without the norm, keys of about unit norm keep the recurrence contracting.
      const double r = l2 ? 1.0 : 1.7 / std::sqrt(static_cast<double>(t.dims()[2]));
      a = test::random_array(t.dims(), t.dtype(), Device::cpu(), -r, r);
    } else if (port == "beta" || port == "b") {
      a = test::random_array(t.dims(), t.dtype(), Device::cpu(), 0.1, 0.9);
    } else if (port == "w") {
      a = test::random_array(t.dims(), t.dtype(), Device::cpu(), 0.2, 1.0);
    } else if (port == "initial_state") {
      a = test::random_array(t.dims(), t.dtype(), Device::cpu(), -0.5, 0.5);
    } else {
      a = test::random_array(t.dims(), t.dtype(), Device::cpu());
    }
    if (port != "initial_state") test::poison_padding(a, rows);
    in[t.uid()] = a;
  }
  return in;
}

std::vector<double> active_rows(const Array& a, const test::RaggedRows& rows) {
  const std::vector<double> v = test::values(a);
  const int64_t per_row = a.numel() / a.shape()[0];
  std::vector<double> out;
  for (int64_t r = 0; r < a.shape()[0]; ++r)
    if (!rows.is_padding(r))
      out.insert(out.end(), v.begin() + r * per_row, v.begin() + (r + 1) * per_row);
  return out;
}

double check(const op::Graph& g, const test::RaggedRows& rows, const Arrays& got,
             const Arrays& want) {
  double worst = 0;
  const op::Node n = g.nodes()[0];
  for (const auto& [port, t] : n.outputs()) {
    if (t.is_virtual()) continue;
    SCOPED_TRACE("output " + port);
    const bool o = port == "o";
    const std::vector<double> w =
        o ? active_rows(want.at(t.uid()), rows) : test::values(want.at(t.uid()));
    const std::vector<double> x =
        o ? active_rows(got.at(t.uid()), rows) : test::values(got.at(t.uid()));
    const double err = test::rel_error(x, w);
    EXPECT_TRUE(err <= 2e-2) << "relative error " << err;
    if (!(err <= worst)) worst = err;
  }
  return worst;
}

plan::ExecutionPlans native_plan(const op::Graph& g, int64_t intra = 1, int64_t pipeline = 0,
                                 int64_t schedule = 0, int64_t prepare = 0, int64_t stores = 0,
                                 int64_t state = 0) {
  plan::ExecutionPlans p = engines::create_execution_plan(g.clone(), kGpu, kda_engine(),
                                                          {{"schedule", schedule},
                                                           {"intra", intra},
                                                           {"pipeline", pipeline},
                                                           {"prepare", prepare},
                                                           {"stores", stores},
                                                           {"state", state}});
  p.build_plans();
  return p;
}

// The reference runs the batch without its padding rows (test::reference_without_padding).
Arrays reference_of(const Spec& padded, const op::Graph& g, const Arrays& in, int64_t active) {
  Spec s = padded;
  s.t = active;
  return test::reference_without_padding(g, delta_graph(s), in, [](const std::string& port) {
    return port != "cu_seqlens" && port != "initial_state";
  });
}

std::vector<Case> cases() {
  std::vector<Case> c = {
      {"lengths 0 1 C-1 C C+1", {0, 1, 63, 64, 65}, 7, 2, 2},
      {"M < N: repeated tail, L < T, gqa 2", {70, 130, 0, 0}, 40, 2, 4},
      {"one long sequence, gqa 4", {700}, 3, 1, 4},
  };
  std::vector<int64_t> lens;
  const std::vector<int64_t> cu = test::random_cu_seqlens(5, 150);
  for (std::size_t b = 1; b < cu.size(); ++b) lens.push_back(cu[b] - cu[b - 1]);
  c.push_back({"random lengths", lens, 9, 2, 2});
  return c;
}

// A case's cu_seqlens and rows, its padding rows after the last sequence.
struct Batch {
  std::vector<int64_t> cu = {0};
  test::RaggedRows rows;
};
Batch batch_of(const Case& c) {
  Batch b;
  for (int64_t l : c.lens) b.cu.push_back(b.cu.back() + l);
  b.rows = test::rows_of(b.cu);
  b.rows.rows += c.pad;
  return b;
}

// Every case against the reference, with the state loop's `pipeline` knob and each `intra` given.
// `small`: the first case alone in bf16 at D 128, a size compute-sanitizer's racecheck finishes.
void matches_the_reference(int64_t pipeline, const std::vector<int64_t>& intras,
                           int64_t schedule = 0, int64_t prepare = 0, bool small = false,
                           int64_t stores = 0, int64_t state = 0) {
  std::printf("%s\n", test::reproduce_line().c_str());
  double worst = 0;
  int combo = 0;
  const std::vector<Case> all = small ? std::vector<Case>{cases().front()} : cases();
  const std::vector<DType> dtypes =
      small ? std::vector<DType>{DType::bf16} : std::vector<DType>{DType::bf16, DType::f16};
  const std::vector<int64_t> dims =
      small ? std::vector<int64_t>{128} : std::vector<int64_t>{64, 128};
  for (const Case& c : all)
    for (const char* rule : {"kda", "gdn2"})
      for (DType d : dtypes)
        for (int64_t dim : dims) {
          // The options cycle over the combinations so each is on and off in every case.
          ++combo;
          Spec s;
          s.rule = rule;
          s.io = d;
          s.dk = s.dv = dim;
          s.h = c.h;
          s.hv = c.hv;
          s.l2 = combo % 2 == 0;
          s.initial_state = (combo / 2) % 2 == 0;
          s.final_state = (combo % 3) != 0;
          if (combo % 5 == 0) s.scale = 0.3;
          const Batch b = batch_of(c);
          const std::vector<int64_t>& cu = b.cu;
          const test::RaggedRows& rows = b.rows;
          s.t = rows.rows;
          s.slots = static_cast<int64_t>(c.lens.size());
          SCOPED_TRACE(c.name + " " + rule + " " + std::string(dtype_name(d)) + " D " +
                       std::to_string(dim) + (s.l2 ? " l2" : "") + (s.initial_state ? " h0" : "") +
                       (s.final_state ? " ht" : "") + (s.scale ? " scale" : ""));
          const op::Graph g = delta_graph(s);
          const Arrays in = inputs(g, rows, cu, s.l2);
          const Arrays want = reference_of(s, g, in, cu.back());
          for (int64_t intra : intras) {
            SCOPED_TRACE("intra " + std::to_string(intra));
            const double err = check(
                g, rows,
                test::execute(native_plan(g, intra, pipeline, schedule, prepare, stores, state), in,
                              kGpu),
                want);
            if (err > worst) worst = err;
          }
        }
  std::printf("worst relative error %.3g\n", worst);
}

TEST_F(NativeKda, MatchesTheReference) {
  matches_the_reference(0, {1, 0});
}

// The state loop with the next chunk's slab prefetched by cp.async (knob pipeline = 1).
TEST_F(NativeKda, ThePipelinedStateLoopMatchesTheReference) {
  matches_the_reference(1, {1});
}

// The persistent schedule (knob schedule = 1): resident CTAs looping over the chunk tasks (and
// the slots in the state launch), with and without the pipelined state loop; then per stage (2:
// the state launch alone, 3: the chunk launches alone).
TEST_F(NativeKda, ThePersistentScheduleMatchesTheReference) {
  matches_the_reference(0, {1}, 1);
  matches_the_reference(1, {1}, 1);
  matches_the_reference(1, {1}, 2);
  matches_the_reference(1, {1}, 3, 1);
}

// The compact prepare (knob prepare = 1: 16-bit q and k rows, cp.async, two kda CTAs per SM),
// with both intra-chunk diagonals, flat and persistent.
TEST_F(NativeKda, TheCompactPrepareMatchesTheReference) {
  matches_the_reference(1, {1, 0}, 0, 1);
  matches_the_reference(1, {1}, 1, 1);
}

// The compact prepare's W and U staged through shared memory (knob stores = 1), flat and
// persistent (a CTA's next task reuses the staging region).
TEST_F(NativeKda, TheStagedStoresMatchTheReference) {
  matches_the_reference(1, {1}, 0, 1, false, 1);
  matches_the_reference(1, {1}, 1, 1, false, 1);
}

// The state launch with the state transposed in registers (knob state = 2; 3: two CTAs per head,
// the sequences past a balanced share split over both), every case.
TEST_F(NativeKda, TheStateRowsLaunchMatchesTheReference) {
  for (int64_t state : {2, 3}) matches_the_reference(1, {1}, 0, 1, false, 1, state);
}

// The compact prepare with the products' fragments built in registers (knob prepare = 2), every
// case, both intra routes, flat and persistent (a CTA's tasks in turn).
TEST_F(NativeKda, TheFragmentProductsMatchTheReference) {
  matches_the_reference(1, {1, 0}, 0, 2, false, 1, 2);
  matches_the_reference(1, {1}, 1, 2, false, 1, 2);
}

// The compact prepare and the per-stage schedules on one small batch: what the sanitizers run
// (the tests above are too large for racecheck's time).
TEST_F(NativeKda, EveryKnobPointOnASmallBatch) {
  matches_the_reference(1, {1, 0}, 0, 1, true);
  for (int64_t schedule : {1, 2, 3}) matches_the_reference(1, {1}, schedule, 1, true);
  matches_the_reference(1, {1}, 0, 1, true, 1);
  matches_the_reference(1, {1, 0}, 0, 2, true, 1, 2);  // the products' fragments in registers
  // The state launch a CTA per head (knob state = 1) and with the state transposed in registers
  // (2; 3 split over two CTAs per head), flat and persistent.
  for (int64_t state : {1, 2, 3}) {
    matches_the_reference(1, {1}, 0, 1, true, 1, state);
    matches_the_reference(1, {1}, 2, 1, true, 1, state);
  }
}

// A caller's o may start at any element (a slice, a DLPack import): the output launch then
// stores its column pairs element by element. Every output one element into its storage, the
// first case, with the leading knobs.
TEST_F(NativeKda, OutputsThatStartAtAnOddElementAreWritten) {
  std::printf("%s\n", test::reproduce_line().c_str());
  const Case c = cases().front();
  const Batch b = batch_of(c);
  Spec s;
  s.h = c.h;
  s.hv = c.hv;
  s.t = b.rows.rows;
  s.slots = static_cast<int64_t>(c.lens.size());
  const op::Graph g = delta_graph(s);
  const Arrays in = inputs(g, b.rows, b.cu, s.l2);
  const Arrays want = reference_of(s, g, in, b.cu.back());
  check(g, b.rows, test::execute(native_plan(g, 1, 1, 0, 1, 1, 2), in, kGpu, 1), want);
}

// An empty batch (T = 0, every slot empty): no chunk to run, but the final state of every slot
// is still written: its initial state, or 0. The reference says so on the CPU; the GPU must agree.
Arrays empty_batch_final_states(bool initial_state, bool on_gpu) {
  Spec s;
  s.t = 0;
  s.slots = 2;
  s.h = s.hv = 2;
  s.dk = s.dv = 64;
  s.initial_state = initial_state;
  const op::Graph g = delta_graph(s);
  const std::vector<int64_t> cu = {0, 0, 0};
  const Arrays in = inputs(g, test::rows_of(cu), cu, false);
  const Arrays ran = on_gpu ? test::execute(native_plan(g), in, kGpu) : test::reference(g, in);
  Arrays out;
  for (const auto& [port, t] : g.nodes()[0].outputs())
    if (port == "final_state") out[0] = ran.at(t.uid());
  for (const auto& [port, t] : g.nodes()[0].inputs())
    if (port == "initial_state") out[1] = in.at(t.uid());
  return out;
}

TEST(KdaReference, AnEmptyBatchGivesEachSlotItsInitialStateAsFinal) {
  for (bool h0 : {true, false}) {
    const Arrays got = empty_batch_final_states(h0, false);
    ASSERT_EQ(got.at(0).shape(), (Shape{2, 2, 64, 64}));
    const std::vector<double> ht = test::values(got.at(0));
    EXPECT_EQ(ht, h0 ? test::values(got.at(1)) : std::vector<double>(ht.size(), 0.0));
  }
}

TEST_F(NativeKda, AnEmptyBatchStillWritesTheFinalState) {
  for (bool h0 : {true, false}) {
    SCOPED_TRACE(h0 ? "with an initial state" : "without one");
    const Arrays got = empty_batch_final_states(h0, true);
    const std::vector<double> ht = test::values(got.at(0));
    EXPECT_EQ(ht, h0 ? test::values(got.at(1)) : std::vector<double>(ht.size(), 0.0));
  }
}

// A graph recorded once for a capacity (T rows, N slots) with the planned kda op and replayed
// with smaller batches (fewer sequences, fewer active rows, NaN in every row past the active
// end): each replay gives that batch's o and final states, nothing rebuilt.
TEST_F(NativeKda, ARecordedGraphServesEveryBatchUpToItsCapacity) {
  Spec s;
  s.t = 400;
  s.slots = 5;
  s.h = 2;
  s.hv = 4;
  s.dk = s.dv = 64;
  const op::Graph og = delta_graph(s);
  auto batch = [&](std::vector<int64_t> lens) {
    lens.resize(static_cast<std::size_t>(s.slots), 0);
    std::vector<int64_t> cu = {0};
    for (int64_t l : lens) cu.push_back(cu.back() + l);
    test::RaggedRows rows = test::rows_of(cu);
    rows.rows = s.t;  // the capacity: everything past the active end is padding
    return std::tuple{cu, rows, inputs(og, rows, cu, s.l2)};
  };
  test::RecordedOp g(og, std::get<2>(batch({100, 30, 129, 1, 0})), kGpu, "kda");
  for (const std::vector<int64_t>& lens :
       std::vector<std::vector<int64_t>>{{100, 30, 129, 1, 0}, {400}, {3, 0, 77}, {}, {64, 65}}) {
    SCOPED_TRACE("batch of " + std::to_string(lens.size()) + " sequences");
    const auto [cu, rows, in] = batch(lens);
    check(og, rows, g.replay(in), reference_of(s, og, in, cu.back()));
  }
  EXPECT_EQ(g.graph().rebuild_count(), 0);
}

// Stronger gates than models use (g down to -30 per channel, e^{-30} between neighbouring
// rows): the products through a reference row never exceed 1, so nothing overflows.
TEST_F(NativeKda, StrongGatesStayFinite) {
  Spec s;
  s.rule = "gdn2";
  s.h = s.hv = 2;
  const std::vector<int64_t> cu = {0, 64, 200};
  test::RaggedRows rows = test::rows_of(cu);
  rows.rows += 2;
  s.t = rows.rows;
  s.slots = 2;
  const op::Graph g = delta_graph(s);
  Arrays in = inputs(g, rows, cu, false);
  for (const auto& [port, t] : g.nodes()[0].inputs())
    if (port == "g") {
      std::vector<double> x =
          test::random_values(static_cast<std::size_t>(reference::count(t.dims())), -30, -0.01);
      in[t.uid()] = test::from_doubles(x, t.dims(), DType::f32, Device::cpu());
      test::poison_padding(in[t.uid()], rows);
    }
  const Arrays want = reference_of(s, g, in, cu.back());
  for (int64_t intra : {1, 0}) {
    SCOPED_TRACE("intra " + std::to_string(intra));
    std::printf("strong gates, intra %d: relative error %.3g\n", static_cast<int>(intra),
                check(g, rows, test::execute(native_plan(g, intra), in, kGpu), want));
  }
  // The compact prepare's two routes to the products (staged, fragments in registers): blocks
  // past the decay span take the exact route there too.
  for (int64_t prepare : {1, 2}) {
    SCOPED_TRACE("prepare " + std::to_string(prepare));
    std::printf(
        "strong gates, prepare %d: relative error %.3g\n", static_cast<int>(prepare),
        check(g, rows, test::execute(native_plan(g, 1, 1, 0, prepare, 1, 2), in, kGpu), want));
  }
}

#ifdef EAGLE_HAVE_CUDA
// The timing shape (run by name: --gtest_also_run_disabled_tests): kda forward, bf16,
// H = HV = 32, K = V = 128, T = 32768 in 8 sequences (equal, then skewed), l2 norm on, final
// state out; CUDA events around 20 runs after 3 warm-up runs, for each state knob. Drawing the
// inputs on the host takes most of a minute.
TEST_F(NativeKda, DISABLED_TimeTheForward) {
  const std::vector<std::vector<int64_t>> batches = {
      {4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096},
      {13000, 7000, 4500, 3200, 2400, 1500, 800, 368}};
  Spec s;
  s.h = s.hv = 32;
  s.t = 32768;
  s.slots = 8;
  s.initial_state = false;
  s.l2 = true;
  const op::Graph g = delta_graph(s);
  // One draw of the inputs (no padding rows: L = T); only cu_seqlens changes per batch.
  std::vector<int64_t> cu0 = {0};
  for (int64_t l : batches[0]) cu0.push_back(cu0.back() + l);
  Arrays host = inputs(g, test::rows_of(cu0), cu0, true);
  std::map<int64_t, Array> dev;
  for (const auto& [uid, a] : host) dev[uid] = a.to(kGpu);
  const op::Tensor cu_t = g.nodes()[0].input("cu_seqlens");
  for (const auto& lens : batches) {
    std::vector<int64_t> cu = {0};
    for (int64_t l : lens) cu.push_back(cu.back() + l);
    dev[cu_t.uid()] = test::from_ints(cu, cu_t.dims(), DType::i32, Device::cpu()).to(kGpu);
    // The leading knobs (intra 1, pipeline 1, prepare 1, stores 1) with each state launch.
    // Then the products' fragments in registers (prepare 2) with the state in registers.
    for (const auto& [prepare, state] :
         std::vector<std::pair<int64_t, int64_t>>{{1, 0}, {1, 1}, {1, 2}, {2, 2}}) {
      const plan::ExecutionPlans plans = native_plan(g, 1, 1, 0, prepare, 1, state);
      plan::VariantPack pack(plans.layout());
      std::vector<Array> keep;
      for (const auto& [uid, a] : dev) pack.set(uid, plan::Operand(a));
      for (const op::Tensor& t : test::outputs(plans.graph())) {
        keep.push_back(Array::empty(t.dims(), t.dtype(), kGpu));
        pack.set(t.uid(), plan::Operand(keep.back()));
      }
      const Stream stream(kGpu);
      const std::size_t ws_bytes = plans.workspace_size();
      const Array ws = Array::empty({static_cast<int64_t>(ws_bytes)}, DType::u8, kGpu);
      plan::ExecutionContext ctx{stream.native(), nullptr, ws.data(), ws_bytes};
      ctx.device = kGpu;
      for (int i = 0; i < 3; ++i) plans.execute(pack, ctx);
      cudaEvent_t a, b;
      ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
      ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
      const auto st = static_cast<cudaStream_t>(stream.native());
      constexpr int kRuns = 20;
      ASSERT_EQ(cudaEventRecord(a, st), cudaSuccess);
      for (int i = 0; i < kRuns; ++i) plans.execute(pack, ctx);
      ASSERT_EQ(cudaEventRecord(b, st), cudaSuccess);
      ASSERT_EQ(cudaEventSynchronize(b), cudaSuccess);
      float ms = 0;
      ASSERT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
      std::printf(
          "kda forward bf16 H=HV=32 K=V=128 T=32768 N=8 (%s, prepare %d state %d): %.3f ms, "
          "workspace %.0f MiB\n",
          lens[0] == lens[1] ? "equal" : "skewed", static_cast<int>(prepare),
          static_cast<int>(state), ms / kRuns, ws_bytes / 1048576.0);
      std::fflush(stdout);
      cudaEventDestroy(a);
      cudaEventDestroy(b);
    }
  }
}
#endif

}  // namespace
}  // namespace eagle
