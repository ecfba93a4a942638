// Reverse mode through device control flow and forks (src/diff, the tapes of src/graph/saving.cpp):
// an if/else whose condition changes between launches, a switch, a fork with a wait, a capped
// for_ loop with break and continue, a while_ with a turn cap; each in both forms (a reverse
// graph, and forward + reverse as one graph) against float64 central finite differences of the
// forward graph itself on the CPU, on fresh random inputs (the suite prints its seed). And the
// refusal of a while_ without a cap, after which the forward graph still runs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "eagle/eagle.hpp"
#include "graph_gradients.hpp"
#include "random.hpp"
#include "test_util.hpp"
#include "testing_kernels.hpp"

namespace eagle {
namespace {

using test::expect_throw_with;
const Device cpu = Device::cpu();

void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << what << ", element " << i;
}

Array cell(uint32_t v) {
  return Array::from(std::vector<uint32_t>{v}, {1}, cpu);
}

// A forward: records the loss (f64[1]) and appends the values to differentiate, whose params are
// named `names` in the same order.
using Forward = std::function<Value(Recorder&, std::vector<Value>& wrt)>;
struct Param {
  std::string name;
  Array value;
};

// The two graphs of one forward: `f` (the forward alone, with a reverse graph over it) and `one`
// (forward and reverse recorded together: results loss, then the gradients).
struct Both {
  Graph f, back, one;
  std::vector<std::string> names;
};

Both make_both(const Forward& forward, const std::vector<std::string>& names) {
  Graph f = Graph::record(
      [&](Recorder& r) {
        std::vector<Value> wrt;
        r.result(forward(r, wrt));
      },
      RecordOptions{.record = true});
  f.build(cpu);
  Graph back = diff::reverse(f, {"result"}, names);
  Graph one = Graph::record(
      [&](Recorder& r) {
        std::vector<Value> wrt;
        const Value loss = forward(r, wrt);
        std::vector<Value> out{loss};
        for (const Value& g : diff::gradients(r, {loss}, wrt)) out.push_back(g);
        r.result(out);
      },
      RecordOptions{.record = true});
  one.build(cpu);
  return Both{std::move(f), std::move(back), std::move(one), names};
}

// x and w: random f64 params of `n` elements each.
std::vector<Param> random_xw(int64_t n) {
  return {{"x", test::random_array({n}, DType::f64, cpu)},
          {"w", test::random_array({n}, DType::f64, cpu)}};
}

// make_both for a loss of the params x and w (params[0] and params[1]), differentiated with
// respect to both.
using XwLoss = std::function<Value(Recorder& r, const Value& x, const Value& w)>;
Both make_both_xw(const std::vector<Param>& params, const XwLoss& loss) {
  return make_both(
      [&](Recorder& r, std::vector<Value>& wrt) {
        const Value x = r.param("x", params[0].value), w = r.param("w", params[1].value);
        wrt = {x, w};
        return loss(r, x, w);
      },
      {"x", "w"});
}

// Both forms against finite differences at the graphs' current bindings.
void check(Both& b, const std::vector<Param>& params, const std::string& variant) {
  b.f();
  const std::vector<Array>& grads = b.back();
  std::vector<std::vector<double>> got;
  for (const Array& g : grads) got.push_back(g.to_vector<double>());
  const std::vector<Array>& one = b.one();
  std::vector<std::vector<double>> got_one;
  for (std::size_t i = 1; i < one.size(); ++i) got_one.push_back(one[i].to_vector<double>());
  EXPECT_EQ(one[0].to_vector<double>(), b.f()[0].to_vector<double>()) << variant;
  ASSERT_EQ(got.size(), params.size());
  ASSERT_EQ(got_one.size(), params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::vector<double> want =
        test::graph_finite_difference(b.f, params[i].name, params[i].value);
    expect_close(got[i], want, variant + ": diff::reverse d/d" + params[i].name);
    expect_close(got_one[i], want, variant + ": diff::gradients d/d" + params[i].name);
  }
}

// A reverse graph reads the forward's arrays as they were when it was made: after a bind, make
// it again.
void bind_both(Both& b, const std::string& name, const Array& a) {
  b.f.bind(name, a);
  b.back = diff::reverse(b.f, {"result"}, b.names);
  b.one.bind(name, a);
}

// h = x w (then) or x^2 + x (else), chosen by a cell copied from "flag" and overwritten after
// the if: the reverse must take the arm that ran, from the saved cell.
TEST(DiffControl, IfElseWhoseConditionChangesBetweenLaunches) {
  const std::vector<Param> params = random_xw(4);
  Both b = make_both_xw(params, [&](Recorder& r, const Value& x, const Value& w) {
    Value c = r.empty({1}, DType::u32, "c");
    r.call(kernels::copy(), {r.param("flag", cell(1))}, buffer(c));
    Value h = r.empty({4}, DType::f64, "h");
    r.if_(
        c,
        [&] {
          r.call(kernels::mul(), {x, w}, buffer(h));
        },
        [&] {
          r.call(kernels::mul(), {x, x}, buffer(h));
          r.call(kernels::add(), {h, x}, buffer(h));
        });
    r.call(kernels::fill(), {0.0}, buffer(c));  // the condition changes after the if
    return r.call(kernels::sum(), {r.call(kernels::mul(), {h, h})});
  });
  EXPECT_EQ(b.f.saved_bytes(), 4u);  // the condition cell, before the fill overwrote it
  for (uint32_t flag : {1u, 0u, 1u}) {
    bind_both(b, "flag", cell(flag));
    check(b, params, "flag " + std::to_string(flag));
  }
}

// Arm k when the cell holds k; none for 3 (h keeps the copy of x made before).
TEST(DiffControl, ASwitchReversesTheArmThatRan) {
  const std::vector<Param> params = random_xw(3);
  Both b = make_both_xw(params, [&](Recorder& r, const Value& x, const Value& w) {
    Value h = r.empty({3}, DType::f64, "h");
    r.call(kernels::copy(), {x}, buffer(h));
    r.switch_(r.param("k", cell(0)), {[&] {
                                        r.call(kernels::scale(), {h, 2.0}, buffer(h));
                                      },
                                      [&] {
                                        r.call(kernels::mul(), {h, w}, buffer(h));
                                      },
                                      [&] {
                                        r.call(kernels::mul(), {h, h}, buffer(h));
                                        r.call(kernels::axpy(), {w, h, 0.5}, buffer(h));
                                      }});
    return r.call(kernels::sum(), {r.call(kernels::mul(), {h, w})});
  });
  for (uint32_t k : {0u, 1u, 2u, 3u}) {
    bind_both(b, "k", cell(k));
    check(b, params, "arm " + std::to_string(k));
  }
}

// if / elif / else: the decision cell of the chain is what the reverse's switch reads.
TEST(DiffControl, AnIfChainReversesTheArmItChose) {
  const std::vector<Param> params = random_xw(3);
  Both b = make_both_xw(params, [&](Recorder& r, const Value& x, const Value& w) {
    Value h = r.empty({3}, DType::f64, "h");
    r.if_chain({{r.param("c0", cell(0)),
                 [&] {
                   r.call(kernels::mul(), {x, w}, buffer(h));
                 }},
                {r.param("c1", cell(0)),
                 [&] {
                   r.call(kernels::mul(), {x, x}, buffer(h));
                 }}},
               [&] {
                 r.call(kernels::scale(), {w, 3.0}, buffer(h));
               });
    return r.call(kernels::sum(), {r.call(kernels::mul(), {h, h})});
  });
  for (const auto& [c0, c1] : {std::pair{1u, 0u}, std::pair{0u, 1u}, std::pair{0u, 0u}}) {
    bind_both(b, "c0", cell(c0));
    bind_both(b, "c1", cell(c1));
    check(b, params, "if_chain " + std::to_string(c0) + std::to_string(c1));
  }
}

// Fork nodes, and nodes with waits, of a graph.
std::pair<int, int> forks_and_waits(const Graph& g) {
  std::pair<int, int> n{0, 0};
  for (const NodeInfo& node : g.nodes()) {
    n.first += node.kind == NodeKind::fork;
    n.second += !node.waits.empty();
  }
  return n;
}

// Branch 0: a = x^2; branch 1: b = 3w, waits for a, c = a b. loss = sum(c) + sum(a w).
TEST(DiffControl, AForkWithAWait) {
  const std::vector<Param> params = random_xw(5);
  Both b = make_both_xw(params, [&](Recorder& r, const Value& x, const Value& w) {
    Value a = r.empty({5}, DType::f64, "a"), bb = r.empty({5}, DType::f64, "b");
    Value c = r.empty({5}, DType::f64, "c");
    r.parallel({[&](Branch&) {
                  r.call(kernels::mul(), {x, x}, buffer(a));
                },
                [&](Branch& branch) {
                  r.call(kernels::scale(), {w, 3.0}, buffer(bb));
                  branch.wait(a);
                  r.call(kernels::mul(), {a, bb}, buffer(c));
                }});
    return r.call(kernels::axpy(), {r.call(kernels::sum(), {c}),
                                    r.call(kernels::sum(), {r.call(kernels::mul(), {a, w})}), 1.0});
  });
  // Reversed as a fork: forward branch 1 first, and the reverse of branch 0 waits for it (it
  // reads the cotangent of a that c = a b added to).
  EXPECT_EQ(forks_and_waits(b.back), (std::pair<int, int>{1, 1}));
  EXPECT_EQ(forks_and_waits(b.one), (std::pair<int, int>{2, 2}));  // the forward's and reverse's
  check(b, params, "fork");
}

// Branch 1 overwrites, after its wait, the array branch 0's derivative read: the copy is made
// in branch 1, after the wait. loss = sum(z) + sum(a).
TEST(DiffControl, AForkBranchOverwritingWhatAnotherBranchReadSavesItAfterItsWait) {
  const std::vector<Param> params = random_xw(4);
  Both b = make_both_xw(params, [&](Recorder& r, const Value& x, const Value& w) {
    Value a = r.empty({4}, DType::f64, "a"), z = r.empty({4}, DType::f64, "z");
    r.call(kernels::copy(), {x}, buffer(a));
    r.parallel({[&](Branch&) {
                  r.call(kernels::mul(), {a, w}, buffer(z));
                },
                [&](Branch& branch) {
                  branch.wait(z);
                  r.call(kernels::mul(), {a, a}, buffer(a));
                }});
    return r.call(kernels::axpy(), {r.call(kernels::sum(), {z}), r.call(kernels::sum(), {a}), 1.0});
  });
  EXPECT_EQ(b.f.saved_bytes(), 4u * 8);  // one copy of a, for z = a w and for a = a a
  EXPECT_EQ(forks_and_waits(b.back).first, 1);
  check(b, params, "fork overwrite");
}

// A cell that is 1 when the f64 counter t lies in (lo, hi).
Value between(Recorder& r, const Value& t, double lo, double hi) {
  const Value above_lo = r.call(test::greater_kernel(), {t, lo});
  const Value above_hi = r.call(test::greater_kernel(), {t, hi});
  return r.call(kernels::cell_none(),
                {r.call(kernels::cell_none(), {above_lo, above_lo}), above_hi});
}

// for_(6): t = turn + 1; y = y w every turn; the second turn skips the rest (continue); acc +=
// y otherwise, and acc = acc w after the break guard; the fourth turn breaks there. So 4 turns
// run, and acc = acc w runs in turns 1 and 3 only. loss = sum(acc^2) + sum(y).
Value capped_loop(Recorder& r, const Value& x, const Value& w) {
  Value y = r.empty({4}, DType::f64, "y"), acc = r.empty({4}, DType::f64, "acc");
  Value t = r.empty({1}, DType::f64, "t"), one = r.empty({1}, DType::f64, "one");
  r.call(kernels::copy(), {x}, buffer(y));
  r.call(kernels::fill(), {0.0}, buffer(acc));
  r.call(kernels::fill(), {0.0}, buffer(t));
  r.call(kernels::fill(), {1.0}, buffer(one));
  r.for_(6, [&] {
    r.call(kernels::axpy(), {one, t, 1.0}, buffer(t));
    r.call(kernels::mul(), {y, w}, buffer(y));
    r.continue_if(between(r, t, 1.5, 2.5));
    r.call(kernels::add(), {acc, y}, buffer(acc));
    r.break_if(between(r, t, 3.5, 4.5));
    r.call(kernels::mul(), {acc, w}, buffer(acc));
  });
  return r.call(kernels::axpy(), {r.call(kernels::sum(), {r.call(kernels::mul(), {acc, acc})}),
                                  r.call(kernels::sum(), {y}), 1.0});
}

TEST(DiffControl, ACappedLoopWithBreakAndContinue) {
  const std::vector<Param> params = random_xw(4);
  Both b = make_both_xw(
      params, [&](Recorder& r, const Value& x, const Value& w) { return capped_loop(r, x, w); });
  // The forward by hand: 4 turns.
  const std::vector<double> x = params[0].value.to_vector<double>();
  const std::vector<double> w = params[1].value.to_vector<double>();
  double loss = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    double y = x[i], acc = 0;
    for (int turn = 1; turn <= 4; ++turn) {
      y *= w[i];
      if (turn == 2) continue;
      acc += y;
      if (turn == 4) break;
      acc *= w[i];
    }
    loss += acc * acc + y;
  }
  EXPECT_NEAR(b.f()[0].to_vector<double>()[0], loss, 1e-12);
  // The tape: per turn (6 rows), y for y = y w and acc for acc = acc w (f64[4]), and the two
  // guards' condition cells (u32[1]); w, which the loop never writes, is read in place.
  EXPECT_EQ(b.f.saved_bytes(), 2u * 6 * 4 * 8 + 2 * 6 * 4);
  check(b, params, "for_ with break and continue");
}

