// Tests of the float64 reference gated delta-rule ops (gdn, kda, gdn2): hand-worked tiny cases,
// independent formula checks (against the support library's oracle of fla's naive recurrences),
// backward against central finite differences, and every InvalidArgument path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dense.hpp"
#include "eagle/core/error.hpp"
#include "engines/reference/math/linear_attention.hpp"
#include "oracles/attention.hpp"
#include "oracles/gradient.hpp"
#include "test_util.hpp"

namespace eagle::reference {
namespace {

constexpr DeltaRule kRules[] = {DeltaRule::gdn, DeltaRule::kda, DeltaRule::gdn2};

const char* name(DeltaRule rule) {
  return rule == DeltaRule::gdn ? "gdn" : rule == DeltaRule::kda ? "kda" : "gdn2";
}

using test::expect_all_near;
using test::expect_invalid;
using test::make_dense;
using test::random_dense;

double sum_product(const Dense& a, const Dense& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.data.size(); ++i) sum += a.data[i] * b.data[i];
  return sum;
}

// Element [i0, index, i2...] of x along `axis` kept as a size-1 extent (axis < rank).
Dense take(const Dense& x, std::size_t axis, int64_t index) {
  int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= x.dims[d];
  for (std::size_t d = axis + 1; d < x.dims.size(); ++d) inner *= x.dims[d];
  Dims dims = x.dims;
  dims[axis] = 1;
  Dense out(dims);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      out.data[o * inner + i] = x.data[(o * x.dims[axis] + index) * inner + i];
    }
  }
  return out;
}

// An owned problem; inputs() lends it to the ops.
struct Problem {
  DeltaRule rule = DeltaRule::gdn;
  Dense q, k, v, g, beta, b, w, initial_state, a_log, dt_bias;  // beta: gdn, kda; b, w: gdn2
  bool has_initial = false;
  std::vector<int64_t> cu;
  DeltaOptions opt;

  DeltaInputs inputs() const {
    DeltaInputs in{.q = &q, .k = &k, .v = &v, .g = &g};
    if (rule == DeltaRule::gdn2) {
      in.b = &b;
      in.w = &w;
    } else {
      in.beta = &beta;
    }
    if (has_initial) in.initial_state = &initial_state;
    if (opt.safe_gate) {
      in.a_log = &a_log;
      in.dt_bias = &dt_bias;
    }
    in.cu_seqlens = cu;
    return in;
  }
  DeltaForward forward() const { return delta_forward(rule, inputs(), opt); }
};

struct Config {
  std::vector<int64_t> cu = {0, 4};
  int64_t H = 1, HV = 2, K = 3, V = 2;
  bool l2 = false, safe_gate = false, sigmoid = false, initial = true;
};

// Random inputs in the ranges the ops see in practice: decays below 1, beta in (0, 1), gdn2's
// erase gate b in (0, 1.5) (fla's chunk_gdn2 docstring: typically [0, 2]), write gate w in
// (0.2, 1.5).
Problem random_problem(DeltaRule rule, const Config& c) {
  const int64_t T = c.cu.back();
  const bool gdn = rule == DeltaRule::gdn, gdn2 = rule == DeltaRule::gdn2;
  Problem p;
  p.rule = rule;
  p.cu = c.cu;
  p.q = random_dense({T, c.H, c.K}, -1, 1);
  p.k = random_dense({T, c.H, c.K}, -1, 1);
  p.v = random_dense({T, c.HV, c.V}, -1, 1);
  const Dims gate_dims = gdn ? Dims{T, c.HV} : Dims{T, c.HV, c.K};
  p.g = c.safe_gate ? random_dense(gate_dims, -1.5, 1.5) : random_dense(gate_dims, -1, -0.05);
  if (gdn2) {
    p.b = random_dense({T, c.HV, c.K}, 0.05, 1.5);
    p.w = random_dense({T, c.HV, c.V}, 0.2, 1.5);
  } else {
    p.beta = c.sigmoid ? random_dense({T, c.HV}, -2, 2) : random_dense({T, c.HV}, 0.05, 0.95);
  }
  p.has_initial = c.initial;
  if (c.initial) p.initial_state = random_dense({int64_t(c.cu.size()) - 1, c.HV, c.K, c.V}, -1, 1);
  p.a_log = random_dense({c.HV}, -1, 0.5);
  p.dt_bias = random_dense({c.HV}, -0.5, 0.5);
  p.opt = {1 / std::sqrt(double(c.K)), c.l2, c.safe_gate, c.sigmoid};
  return p;
}

// ---- hand-worked cases ----

// gdn, K = V = 1, scale 0.5, decay 0.5 per token, beta = [0.5, 0.25]:
//   no initial state: t1 S = 0.5*1*3 = 1.5, o1 = 1.5*0.5*2 = 1.5;
//                     t2 S = 0.75, e = 1.5, S = 0.75 + 0.25*2*(1-1.5) = 0.5, o2 = 0.5*0.5*4 = 1.
//   S0 = 2:           t1 S = 1, e = 1, S = 1 + 0.5*(3-1) = 2, o1 = 2;
//                     t2 S = 1, e = 2, S = 1 + 0.5*(1-2) = 0.5, o2 = 1.
Problem hand_gdn() {
  Problem p;
  p.q = make_dense({2, 1, 1}, {2, 4});
  p.k = make_dense({2, 1, 1}, {1, 2});
  p.v = make_dense({2, 1, 1}, {3, 1});
  p.g = make_dense({2, 1}, {std::log(0.5), std::log(0.5)});
  p.beta = make_dense({2, 1}, {0.5, 0.25});
  p.cu = {0, 2};
  p.opt.scale = 0.5;
  return p;
}

