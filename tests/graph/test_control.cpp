// Device conditions: every arm recorded, the choice made at every launch, on CPU and GPU.
#include <gtest/gtest.h>

#include <cmath>

#include "eagle/eagle.hpp"
#include "test_util.hpp"
#include "testing_kernels.hpp"

namespace eagle {
namespace {

using test::expect_throw_with;
using test::random_array;

// Each test runs on the CPU, on the GPU with native conditional nodes, and on the GPU with the
// plain-IF construction that drivers without IF/ELSE and SWITCH nodes get.
struct Target {
  Device device;
  bool plain_if_only;
};

class Control : public ::testing::TestWithParam<Target> {
 protected:
  void SetUp() override {
    if (device().is_cuda() && !cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
  Device device() const { return GetParam().device; }
  BuildOptions options() const {
    BuildOptions o;
    o.plain_if_only = GetParam().plain_if_only;
    return o;
  }
  Array cell(uint32_t v) const { return Array::from(std::vector<uint32_t>{v}, {1}, device()); }
};

INSTANTIATE_TEST_SUITE_P(Targets, Control,
                         ::testing::Values(Target{Device::cpu(), false},
                                           Target{Device::cuda(0), false},
                                           Target{Device::cuda(0), true}),
                         [](const ::testing::TestParamInfo<Target>& info) {
                           return std::string(info.param.device.is_cpu() ? "cpu" : "cuda") +
                                  (info.param.plain_if_only ? "_plain_if" : "");
                         });

std::vector<double> host(const Array& a) {
  return a.to_vector<double>();
}
std::vector<double> scaled(const std::vector<double>& v, double k) {
  std::vector<double> out;
  for (double x : v) out.push_back(k * x);
  return out;
}

TEST_P(Control, IfElseChoosesAnArmAtEveryLaunch) {
  Array x0 = random_array({1000}, DType::f32, device());
  Array flag = cell(1);
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    Value out = r.empty({1000}, DType::f32, "out");
    r.if_(
        r.param("flag", flag),
        [&] {
          r.call(kernels::scale(), {x, 2.0}, buffer(out));
        },
        [&] {
          r.call(kernels::scale(), {x, 3.0}, buffer(out));
        });
    r.result(out);
  });
  ASSERT_EQ(g.nodes().size(), 3u);
  EXPECT_EQ(g.nodes()[0].kind, NodeKind::if_);
  EXPECT_EQ(g.nodes()[0].bodies, (std::vector<std::vector<int>>{{1}, {2}}));
  g.build(device(), options());
  EXPECT_CLOSE(host(g()[0]), scaled(host(x0), 2), 1e-6);
  g.bind("flag", cell(0));  // the setter kernel's cell pointer is patched too
  EXPECT_CLOSE(host(g()[0]), scaled(host(x0), 3), 1e-6);
  g.bind("flag", cell(5));
  EXPECT_CLOSE(host(g()[0]), scaled(host(x0), 2), 1e-6);
  EXPECT_EQ(g.rebuild_count(), 0);
}

TEST_P(Control, IfWithoutElseSkipsWhenTheCellIsZero) {
  Array x0 = random_array({64}, DType::f64, device());
  Array flag = cell(0);
  Graph g = Graph::record([&](Recorder& r) {
    Value out = r.empty({64}, DType::f64, "out");
    r.call(kernels::fill(), {-1.0}, buffer(out));
    r.if_(r.param("flag", flag), [&] { r.call(kernels::copy(), {r.param("x", x0)}, buffer(out)); });
    r.result(out);
  });
  g.build(device(), options());
  EXPECT_EQ(host(g()[0]), std::vector<double>(64, -1.0));
  g.bind("flag", cell(1));
  EXPECT_EQ(host(g()[0]), host(x0));
}

TEST_P(Control, SwitchOverFourArmsDrivenByData) {
  Array x0 = random_array({333}, DType::f32, device());
  Array sel = cell(0);
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    Value out = r.empty({333}, DType::f32, "out");
    r.call(kernels::fill(), {-7.0}, buffer(out));
    std::vector<std::function<void()>> arms;
    for (int k = 0; k < 4; ++k)
      arms.push_back([&, k] { r.call(kernels::scale(), {x, double(k + 1)}, buffer(out)); });
    r.switch_(r.param("sel", sel), arms);
    r.result(out);
  });
  g.build(device(), options());
  for (uint32_t k : {2u, 0u, 3u, 1u}) {
    g.bind("sel", cell(k));
    SCOPED_TRACE("arm " + std::to_string(k));
    EXPECT_CLOSE(host(g()[0]), scaled(host(x0), k + 1.0), 1e-6);
  }
  g.bind("sel", cell(9));  // past the last arm: none runs
  EXPECT_EQ(host(g()[0]), std::vector<double>(333, -7.0));
}