// Forward, reverse through the loop and an SGD update of an external weight, one launch per
// step, replayed: each step matches a reverse graph made for that step's weight.
TEST(DiffControl, AOneGraphTrainingStepThroughACappedLoop) {
  const Array x0 = test::random_array({4}, DType::f64, cpu);
  const std::vector<double> w_init = test::random_values(4, 0.5, 1.0);
  Array w_state = Array::from(w_init, {4}, cpu);
  const double lr = 0.01;
  Graph step = Graph::record(
      [&](Recorder& r) {
        Value w = r.external(w_state, "w");
        const Value loss = capped_loop(r, r.param("x", x0), w);
        const Value dw = diff::gradients(r, {loss}, {w})[0];
        r.call(kernels::axpy(), {dw, w, -lr}, buffer(w));
        r.result(loss);
      },
      RecordOptions{.record = true});
  step.build(cpu);
  Graph f = Graph::record(
      [&](Recorder& r) { r.result(capped_loop(r, r.param("x", x0), r.param("w", w_state))); },
      RecordOptions{.record = true});
  f.build(cpu);
  std::vector<double> w = w_init;
  for (int k = 0; k < 4; ++k) {
    f.bind("w", Array::from(w, {4}, cpu));
    const double loss = f()[0].to_vector<double>()[0];
    Graph back = diff::reverse(f, {"result"}, {"w"});
    const std::vector<double> dw = back()[0].to_vector<double>();
    EXPECT_NEAR(step()[0].to_vector<double>()[0], loss, 1e-12 * (1 + std::abs(loss)))
        << "step " << k;
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= lr * dw[i];
    expect_close(w_state.to_vector<double>(), w, "w after step " + std::to_string(k));
  }
}