TEST(DeltaForwardByHand, GdnScalar) {
  Problem p = hand_gdn();
  DeltaForward f = p.forward();
  expect_all_near(f.o, make_dense({2, 1, 1}, {1.5, 1.0}), 1e-14, "o");
  expect_all_near(f.final_state, make_dense({1, 1, 1, 1}, {0.5}), 1e-14, "final_state");

  p.has_initial = true;
  p.initial_state = make_dense({1, 1, 1, 1}, {2});
  f = p.forward();
  expect_all_near(f.o, make_dense({2, 1, 1}, {2.0, 1.0}), 1e-14, "o with S0");
  expect_all_near(f.final_state, make_dense({1, 1, 1, 1}, {0.5}), 1e-14, "final_state with S0");
}

// The same case through the raw-logit paths: a_log = 0, softplus(0.5 - 0.5) = log 2 gives decay
// 0.5; sigmoid(0) = 0.5 and sigmoid(log(1/3)) = 0.25.
TEST(DeltaForwardByHand, GdnSafeGateAndBetaSigmoid) {
  Problem p = hand_gdn();
  p.g = make_dense({2, 1}, {0.5, 0.5});
  p.a_log = make_dense({1}, {0.0});
  p.dt_bias = make_dense({1}, {-0.5});
  p.beta = make_dense({2, 1}, {0.0, std::log(1.0 / 3.0)});
  p.opt.safe_gate = p.opt.use_beta_sigmoid = true;
  DeltaForward f = p.forward();
  expect_all_near(f.o, make_dense({2, 1, 1}, {1.5, 1.0}), 1e-14, "o");
  expect_all_near(f.final_state, make_dense({1, 1, 1, 1}, {0.5}), 1e-14, "final_state");
}

// kda, K = V = 2, scale 1, S0 = [[1,0],[0,2]] (rows are key channels):
//   t1 a = [.5,.25]: S' = [[.5,0],[0,.5]], e = S'^T [1,1] = [.5,.5], r = [.5,.5],
//      S = S' + .5 [1,1]^T [.5,.5] = [[.75,.25],[.25,.75]], o1 = S^T [1,0] = [.75,.25]
//   t2 a = [.5,.5]: S' = [[.375,.125],[.125,.375]], e = S'^T [1,0] = [.375,.125],
//      r = [2,0] - e = [1.625,-.125], S = S' + [1,0]^T r = [[2,0],[.125,.375]],
//      o2 = S^T [0,1] = [.125,.375]
TEST(DeltaForwardByHand, KdaTwoChannels) {
  Problem p;
  p.rule = DeltaRule::kda;
  p.q = make_dense({2, 1, 2}, {1, 0, 0, 1});
  p.k = make_dense({2, 1, 2}, {1, 1, 1, 0});
  p.v = make_dense({2, 1, 2}, {1, 1, 2, 0});
  p.g = make_dense({2, 1, 2}, {std::log(0.5), std::log(0.25), std::log(0.5), std::log(0.5)});
  p.beta = make_dense({2, 1}, {0.5, 1.0});
  p.has_initial = true;
  p.initial_state = make_dense({1, 1, 2, 2}, {1, 0, 0, 2});
  p.cu = {0, 2};
  DeltaForward f = p.forward();
  expect_all_near(f.o, make_dense({2, 1, 2}, {0.75, 0.25, 0.125, 0.375}), 1e-14, "o");
  expect_all_near(f.final_state, make_dense({1, 1, 2, 2}, {2, 0, 0.125, 0.375}), 1e-14,
                  "final_state");
}

