// Every collective of the CPU group across 1 to 4 thread ranks and every dtype, against the serial
// computation: eager out of place and in place, and inside recorded graphs replayed with fresh
// inputs, each rank launching its own graph from its own thread. Outputs start as poison; every
// rank's result must be bitwise the same where the ranks share one.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "poison.hpp"
#include "random.hpp"
#include "ranks.hpp"

namespace eagle::test {
namespace {

using comm::ReduceOp;

constexpr DType kDtypes[] = {DType::f32,  DType::f64, DType::f16,
                             DType::bf16, DType::i32, DType::i64};

// One collective as the tests see it.
struct Case {
  std::string name;
  std::function<Kernel(const comm::Communicator&)> kernel;
  std::function<Shape(int ranks)> x_shape;
  // Rank r's expected output from every rank's x (as doubles).
  std::function<std::vector<double>(int r, const std::vector<std::vector<double>>& xs)> want;
  bool in_place = false;  // out may be x itself
  bool shared = true;     // every rank gets the same output
};

Case reduce_case(ReduceOp op, DType dtype) {
  return {"all_reduce(" + std::string(comm::reduce_op_name(op)) + ")",
          [op](const comm::Communicator& c) { return comm::all_reduce(c, op); },
          [](int) {
            return Shape{37, 29};
          },  // 1073 elements: uneven chunks, several blocks
          [op, dtype](int, const std::vector<std::vector<double>>& xs) {
            return serial_reduce(xs, op, dtype);
          },
          true,
          true};
}

Case reduce_scatter_case(ReduceOp op, DType dtype) {
  return {"reduce_scatter(" + std::string(comm::reduce_op_name(op)) + ")",
          [op](const comm::Communicator& c) { return comm::reduce_scatter(c, op); },
          [](int k) {
            return Shape{5 * k, 3, 7};
          },
          [op, dtype](int r, const std::vector<std::vector<double>>& xs) {
            const std::vector<double> all = serial_reduce(xs, op, dtype);
            const std::size_t n = all.size() / xs.size();
            return std::vector<double>(all.begin() + static_cast<std::ptrdiff_t>(n * r),
                                       all.begin() + static_cast<std::ptrdiff_t>(n * (r + 1)));
          },
          false,
          false};
}

Case all_gather_case() {
  return {"all_gather",
          [](const comm::Communicator& c) { return comm::all_gather(c); },
          [](int) {
            return Shape{6, 11};
          },
          [](int, const std::vector<std::vector<double>>& xs) {
            std::vector<double> out;
            for (const auto& x : xs) out.insert(out.end(), x.begin(), x.end());
            return out;
          },
          false,
          true};
}

Case broadcast_case(int root) {
  return {"broadcast(root " + std::to_string(root) + ")",
          [root](const comm::Communicator& c) { return comm::broadcast(c, root); },
          [](int) {
            return Shape{19, 4};
          },
          [root](int, const std::vector<std::vector<double>>& xs) {
            return xs[static_cast<std::size_t>(root)];
          },
          true,
          true};
}

enum class Mode { eager, eager_in_place, graph, graph_in_place };
const char* mode_name(Mode m) {
  switch (m) {
    case Mode::eager:
      return "eager";
    case Mode::eager_in_place:
      return "eager in place";
    case Mode::graph:
      return "graph";
    case Mode::graph_in_place:
      return "graph in place";
  }
  return "?";
}

constexpr int kReplays = 3;

// Runs `c` on a fresh group of k ranks in `mode` and compares every rank's output with the
// serial computation, replay by replay.
void check(const Case& c, int k, DType dtype, Mode mode) {
  SCOPED_TRACE(c.name + " over " + std::to_string(k) + " ranks, " + std::string(dtype_name(dtype)) +
               ", " + mode_name(mode));
  const bool graph = mode == Mode::graph || mode == Mode::graph_in_place;
  const bool in_place = mode == Mode::eager_in_place || mode == Mode::graph_in_place;
  const int replays = graph ? kReplays : 1;
  // Inputs, made on this thread (the test's random stream): xs[t][r] for replay t, rank r.
  std::vector<std::vector<Array>> xs(static_cast<std::size_t>(replays));
  std::vector<std::vector<Array>> kept(static_cast<std::size_t>(replays));  // untouched copies
  for (auto& per_rank : xs)
    for (int r = 0; r < k; ++r)
      per_rank.push_back(random_array(c.x_shape(k), dtype, Device::cpu()));
  for (int t = 0; t < replays; ++t)
    for (const Array& x : xs[static_cast<std::size_t>(t)])
      kept[static_cast<std::size_t>(t)].push_back(x.to(Device::cpu()));

  const std::vector<comm::Communicator> group = comm::cpu_group(k);
  // outs[t][r]: what rank r's collective produced at replay t.
  std::vector<std::vector<Array>> outs(static_cast<std::size_t>(replays),
                                       std::vector<Array>(static_cast<std::size_t>(k)));
  const std::vector<std::string> errors = on_ranks(k, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    const Kernel kernel = c.kernel(group[ur]);
    const Shape out_shape = kernel.infer({{c.x_shape(k), dtype}}, {})[0].shape;
    if (!graph) {
      const Array& x = xs[0][ur];
      const Array out = in_place ? x : poisoned(out_shape, dtype);
      Stream stream(Device::cpu());
      launch_into(kernel, {x}, {}, {out}, stream, ThreadTeam::serial());
      outs[0][ur] = out;
      return;
    }
    Graph g = Graph::record([&](Recorder& rec) {
      Value x = rec.param("x", xs[0][ur]);
      if (in_place) {
        rec.call(kernel, {x}, buffer(x));
        rec.result(x);
      } else {
        rec.result(rec.call(kernel, {x}, buffer(rec.empty(out_shape, dtype, "out"))));
      }
    });
    g.build(Device::cpu(), BuildOptions{.threads = 1});
    for (int t = 0; t < replays; ++t) {
      g.bind("x", xs[static_cast<std::size_t>(t)][ur]);
      outs[static_cast<std::size_t>(t)][ur] = g()[0].to(Device::cpu());  // a copy
    }
  });
  for (int r = 0; r < k; ++r) ASSERT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;