// A loop inside a loop: outer turn t (1..3) runs the inner loop (cap 4) for t turns (a break
// on the inner counter), so y = x w^6 and acc = x w + x w^3 + x w^6. loss = sum(acc^2) + sum(y).
Value nested_loops(Recorder& r, const Value& x, const Value& w) {
  Value y = r.empty({4}, DType::f64, "y"), acc = r.empty({4}, DType::f64, "acc");
  Value t = r.empty({1}, DType::f64, "t"), u = r.empty({1}, DType::f64, "u");
  Value one = r.empty({1}, DType::f64, "one");
  r.call(kernels::copy(), {x}, buffer(y));
  r.call(kernels::fill(), {0.0}, buffer(acc));
  r.call(kernels::fill(), {0.0}, buffer(t));
  r.call(kernels::fill(), {1.0}, buffer(one));
  r.for_(3, [&] {
    r.call(kernels::axpy(), {one, t, 1.0}, buffer(t));
    r.call(kernels::fill(), {0.0}, buffer(u));
    r.for_(4, [&] {
      r.call(kernels::axpy(), {one, u, 1.0}, buffer(u));
      r.call(kernels::mul(), {y, w}, buffer(y));
      const Value u_minus_t = r.call(kernels::axpy(), {t, u, -1.0});
      r.break_if(r.call(test::greater_kernel(), {u_minus_t, -0.5}));  // u >= t
    });
    r.call(kernels::add(), {acc, y}, buffer(acc));
  });
  return r.call(kernels::axpy(), {r.call(kernels::sum(), {r.call(kernels::mul(), {acc, acc})}),
                                  r.call(kernels::sum(), {y}), 1.0});
}

