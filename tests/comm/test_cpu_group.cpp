// The CPU group's rendezvous: collectives inside fork branches, the errors every rank raises
// together (mismatched calls), refusals at record and build time, the timeout when a rank never
// arrives, and the communicator handle itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "arrays.hpp"
#include "compare.hpp"
#include "poison.hpp"
#include "random.hpp"
#include "ranks.hpp"

namespace eagle::test {
namespace {

using namespace std::chrono_literals;
using comm::ReduceOp;

Array eager(const Kernel& k, const Array& x) {
  return launch(k, {x}, {}, Stream(Device::cpu()), ThreadTeam::serial())[0];
}

TEST(CommCpuGroup, Handles) {
  const auto group = comm::cpu_group(3);
  ASSERT_EQ(group.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(group[static_cast<std::size_t>(r)].rank(), r);
    EXPECT_EQ(group[static_cast<std::size_t>(r)].size(), 3);
    EXPECT_EQ(group[static_cast<std::size_t>(r)].device(), Device::cpu());
    EXPECT_EQ(group[static_cast<std::size_t>(r)].kind(), "cpu-group");
  }
  EXPECT_EQ(group[1].describe(), "rank 1 of 3 (cpu-group on cpu)");
  expect_invalid([] { comm::cpu_group(0); }, {"'ranks' is 0"});
  expect_invalid([] { comm::cpu_group(2, {.timeout = 0ms}); }, {"'timeout'"});
  const comm::Communicator empty;
  EXPECT_FALSE(empty.defined());
  expect_invalid([&] { (void)empty.rank(); }, {"empty"});
  expect_invalid([&] { comm::all_reduce(empty); }, {"'comm'", "empty"});
}

// A kernel keeps its group alive: the communicators may go first.
TEST(CommCpuGroup, KernelsOutliveTheirCommunicators) {
  std::vector<Kernel> kernels;
  {
    const auto group = comm::cpu_group(2);
    for (const auto& c : group) kernels.push_back(comm::all_reduce(c));
  }
  const std::vector<Array> xs = {random_array({9}, DType::f32, Device::cpu()),
                                 random_array({9}, DType::f32, Device::cpu())};
  std::vector<Array> outs(2);
  const auto errors = on_ranks(2, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    outs[ur] = eager(kernels[ur], xs[ur]);
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  EXPECT_EQ(values(outs[0]),
            serial_reduce({values(xs[0]), values(xs[1])}, ReduceOp::sum, DType::f32));
}

TEST(CommCpuGroup, RefusedWhenRecorded) {
  const auto group = comm::cpu_group(2);
  const Array x53 = random_array({5, 3}, DType::f32, Device::cpu());
  auto record = [](const Kernel& k, const Array& x) {
    Graph::record([&](Recorder& r) { r.result(r.call(k, {r.param("x", x)})); });
  };
  expect_invalid([&] { record(comm::reduce_scatter(group[0]), x53); },
                 {"'x'", "f32[5,3]", "multiple of the 2 ranks"});
  expect_invalid(
      [&] {
        record(comm::all_gather(group[0]), Array::from(std::vector<float>{1}, {}, Device::cpu()));
      },
      {"'x'", "scalar"});
  const Array ints = random_array({4}, DType::i32, Device::cpu());
  expect_invalid([&] { record(comm::all_reduce(group[0], ReduceOp::avg), ints); },
                 {"'x'", "i32", "avg takes a floating dtype"});
  const Array bytes = random_array({4}, DType::u8, Device::cpu());
  expect_invalid([&] { record(comm::all_reduce(group[0]), bytes); }, {"'x'", "u8"});
  for (int root : {-1, 2})
    expect_invalid([&] { comm::broadcast(group[0], root); },
                   {"'root' is " + std::to_string(root), "outside [0, 2)"});
}

// A communicator runs on its own device: a graph built elsewhere is refused when it is built.
TEST(CommCpuGroup, RefusesAnotherDevice) {
  const auto group = comm::cpu_group(2);
  const Kernel k = comm::all_reduce(group[1]);
  expect_invalid([&] { k.def().binder->bind(Device::cuda(0)); },
                 {"rank 1 of 2", "lives on cpu", "runs on cuda:0"});
}

// Ranks that pass different shapes, dtypes or collectives all raise the same error; the group
// works afterwards.
TEST(CommCpuGroup, MismatchesRaiseOnEveryRank) {
  const int k = 3;
  const auto group = comm::cpu_group(k);
  auto expect_same_error = [&](const std::vector<std::string>& errors,
                               std::initializer_list<std::string> needles) {
    for (int r = 0; r < k; ++r) {
      const std::string& e = errors[static_cast<std::size_t>(r)];
      EXPECT_EQ(e, errors[0]) << "rank " << r << " raised another error";
      for (const std::string& n : needles)
        EXPECT_NE(e.find(n), std::string::npos) << "rank " << r << ": '" << e << "' lacks " << n;
    }
  };
  std::vector<Array> xs;
  for (int r = 0; r < k; ++r)
    xs.push_back(random_array({4, r == 2 ? 2 : 3}, DType::f32, Device::cpu()));
  expect_same_error(
      on_ranks(k,
               [&](int r) {
                 const auto ur = static_cast<std::size_t>(r);
                 eager(comm::all_reduce(group[ur]), xs[ur]);
               }),
      {"argument 'x'", "f32[4,3] on rank 0", "f32[4,2] on rank 2", "same dtype and shape"});
  expect_same_error(on_ranks(k,
                             [&](int r) {
                               const auto ur = static_cast<std::size_t>(r);
                               const Array x = random_array({4}, r == 1 ? DType::f64 : DType::f32,
                                                            Device::cpu());
                               eager(comm::all_reduce(group[ur]), x);
                             }),
                    {"argument 'x'", "f64[4] on rank 1"});
  expect_same_error(on_ranks(k,
                             [&](int r) {
                               const auto ur = static_cast<std::size_t>(r);
                               const Array x = random_array({3}, DType::f32, Device::cpu());
                               eager(r == 1 ? comm::all_gather(group[ur])
                                            : comm::all_reduce(group[ur], ReduceOp::max),
                                     x);
                             }),
                    {"rank 0 called all_reduce(max)", "rank 1 called all_gather",
                     "same collectives in the same order"});
  expect_same_error(on_ranks(k,
                             [&](int r) {
                               const auto ur = static_cast<std::size_t>(r);
                               const Array x = random_array({3}, DType::f32, Device::cpu());
                               eager(comm::broadcast(group[ur], r == 2 ? 1 : 0), x);
                             }),
                    {"broadcast(root 0)", "rank 2 called broadcast(root 1)"});
  // Still a working group.
  const auto errors = on_ranks(k, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    eager(comm::all_gather(group[ur]), xs[0]);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

// The same inside recorded graphs: g() throws on every rank.
TEST(CommCpuGroup, MismatchInGraphsRaisesOnEveryRank) {
  const int k = 2;
  const auto group = comm::cpu_group(k);
  const std::vector<Array> xs = {random_array({6}, DType::f32, Device::cpu()),
                                 random_array({5}, DType::f32, Device::cpu())};
  const auto errors = on_ranks(k, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    Graph g = Graph::record([&](Recorder& rec) {
      rec.result(rec.call(comm::all_reduce(group[ur]), {rec.param("x", xs[ur])}));
    });
    g.build(Device::cpu());
    g();
  });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("f32[6] on rank 0 but f32[5] on rank 1"), std::string::npos) << e;
  }
}

// A rank that never arrives: the others throw TimeoutError after the timeout, naming it; the
// group is broken from then on, for every rank.
TEST(CommCpuGroup, TimeoutWhenARankNeverArrives) {
  const int k = 3;
  const auto group = comm::cpu_group(k, {.timeout = 100ms});
  const Array x = random_array({8}, DType::f32, Device::cpu());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> errors(k);
  const auto ran = on_ranks(2, [&](int r) {
    try {
      eager(comm::all_reduce(group[static_cast<std::size_t>(r)]), x);
    } catch (const comm::TimeoutError& e) {
      errors[static_cast<std::size_t>(r)] = e.what();
    }
  });
  const auto waited = std::chrono::steady_clock::now() - start;
  for (const auto& e : ran) EXPECT_EQ(e, "") << "not a TimeoutError";
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 30s);
  for (int r = 0; r < 2; ++r) {
    const std::string& e = errors[static_cast<std::size_t>(r)];
    EXPECT_NE(e.find("waited 100 ms at collective #1"), std::string::npos) << e;
    EXPECT_NE(e.find("for rank(s) 2,"), std::string::npos) << e;
    EXPECT_NE(e.find("broken"), std::string::npos) << e;
  }
  // The late rank, and any later call, gets the first cause at once.
  expect_throw_with<comm::TimeoutError>([&] { eager(comm::all_reduce(group[2]), x); },
                                        {"for rank(s) 2,", "broken"});
  expect_throw_with<comm::TimeoutError>([&] { eager(comm::all_gather(group[0]), x); }, {"broken"});
}

// The same timeout from a graph's launch.
TEST(CommCpuGroup, TimeoutInAGraph) {
  const auto group = comm::cpu_group(2, {.timeout = 50ms});
  const Array x = random_array({8}, DType::f64, Device::cpu());
  Graph g = Graph::record(
      [&](Recorder& r) { r.result(r.call(comm::all_reduce(group[0]), {r.param("x", x)})); });
  g.build(Device::cpu());
  expect_throw_with<comm::TimeoutError>([&] { g(); }, {"rank 0", "for rank(s) 1,"});
}

// Two collectives of one rank at once (say from two fork branches) are refused: the ranks would
// pair them up in different orders.
TEST(CommCpuGroup, TwoCollectivesOfOneRankAtOnceAreRefused) {
  const auto group = comm::cpu_group(2);
  const Array x = random_array({4}, DType::f32, Device::cpu());
  std::vector<std::string> errors(2);
  std::thread a([&] {
    try {
      eager(comm::all_reduce(group[0]), x);
    } catch (const std::exception& e) {
      errors[0] = e.what();
    }
  });
  std::thread b([&] {
    std::this_thread::sleep_for(20ms);
    try {
      eager(comm::all_reduce(group[0]), x);
    } catch (const std::exception& e) {
      errors[1] = e.what();
    }
  });
  std::this_thread::sleep_for(60ms);
  std::thread peer([&] { eager(comm::all_reduce(group[1]), x); });  // completes the one pending
  a.join();
  b.join();
  peer.join();
  const int refused = static_cast<int>(errors[0].find("at once") != std::string::npos) +
                      static_cast<int>(errors[1].find("at once") != std::string::npos);
  EXPECT_EQ(refused, 1) << "'" << errors[0] << "', '" << errors[1] << "'";
}

// A collective in a fork branch: the rank's other branch runs meanwhile (its later work
// overlapping an earlier layer's all_reduce), replay after replay, the ranks in lockstep.
TEST(CommCpuGroup, AllReduceInsideAForkBranch) {
  const int k = 2, replays = 4;
  const auto group = comm::cpu_group(k);
  std::vector<std::vector<Array>> grads(replays), hs(replays);
  for (int t = 0; t < replays; ++t)
    for (int r = 0; r < k; ++r) {
      grads[static_cast<std::size_t>(t)].push_back(
          random_array({64, 3}, DType::f32, Device::cpu()));
      hs[static_cast<std::size_t>(t)].push_back(random_array({17}, DType::f32, Device::cpu()));
    }
  std::vector<std::vector<std::vector<double>>> reduced(replays,
                                                        std::vector<std::vector<double>>(k)),
      doubled(replays, std::vector<std::vector<double>>(k));
  const auto errors = on_ranks(k, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    const Kernel all_reduce = comm::all_reduce(group[ur], ReduceOp::avg);
    Graph g = Graph::record([&](Recorder& rec) {
      Value grad = rec.param("grad", grads[0][ur]), h = rec.param("h", hs[0][ur]);
      std::optional<Value> g_avg, h2;
      rec.parallel({
          [&](Branch&) { g_avg.emplace(rec.call(all_reduce, {grad})); },
          [&](Branch&) {
            Value a = rec.call(kernels::scale(), {h, 2.0});
            h2.emplace(rec.call(kernels::add(), {a, h}));  // 3 h
          },
      });
      rec.result({*g_avg, *h2});
    });
    g.build(Device::cpu(), BuildOptions{.threads = 2});
    for (int t = 0; t < replays; ++t) {
      const auto ut = static_cast<std::size_t>(t);
      g.bind("grad", grads[ut][ur]);
      g.bind("h", hs[ut][ur]);
      if (r == 1) std::this_thread::sleep_for(5ms);  // rank 0's all_reduce waits for rank 1
      const std::vector<Array>& out = g();
      reduced[ut][ur] = values(out[0]);
      doubled[ut][ur] = values(out[1]);
    }
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  for (int t = 0; t < replays; ++t) {
    const auto ut = static_cast<std::size_t>(t);
    const std::vector<double> want =
        serial_reduce({values(grads[ut][0]), values(grads[ut][1])}, ReduceOp::avg, DType::f32);
    for (int r = 0; r < k; ++r) {
      const auto ur = static_cast<std::size_t>(r);
      EXPECT_EQ(reduced[ut][ur], want) << "replay " << t << ", rank " << r;
      std::vector<double> h3;
      for (double v : values(hs[ut][ur]))
        h3.push_back(static_cast<float>(static_cast<float>(2 * v) + static_cast<float>(v)));
      EXPECT_EQ(doubled[ut][ur], h3) << "replay " << t << ", rank " << r;
    }
  }
}

// A communicator's collectives run in recording order whatever else the graph runs at once:
// each waits for the one recorded before it (through an if holding one), and for nothing else
// it does not read; another communicator's are not ordered with them. Two in concurrent fork
// branches are refused, since ranks could then issue them in different orders.
TEST(CommCpuGroup, OneCommunicatorsCollectivesRunInRecordingOrder) {
  const auto group = comm::cpu_group(2), other = comm::cpu_group(2);
  const Array a0 = random_array({4}, DType::f32, Device::cpu());
  const Array b0 = random_array({4}, DType::f32, Device::cpu());
  const Array flag = Array::from(std::vector<uint32_t>{1}, {1}, Device::cpu());
  const Kernel all_reduce = comm::all_reduce(group[0]);
  Graph g = Graph::record([&](Recorder& r) {
    Value a = r.param("a", a0), b = r.param("b", b0), c = r.param("flag", flag);
    Value scaled = r.call(kernels::scale(), {a, 2.0});                                  // node 0
    Value ar = r.call(all_reduce, {a});                                                 // node 1
    Value br = r.call(all_reduce, {b});                                                 // node 2
    Value bo = r.call(comm::all_reduce(other[0]), {b});                                 // node 3
    r.if_(c, [&] { r.call(all_reduce, {b}, buffer(r.empty({4}, DType::f32, "x"))); });  // 4, 5
    Value last = r.call(all_reduce, {a});                                               // node 6
    r.result({scaled, ar, br, bo, last});
  });
  const std::vector<std::pair<int, int>> edges = g.edges();
  auto edge = [&](int from, int to) {
    return std::find(edges.begin(), edges.end(), std::pair{from, to}) != edges.end();
  };
  ASSERT_EQ(g.nodes()[4].kind, NodeKind::if_);
  EXPECT_TRUE(edge(1, 2));   // the second waits for the first
  EXPECT_TRUE(edge(2, 4));   // the if holding one waits for the one before it
  EXPECT_TRUE(edge(4, 6));   // and the next waits for the if
  EXPECT_FALSE(edge(0, 1));  // not for unrelated work: it may run beside it
  EXPECT_FALSE(edge(2, 3));  // another communicator's collective is not ordered with them
  EXPECT_FALSE(edge(1, 3));

  const auto refused = [&] {
    Graph::record([&](Recorder& r) {
      Value a = r.param("a", a0), b = r.param("b", b0);
      r.parallel(
          {[&](Branch&) { r.call(all_reduce, {a}); }, [&](Branch&) { r.call(all_reduce, {b}); }});
    });
  };
  expect_throw_with<RecordError>(refused, {"order refused", "branch 0", "branch 1",
                                           "must run in recording order", "one branch"});
}

}  // namespace
}  // namespace eagle::test