// An iterative solver that loops on the device until a residual cell says stop:
// x <- 0.5 x + b converges to 2b; the loop runs while sum((x_new - x)^2) > tol.
TEST_P(Control, WhileLoopRunsASolverUntilTheResidualCellSaysStop) {
  const int64_t n = 4096;
  Array b0 = random_array({n}, DType::f64, device(), 0.5, 1.0);
  Array turns = Array::from(std::vector<uint32_t>{0}, {1}, device());
  const double tol = 1e-20;
  Graph g = Graph::record([&](Recorder& r) {
    Value b = r.param("b", b0);
    Value x = r.empty({n}, DType::f64, "x");
    Value going = r.empty({1}, DType::u32, "going");
    Value counter = r.external(turns, "turns");
    r.call(kernels::fill(), {0.0}, buffer(x));
    r.call(kernels::fill(), {0.0}, buffer(counter));
    r.call(kernels::fill(), {1.0}, buffer(going));
    r.while_(going, [&] {
      Value next = r.call(kernels::axpy(), {x, b, 0.5});
      Value step = r.call(kernels::axpy(), {x, next, -1.0});
      r.call(kernels::copy(), {next}, buffer(x));  // loop-carried: written in place
      Value residual = r.call(kernels::sum(), {r.call(kernels::mul(), {step, step})});
      r.call(test::greater_kernel(), {residual, tol}, buffer(going));
      r.call(test::count_kernel(), {counter});
    });
    r.result(x);
  });
  g.build(device(), options());
  // The host computes the same iteration to know how many turns it takes.
  const auto bv = host(b0);
  std::vector<double> x(n, 0.0);
  uint32_t want_turns = 0;
  for (bool going = true; going; ++want_turns) {
    double residual = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double next = 0.5 * x[i] + bv[i];
      residual += (next - x[i]) * (next - x[i]);
      x[i] = next;
    }
    going = residual > tol;
  }
  for (int launch = 0; launch < 2; ++launch) {  // the loop starts again at every launch
    test::poison(g.results()[0]);
    const auto got = host(g()[0]);
    EXPECT_CLOSE(got, scaled(bv, 2.0), 1e-9);
    const uint32_t t = turns.to_vector<uint32_t>()[0];
    EXPECT_LE(t > want_turns ? t - want_turns : want_turns - t, 1u)
        << "device turns " << t << ", host turns " << want_turns;
    EXPECT_GT(t, 10u);
  }
}

TEST_P(Control, IfNestedInsideWhile) {
  Array flag = cell(1);
  Array a = Array::from(std::vector<uint32_t>{0}, {1}, device());
  Array b = Array::from(std::vector<uint32_t>{0}, {1}, device());
  Graph g = Graph::record([&](Recorder& r) {
    Value remaining = r.empty({1}, DType::u32, "remaining");
    Value going = r.empty({1}, DType::u32, "going");
    Value ca = r.external(a, "a"), cb = r.external(b, "b");
    Value f = r.param("flag", flag);
    r.call(kernels::fill(), {5.0}, buffer(remaining));
    r.call(kernels::fill(), {1.0}, buffer(going));
    r.while_(going, [&] {
      r.call_all(test::countdown_kernel(), {remaining}, buffer(going));
      r.if_(
          f, [&] { r.call(test::count_kernel(), {ca}); },
          [&] { r.call(test::count_kernel(), {cb}); });
    });
  });
  g.build(device(), options());
  g();
  EXPECT_EQ(a.to_vector<uint32_t>()[0], 5u);
  EXPECT_EQ(b.to_vector<uint32_t>()[0], 0u);
  g.bind("flag", cell(0));
  g(2);
  EXPECT_EQ(a.to_vector<uint32_t>()[0], 5u);
  EXPECT_EQ(b.to_vector<uint32_t>()[0], 10u);
}