TEST(DiffControl, ALoopInsideALoopReversesEveryTurnOfBoth) {
  const std::vector<Param> params = random_xw(4);
  Both b = make_both_xw(
      params, [&](Recorder& r, const Value& x, const Value& w) { return nested_loops(r, x, w); });
  const std::vector<double> x = params[0].value.to_vector<double>();
  const std::vector<double> w = params[1].value.to_vector<double>();
  double loss = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    const double acc = x[i] * (w[i] + std::pow(w[i], 3) + std::pow(w[i], 6));
    loss += acc * acc + x[i] * std::pow(w[i], 6);
  }
  EXPECT_NEAR(b.f()[0].to_vector<double>()[0], loss, 1e-12 * (1 + std::abs(loss)));
  // Rows of the inner loop's tapes: 3 outer turns x 4 inner ones. y for y = y w (f64[4]) and
  // the break guard's cell per row, and the inner loop's turn count per outer turn.
  EXPECT_EQ(b.f.saved_bytes(), 12u * 4 * 8 + 12 * 4 + 3 * 4);
  check(b, params, "nested loops");
}

// while max(y) <= 4: y = y w, at most `cap` turns. loss = sum(y^2).
Value capped_while(Recorder& r, const Value& x, const Value& w, int64_t cap) {
  Value y = r.empty({3}, DType::f64, "y");
  r.call(kernels::copy(), {x}, buffer(y));
  Value going = r.empty({1}, DType::u32, "going");
  r.call(kernels::fill(), {1.0}, buffer(going));
  r.while_(
      going,
      [&] {
        r.call(kernels::mul(), {y, w}, buffer(y));
        const Value big = r.call(test::greater_kernel(), {r.call(kernels::max(), {y}), 4.0});
        r.call(kernels::cell_none(), {big, big}, buffer(going));
      },
      cap);
  return r.call(kernels::sum(), {r.call(kernels::mul(), {y, y})});
}