// gdn2 (fla's naive_recurrent_gdn2: S' = diag(exp g) S, v' = w * v - S'^T (b * k),
// S = S' + k v'^T, o = S^T q), K = V = 2, scale 1, no initial state:
//   t1: S' = 0, v' = [1,1.5] * [2,4] = [2,6], S = [1,2]^T [2,6] = [[2,6],[4,12]],
//       o1 = S^T [1,1] = [6,18]
//   t2 a = [.5,.25]: S' = [[1,3],[1,3]], b * k = [.5*2, .25*1] = [1,.25],
//       erase = S'^T [1,.25] = [1.25,3.75], v' = [2,1] * [1,3] - erase = [.75,-.75],
//       S = S' + [2,1]^T [.75,-.75] = [[2.5,1.5],[1.75,2.25]], o2 = S^T [2,1] = [6.75,5.25]
// (eagle's earlier rule, S += (b * k)(w * (v - S'^T k))^T, gave o = [2,6, .125,2.0625].)
TEST(DeltaForwardByHand, Gdn2EraseAndWriteGates) {
  Problem p;
  p.rule = DeltaRule::gdn2;
  p.q = make_dense({2, 1, 2}, {1, 1, 2, 1});
  p.k = make_dense({2, 1, 2}, {1, 2, 2, 1});
  p.v = make_dense({2, 1, 2}, {2, 4, 1, 3});
  p.g = make_dense({2, 1, 2}, {std::log(0.5), std::log(0.5), std::log(0.5), std::log(0.25)});
  p.b = make_dense({2, 1, 2}, {0.5, 0.25, 0.5, 0.25});
  p.w = make_dense({2, 1, 2}, {1, 1.5, 2, 1});
  p.cu = {0, 2};
  DeltaForward f = p.forward();
  expect_all_near(f.o, make_dense({2, 1, 2}, {6, 18, 6.75, 5.25}), 1e-14, "o");
  expect_all_near(f.final_state, make_dense({1, 1, 2, 2}, {2.5, 1.5, 1.75, 2.25}), 1e-14, "final");

  // From S0 = [[1,0],[0,2]] one token (t2's operands): S' = [[.5,0],[0,.5]],
  // erase = S'^T [1,.25] = [.5,.125], v' = [2,3] - erase = [1.5,2.875],
  // S = S' + [2,1]^T v' = [[3.5,5.75],[1.5,3.375]], o = S^T [2,1] = [8.5,14.875].
  Problem one = p;
  for (auto [dst, src] : {std::pair{&one.q, &p.q},
                          {&one.k, &p.k},
                          {&one.v, &p.v},
                          {&one.g, &p.g},
                          {&one.b, &p.b},
                          {&one.w, &p.w}}) {
    *dst = test::dense_rows(*src, 1, 2);
  }
  one.cu = {0, 1};
  one.has_initial = true;
  one.initial_state = make_dense({1, 1, 2, 2}, {1, 0, 0, 2});
  f = one.forward();
  expect_all_near(f.o, make_dense({1, 1, 2}, {8.5, 14.875}), 1e-14, "o with S0");
  expect_all_near(f.final_state, make_dense({1, 1, 2, 2}, {3.5, 5.75, 1.5, 3.375}), 1e-14,
                  "final with S0");
}

// ---- independent formula checks ----

// The routines against the support library's oracle of the recurrence, for every rule, with and
// without each option, over packed sequences one of which is empty.
TEST(DeltaForwardFormula, MatchesTheOracle) {
  for (DeltaRule rule : kRules) {
    for (bool l2 : {false, true}) {
      for (bool initial : {false, true}) {
        const bool gdn = rule == DeltaRule::gdn;
        SCOPED_TRACE(::testing::Message() << name(rule) << " l2=" << l2 << " initial=" << initial);
        const Config c{.cu = {0, 3, 3, 5},
                       .H = 1,
                       .HV = 2,
                       .l2 = l2,
                       .safe_gate = gdn && l2,
                       .sigmoid = gdn && !initial,
                       .initial = initial};
        const Problem p = random_problem(rule, c);
        const test::oracle::DeltaOperands ops{.q = p.q,
                                              .k = p.k,
                                              .v = p.v,
                                              .g = p.g,
                                              .beta = p.beta,
                                              .b = p.b,
                                              .w = p.w,
                                              .initial_state = initial ? p.initial_state : Dense(),
                                              .a_log = c.safe_gate ? p.a_log : Dense(),
                                              .dt_bias = c.safe_gate ? p.dt_bias : Dense(),
                                              .cu_seqlens = p.cu};
        const auto want = test::oracle::delta_rule(
            name(rule), ops,
            {p.opt.scale, p.opt.use_qk_l2norm, p.opt.safe_gate, p.opt.use_beta_sigmoid});
        const DeltaForward f = p.forward();
        expect_all_near(f.o, want.o, 1e-12, "o");
        expect_all_near(f.final_state, want.final_state, 1e-12, "final_state");
      }
    }
  }
}

// With beta = 0 nothing is written: o_t = S0^T (exp(sum_{s<=t} g_s) * scale q_t) per key channel.
TEST(DeltaForwardFormula, BetaZeroOnlyDecays) {
  for (DeltaRule rule : {DeltaRule::gdn, DeltaRule::kda}) {
    SCOPED_TRACE(name(rule));
    Config c;
    Problem p = random_problem(rule, c);
    std::fill(p.beta.data.begin(), p.beta.data.end(), 0.0);
    const DeltaForward f = p.forward();
    const int64_t T = c.cu.back();
    Dense want({T, c.HV, c.V});
    for (int64_t h = 0; h < c.HV; ++h) {
      std::vector<double> log_decay(c.K, 0.0);
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t i = 0; i < c.K; ++i) {
          log_decay[i] +=
              rule == DeltaRule::gdn ? p.g.data[t * c.HV + h] : p.g.data[(t * c.HV + h) * c.K + i];
          for (int64_t j = 0; j < c.V; ++j) {
            want.data[(t * c.HV + h) * c.V + j] += std::exp(log_decay[i]) *
                                                   p.initial_state.data[(h * c.K + i) * c.V + j] *
                                                   p.opt.scale * p.q.data[t * c.K + i];
          }
        }
      }
    }
    expect_all_near(f.o, want, 1e-12, "o");
  }
}