  for (int t = 0; t < replays; ++t) {
    const auto ut = static_cast<std::size_t>(t);
    std::vector<std::vector<double>> in;
    for (const Array& x : kept[ut]) in.push_back(values(x));
    for (int r = 0; r < k; ++r) {
      const auto ur = static_cast<std::size_t>(r);
      EXPECT_EQ(values(outs[ut][ur]), c.want(r, in)) << "replay " << t << ", rank " << r;
      if (c.shared && r > 0) {
        EXPECT_TRUE(same_bytes(outs[ut][ur], outs[ut][0]))
            << "replay " << t << ": rank " << r << "'s result differs from rank 0's in its bits";
      }
      // A graph's param is copied before it is written in place: the caller's x is intact.
      if (mode == Mode::graph_in_place) {
        EXPECT_TRUE(same_bytes(xs[ut][ur], kept[ut][ur])) << "rank " << r << "'s param was written";
      }
    }
  }
}

void sweep(const std::function<Case(DType)>& make, bool floating_only = false) {
  for (int k = 1; k <= 4; ++k)
    for (DType dtype : kDtypes) {
      if (floating_only && !is_floating(dtype)) continue;
      const Case c = make(dtype);
      for (Mode mode : {Mode::eager, Mode::eager_in_place, Mode::graph, Mode::graph_in_place}) {
        if (!c.in_place && (mode == Mode::eager_in_place || mode == Mode::graph_in_place)) continue;
        check(c, k, dtype, mode);
      }
    }
}

TEST(CommCollectives, AllReduceSumAgainstSerial) {
  sweep([](DType d) { return reduce_case(ReduceOp::sum, d); });
}
TEST(CommCollectives, AllReduceAvgAgainstSerial) {
  sweep([](DType d) { return reduce_case(ReduceOp::avg, d); }, true);
}
TEST(CommCollectives, AllReduceMaxMinAgainstSerial) {
  sweep([](DType d) { return reduce_case(ReduceOp::max, d); });
  sweep([](DType d) { return reduce_case(ReduceOp::min, d); });
}
TEST(CommCollectives, ReduceScatterAgainstSerial) {
  sweep([](DType d) { return reduce_scatter_case(ReduceOp::sum, d); });
  sweep([](DType d) { return reduce_scatter_case(ReduceOp::avg, d); }, true);
}
TEST(CommCollectives, AllGatherAgainstSerial) {
  sweep([](DType) { return all_gather_case(); });
}
TEST(CommCollectives, BroadcastFromEveryRootAgainstSerial) {
  for (int root : {0, 1, 2, 3})
    for (int k = root + 1; k <= 4; ++k)
      for (DType dtype : kDtypes) {
        const Case c = broadcast_case(root);
        for (Mode mode : {Mode::eager, Mode::eager_in_place, Mode::graph, Mode::graph_in_place})
          check(c, k, dtype, mode);
      }
}

// Data movement takes any dtype (bytes); reductions refuse what they cannot add.
TEST(CommCollectives, AllGatherMovesAnyDtype) {
  check(all_gather_case(), 3, DType::u8, Mode::eager);
  check(all_gather_case(), 2, DType::u32, Mode::graph);
}

// Results are the same bits run after run (the reduction order is fixed).
TEST(CommCollectives, SameBitsAcrossRuns) {
  const int k = 4;
  std::vector<Array> xs;
  for (int r = 0; r < k; ++r) xs.push_back(random_array({4099}, DType::f32, Device::cpu()));
  std::vector<Array> first;
  for (int run = 0; run < 5; ++run) {
    const auto group = comm::cpu_group(k);
    std::vector<Array> outs(k);
    const auto errors = on_ranks(k, [&](int r) {
      outs[static_cast<std::size_t>(r)] = launch(
          comm::all_reduce(group[static_cast<std::size_t>(r)]), {xs[static_cast<std::size_t>(r)]},
          {}, Stream(Device::cpu()), ThreadTeam::serial())[0];
    });
    for (const auto& e : errors) ASSERT_EQ(e, "");
    if (run == 0) first = outs;
    for (int r = 0; r < k; ++r)
      EXPECT_TRUE(same_bytes(outs[static_cast<std::size_t>(r)], first[0]))
          << "run " << run << ", rank " << r;
  }
}

}  // namespace
}  // namespace eagle::test