TEST(DiffControl, AWhileWithATurnCap) {
  const std::vector<Param> params{{"x", test::random_array({3}, DType::f64, cpu, 0.5, 1.0)},
                                  {"w", test::random_array({3}, DType::f64, cpu, 1.2, 1.6)}};
  const std::vector<double> x = params[0].value.to_vector<double>();
  const std::vector<double> w = params[1].value.to_vector<double>();
  for (int64_t cap : {int64_t{3}, int64_t{40}}) {
    Both b = make_both(
        [&](Recorder& r, std::vector<Value>& wrt) {
          Value xv = r.param("x", params[0].value), wv = r.param("w", params[1].value);
          wrt = {xv, wv};
          return capped_while(r, xv, wv, cap);
        },
        {"x", "w"});
    // The forward by hand: turns until max(y) > 4, at most cap.
    std::vector<double> y = x;
    for (int64_t turn = 0; turn < cap; ++turn) {
      double top = -1e300;
      for (std::size_t i = 0; i < 3; ++i) top = std::max(top, y[i] *= w[i]);
      if (top > 4) break;
    }
    double loss = 0;
    for (double v : y) loss += v * v;
    EXPECT_NEAR(b.f()[0].to_vector<double>()[0], loss, 1e-9 * loss) << "cap " << cap;
    check(b, params, "while_ with max_turns " + std::to_string(cap));
  }
}

// An if inside a capped loop (its condition taped per turn) and a param rebound inside the loop
// and the arm (merged in place into the param's private copy): y = y w each turn, halved in the
// turns where max(y) > 1. loss = sum(y^2).
TEST(DiffControl, AnIfInsideALoopReversesTheArmThatRanInEachTurn) {
  const std::vector<Param> params{{"x", test::random_array({3}, DType::f64, cpu, 0.5, 1.0)},
                                  {"w", test::random_array({3}, DType::f64, cpu, 1.1, 1.5)}};
  Both b = make_both(
      [&](Recorder& r, std::vector<Value>& wrt) {
        Value y = r.param("x", params[0].value), w = r.param("w", params[1].value);
        wrt = {y, w};
        r.for_(5, [&] {
          y = r.call(kernels::mul(), {y, w});
          const Value big = r.call(test::greater_kernel(), {r.call(kernels::max(), {y}), 1.0});
          r.if_(big, [&] { y = r.call(kernels::scale(), {y, 0.5}); });
        });
        return r.call(kernels::sum(), {r.call(kernels::mul(), {y, y})});
      },
      {"x", "w"});
  check(b, params, "if inside for_");
}

// h is read by a derivative (z = h w) before a loop rebinds it in place: the old h is saved
// before the loop, not in it. loss = sum(z) + sum(h).
TEST(DiffControl, AValueALoopOverwritesIsSavedBeforeTheLoop) {
  const std::vector<Param> params = random_xw(3);
  Both b = make_both_xw(params, [&](Recorder& r, const Value& x, const Value& w) {
    Value h = r.empty({3}, DType::f64, "h");
    r.call(kernels::copy(), {x}, buffer(h));
    const Value z = r.call(kernels::mul(), {h, w});
    Value hv = h;
    r.for_(3, [&] {
      hv = r.call(kernels::scale(), {hv, 0.5});
      hv = r.call(kernels::mul(), {hv, hv});
    });
    return r.call(kernels::axpy(),
                  {r.call(kernels::sum(), {z}), r.call(kernels::sum(), {hv}), 1.0});
  });
  // h before the loop (f64[3]), and per turn (3 rows) both arguments of hv * hv.
  EXPECT_EQ(b.f.saved_bytes(), 3u * 8 + 2 * 3 * 3 * 8);
  check(b, params, "saved before the loop");
}

// v is read by derivatives in a loop that never writes it: not taped; overwritten after the
// loop, it is saved there. loss = sum(y) + sum(v x) with y = x v^3.
TEST(DiffControl, AnArrayTheLoopNeverWritesIsNotTapedButSavedWhenOverwrittenLater) {
  const std::vector<Param> params = random_xw(3);
  Both b = make_both_xw(params, [&](Recorder& r, const Value& x, const Value& w) {
    Value v = r.empty({3}, DType::f64, "v"), y = r.empty({3}, DType::f64, "y");
    r.call(kernels::copy(), {w}, buffer(v));
    r.call(kernels::copy(), {x}, buffer(y));
    r.for_(3, [&] { r.call(kernels::mul(), {y, v}, buffer(y)); });
    const Value ys = r.call(kernels::sum(), {y});
    r.call(kernels::mul(), {v, x}, buffer(v));  // overwrites v after the loop
    return r.call(kernels::axpy(), {ys, r.call(kernels::sum(), {v}), 1.0});
  });
  // y per turn (3 rows of f64[3]), and v once, before v = v x.
  EXPECT_EQ(b.f.saved_bytes(), 3u * 3 * 8 + 3 * 8);
  check(b, params, "loop-invariant array");
}