// kda with g constant across K is gdn, forward and backward (gdn's dg sums kda's over K).
TEST(DeltaForwardFormula, KdaWithConstantGateIsGdn) {
  const Config c{.cu = {0, 2, 5}, .l2 = true};
  Problem gdn = random_problem(DeltaRule::gdn, c);
  Problem kda = gdn;
  kda.rule = DeltaRule::kda;
  kda.g = Dense({5, c.HV, c.K});
  for (std::size_t i = 0; i < kda.g.data.size(); ++i) kda.g.data[i] = gdn.g.data[i / c.K];
  const DeltaForward fg = gdn.forward(), fk = kda.forward();
  expect_all_near(fk.o, fg.o, 1e-12, "o");
  expect_all_near(fk.final_state, fg.final_state, 1e-12, "final_state");

  const Dense d_o = random_dense(fg.o.dims, -1, 1), dS = random_dense(fg.final_state.dims, -1, 1);
  const DeltaBackward bg = delta_backward(DeltaRule::gdn, gdn.inputs(), d_o, &dS, gdn.opt);
  const DeltaBackward bk = delta_backward(DeltaRule::kda, kda.inputs(), d_o, &dS, kda.opt);
  for (auto [got, want, what] : {std::tuple{&bk.dq, &bg.dq, "dq"},
                                 {&bk.dk, &bg.dk, "dk"},
                                 {&bk.dv, &bg.dv, "dv"},
                                 {&bk.dbeta, &bg.dbeta, "dbeta"},
                                 {&bk.d_initial_state, &bg.d_initial_state, "d_initial_state"}}) {
    expect_all_near(*got, *want, 1e-12, what);
  }
  Dense dg_summed(bg.dg.dims);
  for (std::size_t i = 0; i < bk.dg.data.size(); ++i) dg_summed.data[i / c.K] += bk.dg.data[i];
  expect_all_near(dg_summed, bg.dg, 1e-12, "dg");
}

// gdn2 with b = beta on every key channel and w = beta on every value channel is kda (fla's
// chunk_gdn2 docstring: "Setting b = w = beta (scalar) recovers KDA"), forward and backward
// (kda's dbeta sums gdn2's db over K and dw over V).
TEST(DeltaForwardFormula, Gdn2WithBAndWEqualToBetaIsKda) {
  const Config c{.cu = {0, 3, 5}, .l2 = true};
  const Problem kda = random_problem(DeltaRule::kda, c);
  Problem gdn2 = kda;
  gdn2.rule = DeltaRule::gdn2;
  gdn2.beta = Dense();
  gdn2.b = Dense({5, c.HV, c.K});
  for (std::size_t i = 0; i < gdn2.b.data.size(); ++i) gdn2.b.data[i] = kda.beta.data[i / c.K];
  gdn2.w = Dense({5, c.HV, c.V});
  for (std::size_t i = 0; i < gdn2.w.data.size(); ++i) gdn2.w.data[i] = kda.beta.data[i / c.V];
  const DeltaForward fk = kda.forward(), f2 = gdn2.forward();
  expect_all_near(f2.o, fk.o, 1e-12, "o");
  expect_all_near(f2.final_state, fk.final_state, 1e-12, "final_state");

  const Dense d_o = random_dense(fk.o.dims, -1, 1), dS = random_dense(fk.final_state.dims, -1, 1);
  const DeltaBackward bk = delta_backward(DeltaRule::kda, kda.inputs(), d_o, &dS, kda.opt);
  const DeltaBackward b2 = delta_backward(DeltaRule::gdn2, gdn2.inputs(), d_o, &dS, gdn2.opt);
  for (auto [got, want, what] : {std::tuple{&b2.dq, &bk.dq, "dq"},
                                 {&b2.dk, &bk.dk, "dk"},
                                 {&b2.dv, &bk.dv, "dv"},
                                 {&b2.dg, &bk.dg, "dg"},
                                 {&b2.d_initial_state, &bk.d_initial_state, "d_initial_state"}}) {
    expect_all_near(*got, *want, 1e-12, what);
  }
  Dense dbeta(bk.dbeta.dims);
  for (std::size_t i = 0; i < b2.db.data.size(); ++i) dbeta.data[i / c.K] += b2.db.data[i];
  for (std::size_t i = 0; i < b2.dw.data.size(); ++i) dbeta.data[i / c.V] += b2.dw.data[i];
  expect_all_near(dbeta, bk.dbeta, 1e-12, "dbeta");
}

// With HV = 2H, value head h equals a run of that head alone with q/k head h / 2.
TEST(DeltaForwardFormula, GroupedValueHeadsReadTheirQkHead) {
  for (DeltaRule rule : kRules) {
    SCOPED_TRACE(name(rule));
    const Config c{.cu = {0, 2, 5}, .H = 2, .HV = 4, .safe_gate = rule == DeltaRule::gdn};
    const Problem p = random_problem(rule, c);
    const DeltaForward f = p.forward();
    for (int64_t h = 0; h < c.HV; ++h) {
      Problem one = p;
      one.q = take(p.q, 1, h / 2);
      one.k = take(p.k, 1, h / 2);
      one.v = take(p.v, 1, h);
      one.g = take(p.g, 1, h);
      if (rule == DeltaRule::gdn2) {
        one.b = take(p.b, 1, h);
        one.w = take(p.w, 1, h);
      } else {
        one.beta = take(p.beta, 1, h);
      }
      one.initial_state = take(p.initial_state, 1, h);
      one.a_log = take(p.a_log, 0, h);
      one.dt_bias = take(p.dt_bias, 0, h);
      const DeltaForward alone = one.forward();
      expect_all_near(alone.o, take(f.o, 1, h), 1e-12, "o head " + std::to_string(h));
      expect_all_near(alone.final_state, take(f.final_state, 1, h), 1e-12, "final_state");
    }
  }
}