TEST_P(Control, AParamWrittenInsideALoopIsCopiedBeforeTheLoop) {
  Array x0 = random_array({100}, DType::f64, device());
  const auto before = host(x0);
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    Value remaining = r.empty({1}, DType::u32, "remaining");
    Value going = r.empty({1}, DType::u32, "going");
    r.call(kernels::fill(), {3.0}, buffer(remaining));
    r.call(kernels::fill(), {1.0}, buffer(going));
    r.while_(going, [&] {
      r.call(kernels::scale(), {x, 2.0}, buffer(x));  // every turn doubles what the last wrote
      r.call_all(test::countdown_kernel(), {remaining}, buffer(going));
    });
    r.result(x);
  });
  const auto& top = g.recording().top();
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(g.nodes()[top[2]].kind, NodeKind::copy_in);
  EXPECT_EQ(g.nodes()[top[3]].kind, NodeKind::while_);
  g.build(device(), options());
  EXPECT_CLOSE(host(g(2)[0]), scaled(before, 8.0), 1e-12);
  EXPECT_EQ(host(x0), before);
}

TEST_P(Control, ForkBranchesComputeIndependentlyAndTheJoinOrdersWhatFollows) {
  Array x0 = random_array({2048}, DType::f32, device());
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    std::vector<Value> outs(4);
    std::vector<std::function<void(Branch&)>> branches;
    for (int k = 0; k < 4; ++k)
      branches.push_back([&, k](Branch&) {
        Value y = x;
        for (int s = 0; s < 3; ++s) y = r.call(kernels::scale(), {y, double(k + 1)});
        outs[k] = y;
      });
    r.parallel(branches);
    Value total = r.call(kernels::add(), {r.call(kernels::add(), {outs[0], outs[1]}),
                                          r.call(kernels::add(), {outs[2], outs[3]})});
    r.result(total);
  });
  const auto& top = g.recording().top();
  ASSERT_EQ(top.size(), 4u);  // x is read only, so no copy: the fork and three adds
  EXPECT_EQ(g.nodes()[top[0]].kind, NodeKind::fork);
  EXPECT_EQ(g.nodes()[top[0]].bodies.size(), 4u);
  g.build(device(), options());
  const double k = 1 + 8 + 27 + 64;  // sum of (k+1)^3
  EXPECT_CLOSE(host(g()[0]), scaled(host(x0), k), 1e-6);
}

TEST_P(Control, ForkWaitOrdersABranchAfterAnother) {
  Array x0 = random_array({512}, DType::f64, device());
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    Value shared = r.empty({512}, DType::f64, "shared");
    Value out;
    r.parallel({[&](Branch&) {
                  Value y = r.call(kernels::scale(), {x, 2.0});
                  r.call(kernels::scale(), {y, 3.0}, buffer(shared));  // writes shared
                },
                [&](Branch& b) {
                  Value z = r.call(kernels::scale(), {x, 5.0});  // runs alongside
                  b.wait(shared);
                  out = r.call(kernels::add(), {shared, z});  // reads shared after the write
                }});
    r.result(out);
  });
  g.build(device(), options());
  EXPECT_CLOSE(host(g()[0]), scaled(host(x0), 11.0), 1e-12);
}