// out = x * w elementwise, x a 2-D strided view (f64, CPU): a kernel of one's own that reads
// strided views, with its derivative (dx = g w, dw = x g: the kernel itself, reading the view).
void strided_mul_cpu(const KernelArgs& a, const ThreadTeam&) {
  const ArrayArg &x = a.arrays[0], &w = a.arrays[1], &out = a.arrays[2];
  const auto* xs = static_cast<const double*>(x.data);
  const auto* ws = static_cast<const double*>(w.data);
  auto* o = static_cast<double*>(out.data);
  for (int64_t i = 0; i < out.numel; ++i)
    o[i] = xs[(i / x.dims[1]) * x.strides[0] + (i % x.dims[1]) * x.strides[1]] * ws[i];
}

const Kernel& strided_mul() {
  static const Kernel k([] {
    KernelDef d;
    d.name = "strided_mul";
    d.arrays = {{"x", Access::read, true}, {"w", Access::read}, {"out", Access::write}};
    d.per_sample = false;
    d.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>&) {
      return std::vector<ArrayMeta>{in[1]};
    };
    d.select = [](const std::vector<DType>&) {
      KernelImpl impl;
      impl.cpu = &strided_mul_cpu;
      return impl;
    };
    d.derivative = vjp_rule(
        [](Recorder& r, const VjpArgs& a) -> std::vector<std::optional<Value>> {
          const Value& g = *a.cotangents[2];
          return {r.call(kernels::mul(), {g, a.arrays[1]}), r.call(strided_mul(), {a.arrays[0], g}),
                  std::nullopt};
        },
        {0, 1});
    return d;
  }());
  return k;
}

// The loop reads h through a transposed (strided) view and then overwrites h: each turn's view
// is taped as it lies (a contiguous row per turn) for the derivative of w, which reads it.
// loss = sum over 3 turns of sum(h_t^T * w), h_t = 1.5^t h_0, so dL/dw = 4.75 h_0^T.
TEST(DiffControl, AStridedViewADerivativeReadsInALoopIsTaped) {
  const Array h0 = test::random_array({2, 3}, DType::f64, cpu);
  const std::vector<Param> params = {{"w", test::random_array({3, 2}, DType::f64, cpu)}};
  Both b = make_both(
      [&](Recorder& r, std::vector<Value>& wrt) {
        const Value w = r.param("w", params[0].value);
        wrt = {w};
        Value h = r.empty({2, 3}, DType::f64, "h"), acc = r.empty({3, 2}, DType::f64, "acc");
        r.call(kernels::copy(), {r.param("h0", h0)}, buffer(h));
        r.call(kernels::fill(), {0.0}, buffer(acc));
        r.for_(3, [&] {
          const Value y = r.call(strided_mul(), {h.transpose(0, 1), w});
          r.call(kernels::axpy(), {y, acc, 1.0}, buffer(acc));
          r.call(kernels::scale(), {h, 1.5}, buffer(h));
        });
        return r.call(kernels::sum(), {acc});
      },
      {"w"});
  EXPECT_EQ(b.f.saved_bytes(), 3u * 6 * 8);  // the view, one f64[3, 2] row per turn
  check(b, params, "strided view in a loop");
  const std::vector<double> h = h0.to_vector<double>(), dw = b.back()[0].to_vector<double>();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j)
      EXPECT_NEAR(dw[static_cast<std::size_t>(i * 2 + j)],
                  4.75 * h[static_cast<std::size_t>(j * 3 + i)], 1e-12);
}

// x *= alpha in place through a 2-D strided view (f64, CPU), with its derivative: what x held
// before gets alpha times the cotangent of what it holds after (a strided cotangent, read and
// written where the view lies).
void strided_scale_cpu(const KernelArgs& a, const ThreadTeam&) {
  const ArrayArg& x = a.arrays[0];
  auto* xs = static_cast<double*>(x.data);
  for (int64_t i = 0; i < x.numel; ++i)
    xs[(i / x.dims[1]) * x.strides[0] + (i % x.dims[1]) * x.strides[1]] *= a.scalars[0].f;
}

const Kernel& strided_scale() {
  static const Kernel k([] {
    KernelDef d;
    d.name = "strided_scale";
    d.arrays = {{"x", Access::read_write, true}};
    d.scalars = {{"alpha"}};
    d.per_sample = false;
    d.infer = [](const std::vector<ArrayMeta>&, const std::vector<ScalarArg>&) {
      return std::vector<ArrayMeta>{};
    };
    d.select = [](const std::vector<DType>&) {
      KernelImpl impl;
      impl.cpu = &strided_scale_cpu;
      return impl;
    };
    d.derivative = vjp_rule(
        [](Recorder& r, const VjpArgs& a) -> std::vector<std::optional<Value>> {
          return {r.call(kernels::scale(), {*a.cotangents[0], a.scalars[0].f})};
        },
        {});
    return d;
  }());
  return k;
}