// Packed sequences (one of them empty) are independent: each equals a run of it alone.
TEST(DeltaForwardFormula, PackedSequencesAreIndependent) {
  for (DeltaRule rule : kRules) {
    SCOPED_TRACE(name(rule));
    const Config c{.cu = {0, 2, 2, 5}, .l2 = true};
    const Problem p = random_problem(rule, c);
    const DeltaForward f = p.forward();
    for (std::size_t b = 0; b + 1 < c.cu.size(); ++b) {
      const int64_t t0 = c.cu[b], t1 = c.cu[b + 1];
      Problem one = p;
      one.cu = {0, t1 - t0};
      for (auto [dst, src] :
           {std::pair{&one.q, &p.q}, {&one.k, &p.k}, {&one.v, &p.v}, {&one.g, &p.g}}) {
        *dst = test::dense_rows(*src, t0, t1);
      }
      if (rule == DeltaRule::gdn2) {
        one.b = test::dense_rows(p.b, t0, t1);
        one.w = test::dense_rows(p.w, t0, t1);
      } else {
        one.beta = test::dense_rows(p.beta, t0, t1);
      }
      one.initial_state = take(p.initial_state, 0, int64_t(b));
      const DeltaForward alone = one.forward();
      expect_all_near(alone.o, test::dense_rows(f.o, t0, t1), 1e-12,
                      "o of sequence " + std::to_string(b));
      expect_all_near(alone.final_state, take(f.final_state, 0, int64_t(b)), 1e-12, "final_state");
    }
  }
}

// A batch of L < T active rows (cu_seqlens ends before T, as in a graph captured for capacity):
// the active rows' outputs and gradients equal the exact batch's, the padding rows (NaN in every
// input) come out 0 in o and in every gradient, and d_a_log / d_dt_bias stay finite.
TEST(DeltaForwardFormula, PaddingRowsPastTheBatchAreNeverRead) {
  for (DeltaRule rule : kRules) {
    SCOPED_TRACE(name(rule));
    const Config c{.cu = {0, 2, 5}, .l2 = true, .safe_gate = rule == DeltaRule::gdn};
    const Problem exact = random_problem(rule, c);
    const int64_t L = 5, T = 8;
    Problem padded = exact;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const auto pad = [&](Dense& x) {
      Dims dims = x.dims;
      dims[0] = T;
      Dense y(dims);
      std::fill(y.data.begin(), y.data.end(), nan);
      std::copy(x.data.begin(), x.data.end(), y.data.begin());
      x = y;
    };
    for (Dense* x : {&padded.q, &padded.k, &padded.v, &padded.g}) pad(*x);
    if (rule == DeltaRule::gdn2) {
      pad(padded.b);
      pad(padded.w);
    } else {
      pad(padded.beta);
    }
    const DeltaForward fe = exact.forward(), fp = padded.forward();
    expect_all_near(test::dense_rows(fp.o, 0, L), fe.o, 1e-12, "active rows of o");
    expect_all_near(test::dense_rows(fp.o, L, T), Dense({T - L, c.HV, c.V}), 0, "padding of o");
    expect_all_near(fp.final_state, fe.final_state, 1e-12, "final_state");

    Dense d_o = random_dense({L, c.HV, c.V}, -1, 1);
    const DeltaBackward be = delta_backward(rule, exact.inputs(), d_o, nullptr, exact.opt);
    pad(d_o);
    const DeltaBackward bp = delta_backward(rule, padded.inputs(), d_o, nullptr, padded.opt);
    const auto same = [&](const Dense& got, const Dense& want, const char* what) {
      expect_all_near(test::dense_rows(got, 0, L), want, 1e-12, what);
      Dims pad_dims = got.dims;
      pad_dims[0] = T - L;
      expect_all_near(test::dense_rows(got, L, T), Dense(pad_dims), 0, what);
    };
    same(bp.dq, be.dq, "dq");
    same(bp.dk, be.dk, "dk");
    same(bp.dv, be.dv, "dv");
    same(bp.dg, be.dg, "dg");
    if (rule == DeltaRule::gdn2) {
      same(bp.db, be.db, "db");
      same(bp.dw, be.dw, "dw");
    } else {
      same(bp.dbeta, be.dbeta, "dbeta");
    }
    expect_all_near(bp.d_initial_state, be.d_initial_state, 1e-12, "d_initial_state");
    if (rule == DeltaRule::gdn) {
      expect_all_near(bp.d_a_log, be.d_a_log, 1e-12, "d_a_log");
      expect_all_near(bp.d_dt_bias, be.d_dt_bias, 1e-12, "d_dt_bias");
    }
  }
}