TEST(ControlRecord, ForkRacesWithoutAWaitAreRefusedNamingBothNodesAndTheArray) {
  Array x0 = random_array({16}, DType::f32, Device::cpu());
  expect_throw_with<RecordError>(
      [&] {
        Graph::record([&](Recorder& r) {
          Value x = r.param("x", x0);
          Value shared = r.empty({16}, DType::f32, "shared");
          r.parallel({[&](Branch&) {
                        r.call(kernels::scale(), {x, 2.0}, buffer(shared, "writer"));
                      },
                      [&](Branch&) {
                        r.call(kernels::scale(), {shared, 3.0}, CallOptions{{}, "reader"});
                      }});
        });
      },
      {"race refused", "'writer' (branch 0)", "'reader' (branch 1)", "array 'shared'",
       "Branch::wait"});
  expect_throw_with<RecordError>(
      [&] {
        Graph::record([&](Recorder& r) {
          Value never = r.empty({16}, DType::f32, "never");
          r.parallel({[&](Branch& b) { b.wait(never); }});
        });
      },
      {"no earlier node writes array 'never'"});
}

TEST_P(Control, CappedLoopRunsNTurnsAndBreakIfEndsItEarly) {
  Array x0 = random_array({256}, DType::f64, device());
  Array flag = cell(0);
  Array turns = Array::from(std::vector<uint32_t>{0}, {1}, device());
  Array after = Array::from(std::vector<uint32_t>{0}, {1}, device());
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.empty({256}, DType::f64, "x");
    r.call(kernels::copy(), {r.param("x0", x0)}, buffer(x));
    Value t = r.external(turns, "turns"), a = r.external(after, "after");
    Value stop = r.param("stop", flag);
    r.for_(10, [&] {
      r.call(test::count_kernel(), {t});
      r.break_if(stop);
      r.call(test::count_kernel(), {a});              // guarded: not after a break
      r.call(kernels::scale(), {x, 2.0}, buffer(x));  // guarded too
    });
    r.result(x);
  });
  g.build(device(), options());
  EXPECT_CLOSE(host(g()[0]), scaled(host(x0), 1024.0), 1e-12);
  EXPECT_EQ(turns.to_vector<uint32_t>()[0], 10u);
  EXPECT_EQ(after.to_vector<uint32_t>()[0], 10u);
  g.bind("stop", cell(1));  // breaks in the first turn, after the first count
  EXPECT_CLOSE(host(g()[0]), host(x0), 0);
  EXPECT_EQ(turns.to_vector<uint32_t>()[0], 11u);
  EXPECT_EQ(after.to_vector<uint32_t>()[0], 10u);
}

TEST_P(Control, ContinueIfSkipsTheRestOfTheTurnOnly) {
  Array skip = cell(1);
  Array turns = Array::from(std::vector<uint32_t>{0}, {1}, device());
  Array after = Array::from(std::vector<uint32_t>{0}, {1}, device());
  Graph g = Graph::record([&](Recorder& r) {
    Value t = r.external(turns, "turns"), a = r.external(after, "after");
    Value s = r.param("skip", skip);
    r.for_(6, [&] {
      r.call(test::count_kernel(), {t});
      r.continue_if(s);
      r.call(test::count_kernel(), {a});
    });
  });
  g.build(device(), options());
  g();
  EXPECT_EQ(turns.to_vector<uint32_t>()[0], 6u);
  EXPECT_EQ(after.to_vector<uint32_t>()[0], 0u);
  g.bind("skip", cell(0));
  g();
  EXPECT_EQ(turns.to_vector<uint32_t>()[0], 12u);
  EXPECT_EQ(after.to_vector<uint32_t>()[0], 6u);
}