// Cotangents of strided views: x read through its transpose (dx lands where the view lies), and
// h scaled in place through a column slice and through its transpose (the cotangent of what the
// view holds after the call is gathered, zeroed and replaced where the view lies).
// loss = sum(x^T * w2) + sum(h * w), h = x with columns 0, 1 scaled by 3, then all by 0.5.
TEST(DiffControl, CotangentsOfStridedViewsLandWhereTheViewsLie) {
  const std::vector<Param> params = {{"x", test::random_array({2, 3}, DType::f64, cpu)},
                                     {"w", test::random_array({2, 3}, DType::f64, cpu)}};
  const Array w2 = test::random_array({3, 2}, DType::f64, cpu);
  Both b = make_both_xw(params, [&](Recorder& r, const Value& x, const Value& w) {
    const Value read = r.call(strided_mul(), {x.transpose(0, 1), r.param("w2", w2)});
    Value h = r.empty({2, 3}, DType::f64, "h");
    r.call(kernels::copy(), {x}, buffer(h));
    r.call_all(strided_scale(), {h.slice(1, 0, 2), 3.0});
    r.call_all(strided_scale(), {h.transpose(0, 1), 0.5});
    return r.call(kernels::axpy(), {r.call(kernels::sum(), {read}),
                                    r.call(kernels::sum(), {r.call(kernels::mul(), {h, w})}), 1.0});
  });
  check(b, params, "strided cotangents");
  // dL/dx[i][j] = w2[j][i] + w[i][j] (3 if j < 2) 0.5.
  const std::vector<double> x_grad = b.back()[0].to_vector<double>();
  const std::vector<double> w = params[1].value.to_vector<double>(), v2 = w2.to_vector<double>();
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      EXPECT_NEAR(x_grad[i * 3 + j], v2[j * 2 + i] + w[i * 3 + j] * (j < 2 ? 3.0 : 1.0) * 0.5,
                  1e-12);
}

// A bf16 [T, 3 D] array read as three column slices (q, k, v: an attention block's one qkv
// projection) gathered into contiguous arrays: their cotangents land where the slices lie. The
// slices are apart, so each is stored into the zero-filled cotangent (one scatter) rather than
// summed (a gather, an add and a scatter). loss = q * k + v * w (cotangent ones): dqkv =
// [k, q, w], the same in bf16 as in the f32 graph, the columns apart.
TEST(DiffControl, SixteenBitCotangentsOfColumnSlicesLandWhereTheSlicesLie) {
  // Values bf16 holds exactly, so both graphs read the same inputs.
  const std::vector<double> hq =
      test::from_doubles(test::random_array({5, 12}, DType::f64, cpu).to_vector<double>(), {5, 12},
                         DType::bf16, cpu)
          .to_vector<double>();
  const std::vector<double> hw =
      test::from_doubles(test::random_array({5, 4}, DType::f64, cpu).to_vector<double>(), {5, 4},
                         DType::bf16, cpu)
          .to_vector<double>();
  auto gradient = [&](DType dtype) {
    const Array qkv0 = test::from_doubles(hq, {5, 12}, dtype, cpu);
    const Array w0 = test::from_doubles(hw, {5, 4}, dtype, cpu);
    Graph g = Graph::record(
        [&](Recorder& r) {
          const Value qkv = r.param("qkv", qkv0), w = r.param("w", w0);
          const Value q = r.call(kernels::gather_view(), {qkv.slice(1, 0, 4)});
          const Value k = r.call(kernels::gather_view(), {qkv.slice(1, 4, 8)});
          const Value v = r.call(kernels::gather_view(), {qkv.slice(1, 8, 12)});
          // Elementwise (sum has no bf16 kernel); the seed's cotangent is ones.
          const Value loss = r.call(
              kernels::add(), {r.call(kernels::mul(), {q, k}), r.call(kernels::mul(), {v, w})});
          const std::size_t forward = r.recording().nodes().size();
          r.result(diff::gradients(r, {loss}, {qkv}));
          std::map<std::string, int> reverse;
          const auto nodes = r.recording().nodes();
          for (std::size_t i = forward; i < nodes.size(); ++i) ++reverse[nodes[i].kernel];
          EXPECT_EQ(reverse["scatter_view"], 3);
          EXPECT_EQ(reverse["gather_view"], 0);  // nothing read back to be summed
          EXPECT_EQ(reverse["fill"], 2);  // the seed's ones, the zero-filled cotangent of qkv
        },
        RecordOptions{.record = true});
    g.build(cpu);
    return g()[0].to_vector<double>();
  };
  const std::vector<double> want = gradient(DType::f32), got = gradient(DType::bf16);
  ASSERT_EQ(got.size(), 60u);
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      // dq = k, dk = q, dv = w: each exactly a bf16 value here (no sum: one cotangent each).
      EXPECT_EQ(got[i * 12 + j], hq[i * 12 + 4 + j]);
      EXPECT_EQ(got[i * 12 + 4 + j], hq[i * 12 + j]);
      EXPECT_EQ(got[i * 12 + 8 + j], hw[i * 4 + j]);
    }
  EXPECT_CLOSE(got, want, 1e-2);
}