// use_qk_l2norm equals feeding rows already divided by sqrt(sum x^2 + 1e-6).
TEST(DeltaForwardFormula, L2NormEqualsPrenormalizedRows) {
  for (DeltaRule rule : kRules) {
    SCOPED_TRACE(name(rule));
    const Config c{.l2 = true};
    const Problem p = random_problem(rule, c);
    Problem plain = p;
    plain.opt.use_qk_l2norm = false;
    for (Dense* x : {&plain.q, &plain.k}) {
      for (std::size_t row = 0; row < x->data.size(); row += c.K) {
        double sum = 0;
        for (int64_t i = 0; i < c.K; ++i) sum += x->data[row + i] * x->data[row + i];
        for (int64_t i = 0; i < c.K; ++i) x->data[row + i] /= std::sqrt(sum + 1e-6);
      }
    }
    const DeltaForward f = p.forward(), want = plain.forward();
    expect_all_near(f.o, want.o, 1e-12, "o");
    expect_all_near(f.final_state, want.final_state, 1e-12, "final_state");
  }
}

// safe_gate and use_beta_sigmoid equal feeding gdn the gate and beta computed here.
TEST(DeltaForwardFormula, GdnRawLogitsEqualPrecomputedGates) {
  const Config c{.cu = {0, 3, 5}, .safe_gate = true, .sigmoid = true};
  const Problem p = random_problem(DeltaRule::gdn, c);
  Problem plain = p;
  plain.opt.safe_gate = plain.opt.use_beta_sigmoid = false;
  for (std::size_t i = 0; i < p.g.data.size(); ++i) {
    const std::size_t h = i % c.HV;
    plain.g.data[i] =
        -std::exp(p.a_log.data[h]) * std::log(1 + std::exp(p.g.data[i] + p.dt_bias.data[h]));
    plain.beta.data[i] = 1 / (1 + std::exp(-p.beta.data[i]));
  }
  const DeltaForward f = p.forward(), want = plain.forward();
  expect_all_near(f.o, want.o, 1e-12, "o");
  expect_all_near(f.final_state, want.final_state, 1e-12, "final_state");
}

// ---- backward against central finite differences ----

// Checks every gradient output of delta_backward against (L(x+h) - L(x-h)) / 2h for
// L = sum(d_o * o) + sum(d_final_state * final_state), and that the rest are empty.
void check_gradients(DeltaRule rule, const Config& c, bool with_d_final) {
  Problem p = random_problem(rule, c);
  const DeltaForward f = p.forward();
  const Dense d_o = random_dense(f.o.dims, -1, 1);
  const Dense d_final = random_dense(f.final_state.dims, -1, 1);
  const Dense* dS = with_d_final ? &d_final : nullptr;
  const DeltaBackward grad = delta_backward(rule, p.inputs(), d_o, dS, p.opt);
  const auto loss = [&] {
    const DeltaForward y = p.forward();
    return sum_product(d_o, y.o) + (dS ? sum_product(*dS, y.final_state) : 0.0);
  };

  struct Port {
    const char* name;
    Dense* input;  // null: the gradient must be empty
    const Dense& grad;
  };
  const bool gdn2 = rule == DeltaRule::gdn2;
  const Port ports[] = {
      {"dq", &p.q, grad.dq},
      {"dk", &p.k, grad.dk},
      {"dv", &p.v, grad.dv},
      {"dg", &p.g, grad.dg},
      {"dbeta", gdn2 ? nullptr : &p.beta, grad.dbeta},
      {"db", gdn2 ? &p.b : nullptr, grad.db},
      {"dw", gdn2 ? &p.w : nullptr, grad.dw},
      {"d_initial_state", c.initial ? &p.initial_state : nullptr, grad.d_initial_state},
      {"d_a_log", c.safe_gate ? &p.a_log : nullptr, grad.d_a_log},
      {"d_dt_bias", c.safe_gate ? &p.dt_bias : nullptr, grad.d_dt_bias},
  };
  constexpr double h = 1e-6;
  for (const Port& port : ports) {
    SCOPED_TRACE(port.name);
    if (port.input == nullptr) {
      EXPECT_TRUE(port.grad.dims.empty() && port.grad.data.empty());
      continue;
    }
    ASSERT_EQ(port.grad.dims, port.input->dims);
    const std::vector<double> fd = test::oracle::central_difference(port.input->data, loss, h);
    for (std::size_t i = 0; i < fd.size(); ++i)
      EXPECT_NEAR(port.grad.data[i], fd[i], 1e-6 * (1 + std::abs(fd[i]))) << "flat index " << i;
  }
}

void check_gradient_grid(DeltaRule rule, bool raw_logit_options) {
  const bool flags[] = {false, true};
  for (const std::vector<int64_t>& cu : {std::vector<int64_t>{0, 4}, {0, 3, 5}}) {
    for (bool l2 : flags) {
      for (bool initial : flags) {
        for (bool with_d_final : flags) {
          for (bool safe_gate : flags) {
            for (bool sigmoid : flags) {
              if (!raw_logit_options && (safe_gate || sigmoid)) continue;
              SCOPED_TRACE(::testing::Message()
                           << name(rule) << " B=" << cu.size() - 1 << " l2=" << l2
                           << " initial=" << initial << " d_final=" << with_d_final
                           << " safe_gate=" << safe_gate << " sigmoid=" << sigmoid);
              const Config c{.cu = cu,
                             .l2 = l2,
                             .safe_gate = safe_gate,
                             .sigmoid = sigmoid,
                             .initial = initial};
              check_gradients(rule, c, with_d_final);
            }
          }
        }
      }
    }
  }
}