TEST_P(Control, IfChainTakesTheFirstTrueConditionOrElse) {
  Array a0 = cell(0), b0 = cell(0);
  Graph g = Graph::record([&](Recorder& r) {
    Value out = r.empty({1}, DType::u32, "out");
    auto put = [&](double v) { return [&, v] { r.call(kernels::fill(), {v}, buffer(out)); }; };
    r.if_chain({{r.param("a", a0), put(10)}, {r.param("b", b0), put(20)}}, put(30));
    r.result(out);
  });
  g.build(device(), options());
  const uint32_t cases[][3] = {{0, 0, 30}, {1, 0, 10}, {0, 7, 20}, {1, 1, 10}};
  for (const auto& c : cases) {
    g.bind("a", cell(c[0]));
    g.bind("b", cell(c[1]));
    EXPECT_EQ(g()[0].to_vector<uint32_t>()[0], c[2]) << "a=" << c[0] << " b=" << c[1];
  }
}

TEST_P(Control, ATemporaryMadeInALoopBodyIsOneArrayReusedEachTurn) {
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.empty({1000}, DType::f32, "x");
    r.call(kernels::fill(), {1.0}, buffer(x));
    r.for_(50, [&] {
      Value t = r.call(kernels::scale(), {x, 2.0});  // a temporary, 4000 bytes
      r.call(kernels::scale(), {t, 0.5}, buffer(x));
    });
    r.result(x);
  });
  g.build(device(), options());
  // x, the temporary, and the loop's four u32 cells: nothing per turn.
  EXPECT_EQ(g.allocated_bytes(), 4000u + 4000u + 4 * 4u);
  EXPECT_EQ(host(g()[0]), std::vector<double>(1000, 1.0));
}

TEST(ControlRecord, AValueMadeInAnArmIsNotReadableAfterIt) {
  Array flag = Array::from(std::vector<uint32_t>{1}, {1}, Device::cpu());
  Array x0 = random_array({8}, DType::f32, Device::cpu());
  expect_throw_with<RecordError>(
      [&] {
        Graph::record([&](Recorder& r) {
          Value x = r.param("x", x0);
          Value y;
          r.if_(r.param("flag", flag), [&] { y = r.call(kernels::scale(), {x, 2.0}); });
          r.result(y);
        });
      },
      {"reads array 'scale#", "made inside arm 0 of node 0 'if'", "buffer="});
  expect_throw_with<InvalidArgument>(
      [&] { Graph::record([&](Recorder& r) { r.break_if(r.param("f", flag)); }); },
      {"break_if", "only inside a for_ body"});
  expect_throw_with<InvalidArgument>(
      [&] {
        Graph::record([&](Recorder& r) {
          Value f = r.param("f", flag);
          r.for_(3, [&] { r.if_(f, [&] { r.continue_if(f); }); });
        });
      },
      {"continue_if", "directly in the for_ body"});
}

TEST_P(Control, ANameReboundInALoopIsMergedInPlaceAndCarriedFromTurnToTurn) {
  Array x0 = random_array({500}, DType::f32, device());
  Graph g = Graph::record([&](Recorder& r) {
    Value y = r.param("x", x0);
    r.for_(5, [&] { y = r.call(kernels::scale(), {y, 2.0}); });  // no buffer= needed
    r.result(y);
  });
  g.build(device(), options());
  EXPECT_CLOSE(host(g()[0]), scaled(host(x0), 32.0), 1e-6);
  // The scale's output was merged into x's private copy: no array per rebinding.
  EXPECT_EQ(g.allocated_bytes(), 2000u + 4 * 4u);
}

TEST_P(Control, ANameReboundInAnArmIsReadableAfterIt) {
  Array x0 = random_array({64}, DType::f64, device());
  Array flag = cell(1);
  Graph g = Graph::record([&](Recorder& r) {
    Value y = r.call(kernels::copy(), {r.param("x", x0)});
    r.if_(r.param("flag", flag), [&] { y = r.call(kernels::scale(), {y, 3.0}); });
    r.result(y);
  });
  g.build(device(), options());
  EXPECT_CLOSE(host(g()[0]), scaled(host(x0), 3.0), 1e-12);
  g.bind("flag", cell(0));
  EXPECT_CLOSE(host(g()[0]), host(x0), 0);
}