// Column slices that overlap (columns 0-7 and 4-11 of [5, 12]) and a transposed view of the
// same array: where contributions meet they are summed, not stored over one another.
TEST(DiffControl, OverlappingViewsOfOneArraySumTheirCotangents) {
  const Array x0 = test::random_array({5, 12}, DType::f32, cpu);
  const Array w0 = test::random_array({5, 8}, DType::f32, cpu);
  const Array t0 = test::random_array({12, 5}, DType::f32, cpu);
  Graph g = Graph::record(
      [&](Recorder& r) {
        const Value x = r.param("x", x0), w = r.param("w", w0), t = r.param("t", t0);
        const Value a = r.call(kernels::gather_view(), {x.slice(1, 0, 8)});
        const Value b = r.call(kernels::gather_view(), {x.slice(1, 4, 12)});
        const Value c = r.call(kernels::gather_view(), {x.transpose(0, 1)});
        // loss = a * w + b * w (elementwise, [5, 8]) and c * t ([12, 5]), cotangents ones.
        r.result(diff::gradients(r,
                                 {r.call(kernels::add(), {r.call(kernels::mul(), {a, w}),
                                                          r.call(kernels::mul(), {b, w})}),
                                  r.call(kernels::mul(), {c, t})},
                                 {x}));
      },
      RecordOptions{.record = true});
  g.build(cpu);
  const std::vector<double> got = g()[0].to_vector<double>();
  const std::vector<double> w = w0.to_vector<double>(), t = t0.to_vector<double>();
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 12; ++j) {
      double want = t[j * 5 + i];              // through the transpose
      if (j < 8) want += w[i * 8 + j];         // through a
      if (j >= 4) want += w[i * 8 + (j - 4)];  // through b
      EXPECT_NEAR(got[i * 12 + j], want, 1e-6) << i << ", " << j;
    }
}

// ---- refusals, each leaving the forward graph usable

TEST(DiffControl, AWhileWithoutACapIsRefusedWithTheFix) {
  const Array x0 = test::random_array({3}, DType::f64, cpu, 0.5, 1.0);
  const Array w0 = test::random_array({3}, DType::f64, cpu, 1.2, 1.6);
  Graph g = Graph::record(
      [&](Recorder& r) { r.result(capped_while(r, r.param("x", x0), r.param("w", w0), -1)); },
      RecordOptions{.record = true});
  g.build(cpu);
  const double before = g()[0].to_vector<double>()[0];
  expect_throw_with<NotSupported>([&] { diff::reverse(g, {"result"}, {"x"}); },
                                  {"(while)", "no turn cap", "max_turns"});
  EXPECT_EQ(g()[0].to_vector<double>()[0], before);
  // The one-graph form: refused, nothing recorded, and the recording goes on.
  Graph one = Graph::record(
      [&](Recorder& r) {
        Value x = r.param("x", x0);
        const Value loss = capped_while(r, x, r.param("w", w0), -1);
        const std::size_t nodes = r.recording().nodes().size();
        expect_throw_with<NotSupported>([&] { diff::gradients(r, {loss}, {x}); },
                                        {"no turn cap", "max_turns"});
        EXPECT_EQ(r.recording().nodes().size(), nodes);
        r.result(loss);
      },
      RecordOptions{.record = true});
  one.build(cpu);
  EXPECT_EQ(one()[0].to_vector<double>()[0], before);
}

TEST(DiffControl, AnUncappedWhileInsideALoopIsRefused) {
  const Array x0 = test::random_array({3}, DType::f64, cpu, 0.5, 1.0);
  const Array w0 = test::random_array({3}, DType::f64, cpu, 1.2, 1.6);
  Graph g = Graph::record(
      [&](Recorder& r) {
        Value x = r.param("x", x0), w = r.param("w", w0);
        Value acc = r.empty({1}, DType::f64, "acc");
        r.call(kernels::fill(), {0.0}, buffer(acc));
        r.for_(2, [&] { r.call(kernels::add(), {acc, capped_while(r, x, w, -1)}, buffer(acc)); });
        r.result(acc);
      },
      RecordOptions{.record = true});
  g.build(cpu);
  const double before = g()[0].to_vector<double>()[0];
  expect_throw_with<NotSupported>([&] { diff::reverse(g, {"result"}, {"x"}); },
                                  {"(while)", "no turn cap", "max_turns"});
  EXPECT_EQ(g()[0].to_vector<double>()[0], before);
}

TEST(DiffControl, MaxTurnsIsChecked) {
  Graph::record([&](Recorder& r) {
    Value going = r.empty({1}, DType::u32, "going");
    r.call(kernels::fill(), {1.0}, buffer(going));
    auto body = [&] { r.call(kernels::fill(), {0.0}, buffer(going)); };
    expect_throw_with<InvalidArgument>([&] { r.while_(going, body, 0); }, {"max_turns"});
    r.while_(going, body, 2);
  });
}

}  // namespace
}  // namespace eagle