TEST(DeltaBackward, GdnMatchesFiniteDifferences) {
  check_gradient_grid(DeltaRule::gdn, true);
}
TEST(DeltaBackward, KdaMatchesFiniteDifferences) {
  check_gradient_grid(DeltaRule::kda, false);
}
TEST(DeltaBackward, Gdn2MatchesFiniteDifferences) {
  check_gradient_grid(DeltaRule::gdn2, false);
}

// ---- InvalidArgument paths ----

// Breaks one thing in a valid problem and expects delta_forward and delta_backward to reject it.
void expect_rejected(DeltaRule rule, const std::function<void(Problem&, DeltaInputs&)>& breaks,
                     std::initializer_list<std::string> fragments, Config c = {}) {
  Problem p = random_problem(rule, c);
  const DeltaForward f = p.forward();
  DeltaInputs in = p.inputs();
  breaks(p, in);
  expect_invalid([&] { delta_forward(rule, in, p.opt); }, fragments);
  expect_invalid([&] { delta_backward(rule, in, f.o, nullptr, p.opt); }, fragments);
}

TEST(DeltaErrors, OptionsOnlyGdnHas) {
  for (DeltaRule rule : {DeltaRule::kda, DeltaRule::gdn2}) {
    expect_rejected(rule, [](Problem& p, DeltaInputs&) { p.opt.safe_gate = true; },
                    {name(rule), "safe_gate", "only gdn"});
    expect_rejected(rule, [](Problem& p, DeltaInputs&) { p.opt.use_beta_sigmoid = true; },
                    {name(rule), "use_beta_sigmoid", "only gdn"});
  }
  expect_rejected(
      DeltaRule::gdn,
      [](Problem& p, DeltaInputs&) { p.opt.scale = std::numeric_limits<double>::infinity(); },
      {"gdn", "scale", "not finite"});
}

TEST(DeltaErrors, MissingRequiredOperands) {
  using Field = const Dense* DeltaInputs::*;
  for (auto [field, arg] : {std::pair<Field, const char*>{&DeltaInputs::q, "q: required"},
                            {&DeltaInputs::k, "k: required"},
                            {&DeltaInputs::v, "v: required"},
                            {&DeltaInputs::g, "g: required"}}) {
    for (DeltaRule rule : kRules) {
      expect_rejected(rule, [f = field](Problem&, DeltaInputs& in) { in.*f = nullptr; },
                      {name(rule), arg});
    }
  }
  for (DeltaRule rule : {DeltaRule::gdn, DeltaRule::kda}) {
    expect_rejected(rule, [](Problem&, DeltaInputs& in) { in.beta = nullptr; },
                    {name(rule), "beta: required"});
  }
  expect_rejected(DeltaRule::gdn2, [](Problem&, DeltaInputs& in) { in.b = nullptr; },
                  {"gdn2", "b: required"});
  expect_rejected(DeltaRule::gdn2, [](Problem&, DeltaInputs& in) { in.w = nullptr; },
                  {"gdn2", "w: required"});
  const Config safe{.safe_gate = true};
  expect_rejected(
      DeltaRule::gdn, [](Problem&, DeltaInputs& in) { in.a_log = nullptr; },
      {"gdn", "a_log: required"}, safe);
  expect_rejected(
      DeltaRule::gdn, [](Problem&, DeltaInputs& in) { in.dt_bias = nullptr; },
      {"gdn", "dt_bias: required"}, safe);
}

TEST(DeltaErrors, OperandsThatDoNotApply) {
  for (DeltaRule rule : {DeltaRule::gdn, DeltaRule::kda}) {
    expect_rejected(rule, [](Problem& p, DeltaInputs& in) { in.w = &p.v; },
                    {name(rule), "w: only gdn2"});
    expect_rejected(rule, [](Problem& p, DeltaInputs& in) { in.b = &p.g; },
                    {name(rule), "b: only gdn2 takes an erase gate"});
  }
  expect_rejected(DeltaRule::gdn2, [](Problem& p, DeltaInputs& in) { in.beta = &p.b; },
                  {"gdn2", "beta", "erase gate b and write gate w instead"});
  expect_rejected(DeltaRule::gdn, [](Problem& p, DeltaInputs& in) { in.a_log = &p.a_log; },
                  {"gdn", "a_log: given without safe_gate"});
  expect_rejected(DeltaRule::gdn, [](Problem& p, DeltaInputs& in) { in.dt_bias = &p.dt_bias; },
                  {"gdn", "dt_bias: given without safe_gate"});
}