TEST(ControlRecord, RebindingToANonPerSampleOrReducingResultIsRefusedWithTheFix) {
  Array flag = Array::from(std::vector<uint32_t>{1}, {1}, Device::cpu());
  Array x0 = random_array({1}, DType::f64, Device::cpu());
  expect_throw_with<RecordError>(
      [&] {
        Graph::record([&](Recorder& r) {
          Value y = r.call(kernels::copy(), {r.param("x", x0)});
          r.if_(r.param("flag", flag), [&] { y = r.call(kernels::sum(), {y}); });
        });
      },
      {"rebinding", "kernel sum", "reduces across samples", "buffer="});
  Array v0 = random_array({16}, DType::f32, Device::cpu());
  expect_throw_with<RecordError>(
      [&] {
        Graph::record([&](Recorder& r) {
          Value y = r.call(kernels::copy(), {r.param("x", v0)});
          r.if_(r.param("flag", flag), [&] { y = r.call(test::reverse_kernel(), {y}); });
        });
      },
      {"rebinding", "kernel reverse", "is not per-sample", "buffer="});
}

TEST(ControlRecord, BodiesHaveTheirOwnEdgesAndTheConstructOrdersAgainstTheRest) {
  Array x0 = random_array({8}, DType::f32, Device::cpu());
  Array flag = Array::from(std::vector<uint32_t>{1}, {1}, Device::cpu());
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    Value t = r.empty({8}, DType::f32, "t");
    r.call(kernels::fill(), {1.0}, buffer(t));        // 0
    r.if_(r.param("flag", flag), [&] {                // 1
      Value u = r.call(kernels::add(), {t, x});       // 2: reads t from outside
      r.call(kernels::scale(), {u, 2.0}, buffer(t));  // 3: after 2 (reads u, writes t)
    });
    r.result(r.call(kernels::copy(), {t}));  // 4: after the if
  });
  ASSERT_EQ(g.nodes().size(), 5u);
  EXPECT_EQ(g.nodes()[1].deps, std::vector<int>{0});
  EXPECT_EQ(g.nodes()[2].deps, std::vector<int>{});
  EXPECT_EQ(g.nodes()[3].deps, std::vector<int>{2});
  EXPECT_EQ(g.nodes()[2].parent, 1);
  // The if may or may not write t, so the unconditional fill stays a dependency too.
  EXPECT_EQ(g.nodes()[4].deps, (std::vector<int>{0, 1}));
  EXPECT_EQ(g.recording().top(), (std::vector<int>{0, 1, 4}));
  EXPECT_NE(g.to_json().find("\"kind\": \"if\""), std::string::npos) << g.to_json();
}

TEST(ControlRecord, RefusalsNameTheRule) {
  Array f32_cell = Array::from(std::vector<float>{1}, {1}, Device::cpu());
  Array two_cells = Array::from(std::vector<uint32_t>{1, 1}, {2}, Device::cpu());
  expect_throw_with<InvalidArgument>(
      [&] { Graph::record([&](Recorder& r) { r.if_(r.param("c", f32_cell), [] {}); }); },
      {"if_", "one-cell u32", "f32[1]"});
  expect_throw_with<InvalidArgument>(
      [&] { Graph::record([&](Recorder& r) { r.while_(r.param("c", two_cells), [] {}); }); },
      {"while_", "one-cell u32", "u32[2]"});
  expect_throw_with<InvalidArgument>(
      [&] { Graph::record([&](Recorder& r) { r.switch_(r.empty({1}, DType::u32), {}); }); },
      {"switch_", "at least one arm"});
  expect_throw_with<RecordError>(
      [&] {
        Graph::record([&](Recorder& r) {
          Value going = r.empty({1}, DType::u32, "going");
          r.call(kernels::fill(), {1.0}, buffer(going));
          r.while_(going, [&] { r.call(kernels::scale(), {r.empty({4}, DType::f32), 2.0}); });
        });
      },
      {"never writes its cell 'going'", "could never stop"});
}

}  // namespace
}  // namespace eagle