TEST(DeltaErrors, QkvShapes) {
  const auto with = [](Dense Problem::*field, Dense value) {
    return [field, value](Problem& p, DeltaInputs&) { p.*field = value; };
  };
  for (DeltaRule rule : kRules) {
    const char* r = name(rule);
    expect_rejected(rule, with(&Problem::q, Dense({4, 3})), {r, "q dims [4,3]", "[T, H, K]"});
    expect_rejected(rule, with(&Problem::q, Dense({4, 0, 3})), {r, "q dims [4,0,3]"});
    Dense negative;  // built by hand: Dense's constructor would size it from the negative count
    negative.dims = {-1, 1, 3};
    expect_rejected(rule, with(&Problem::q, negative), {r, "q dims [-1,1,3]", "negative"});
    expect_rejected(rule, [](Problem& p, DeltaInputs&) { p.q.data.pop_back(); },
                    {r, "q holds 11 values for dims [4,1,3]"});
    expect_rejected(rule, with(&Problem::k, Dense({4, 1, 2})),
                    {r, "k dims [4,1,2]: expected [T, H, K] = [4,1,3]"});
    expect_rejected(rule, with(&Problem::v, Dense({4, 2})), {r, "v dims [4,2]", "[T, HV, V]"});
    expect_rejected(rule, with(&Problem::v, Dense({3, 2, 2})), {r, "v dims [3,2,2]", "T = 4"});
    expect_rejected(rule, with(&Problem::v, Dense({4, 3, 2})),
                    {r, "v: HV = 3 is not a multiple of H = 2"}, Config{.H = 2, .HV = 4});
    expect_rejected(rule, [](Problem& p, DeltaInputs&) { p.v.data.push_back(1); },
                    {r, "v holds 17 values"});
  }
}

TEST(DeltaErrors, CuSeqlens) {
  const auto with = [](std::vector<int64_t> cu) {
    return [cu](Problem&, DeltaInputs& in) { in.cu_seqlens = cu; };
  };
  for (DeltaRule rule : kRules) {
    const char* r = name(rule);
    expect_rejected(rule, with({}), {r, "cu_seqlens []", "starting at 0"});
    expect_rejected(rule, with({1, 4}), {r, "cu_seqlens [1,4]", "starting at 0"});
    expect_rejected(rule, with({0, 3, 2, 4}), {r, "cu_seqlens [0,3,2,4]", "decreases at index 2"});
    expect_rejected(rule, with({0, 5}), {r, "cu_seqlens [0,5]", "ends at 5, past T = 4"});
  }
}

TEST(DeltaErrors, GateShapes) {
  const auto with = [](Dense Problem::*field, Dense value) {
    return [field, value](Problem& p, DeltaInputs&) { p.*field = value; };
  };
  expect_rejected(DeltaRule::gdn, with(&Problem::g, Dense({4, 2, 3})),
                  {"gdn: g dims [4,2,3]: expected [T, HV] = [4,2]"});
  expect_rejected(DeltaRule::gdn, with(&Problem::beta, Dense({4, 2, 3})),
                  {"gdn: beta dims [4,2,3]: expected [T, HV] = [4,2]"});
  for (DeltaRule rule : {DeltaRule::kda, DeltaRule::gdn2}) {
    const std::string r = name(rule);
    expect_rejected(rule, with(&Problem::g, Dense({4, 2})),
                    {(r + ": g dims [4,2]: expected [T, HV, K] = [4,2,3]").c_str()});
  }
  expect_rejected(DeltaRule::kda, with(&Problem::beta, Dense({4, 2, 3})),
                  {"kda: beta dims [4,2,3]: expected [T, HV] = [4,2]"});
  expect_rejected(DeltaRule::gdn2, with(&Problem::b, Dense({4, 2})),
                  {"gdn2: b dims [4,2]: expected [T, HV, K] = [4,2,3]"});
  expect_rejected(DeltaRule::gdn2, with(&Problem::w, Dense({4, 2, 3})),
                  {"gdn2: w dims [4,2,3]: expected [T, HV, V] = [4,2,2]"});
  for (DeltaRule rule : kRules) {
    const std::string r = name(rule);
    expect_rejected(
        rule, with(&Problem::initial_state, Dense({2, 2, 3, 2})),
        {(r + ": initial_state dims [2,2,3,2]: expected [B, HV, K, V] = [1,2,3,2]").c_str()});
  }
  const Config safe{.safe_gate = true};
  expect_rejected(DeltaRule::gdn, with(&Problem::a_log, Dense({1})),
                  {"gdn: a_log dims [1]: expected [HV] = [2]"}, safe);
  expect_rejected(DeltaRule::gdn, with(&Problem::dt_bias, Dense({2, 1})),
                  {"gdn: dt_bias dims [2,1]: expected [HV] = [2]"}, safe);
}

TEST(DeltaErrors, BackwardGradientShapes) {
  for (DeltaRule rule : kRules) {
    const std::string r = name(rule);
    const Problem p = random_problem(rule, Config{});
    const DeltaForward f = p.forward();
    expect_invalid(
        [&] {
          delta_backward(rule, p.inputs(), Dense({4, 2}), nullptr, p.opt);
        },
        {(r + ": d_o dims [4,2]: expected [T, HV, V] = [4,2,2]").c_str()});
    const Dense bad_final({1, 2, 2, 3});
    expect_invalid([&] { delta_backward(rule, p.inputs(), f.o, &bad_final, p.opt); },
                   {(r + ": d_final_state dims [1,2,2,3]: expected [B, HV, K, V]").c_str()});
  }
}

}  // namespace
}  // namespace eagle::reference
