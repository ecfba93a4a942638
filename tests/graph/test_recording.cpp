// Recording: nodes, inferred edges, race refusal, params, buffers and the exports.
#include <gtest/gtest.h>

#include <algorithm>

#include "eagle/eagle.hpp"
#include "eagle/kernel/views.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using kernels::add;
using kernels::fill;
using kernels::scale;

Array host_f32(const Shape& shape) {
  return test::random_array(shape, DType::f32, Device::cpu());
}

bool has_edge(const Graph& g, int from, int to) {
  auto e = g.edges();
  return std::find(e.begin(), e.end(), std::make_pair(from, to)) != e.end();
}

TEST(Record, CallsBecomeNodesWithEdgesFromDataFlow) {
  Array x0 = host_f32({8});
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    Value a = r.call(scale(), {x, 2.0});  // 0
    Value b = r.call(scale(), {x, 3.0});  // 1: independent of 0
    Value c = r.call(add(), {a, b});      // 2: after both
    r.result(c);
  });
  ASSERT_EQ(g.nodes().size(), 3u);
  EXPECT_EQ(g.nodes()[0].kernel, "scale");
  EXPECT_EQ(g.nodes()[2].kernel, "add");
  EXPECT_EQ(g.edges().size(), 2u);
  EXPECT_TRUE(has_edge(g, 0, 2));
  EXPECT_TRUE(has_edge(g, 1, 2));
  EXPECT_FALSE(has_edge(g, 0, 1));
  EXPECT_EQ(g.nodes()[1].deps, std::vector<int>{});
}

TEST(Record, WriteAfterReadAndWriteAfterWriteAreOrdered) {
  Graph g = Graph::record([&](Recorder& r) {
    Value t = r.empty({16}, DType::f32, "t");
    r.call(fill(), {1.0}, buffer(t));     // 0 writes t
    Value u = r.call(scale(), {t, 2.0});  // 1 reads t      (RAW on 0)
    r.call(fill(), {5.0}, buffer(t));     // 2 writes t     (WAR on 1, WAW on 0)
    Value v = r.call(add(), {t, u});      // 3 reads t, u   (RAW on 2 and 1)
    r.result(v);
  });
  EXPECT_TRUE(has_edge(g, 0, 1));
  EXPECT_TRUE(has_edge(g, 1, 2));
  EXPECT_TRUE(has_edge(g, 2, 3));
  EXPECT_TRUE(has_edge(g, 1, 3));
}

TEST(Record, DisjointViewsOfOneArrayAreIndependentAndOverlappingOnesAreOrdered) {
  Graph g = Graph::record([&](Recorder& r) {
    Value t = r.empty({4, 8}, DType::f32, "t");
    r.call(fill(), {1.0}, buffer(t.slice(0, 2)));  // 0: rows 0-1
    r.call(fill(), {2.0}, buffer(t.slice(2, 4)));  // 1: rows 2-3, disjoint from 0
    r.call(fill(), {3.0}, buffer(t.slice(1, 3)));  // 2: rows 1-2 overlap both
    r.result(t);
  });
  EXPECT_FALSE(has_edge(g, 0, 1));
  EXPECT_TRUE(has_edge(g, 0, 2));
  EXPECT_TRUE(has_edge(g, 1, 2));
}

// Column slices of one [4, 12] array (q, k, v of a qkv projection) span nearly all of it yet
// share no byte: writes to two of them are independent, one overlapping both follows both, and a
// strided write covers only its own bytes (a later reader of k still follows k's writer).
TEST(Record, ColumnSlicesOfOneArrayAreOrderedOnlyWhereTheirBytesMeet) {
  const Array c0 = host_f32({4, 4});
  Graph g = Graph::record([&](Recorder& r) {
    Value t = r.empty({4, 12}, DType::f32, "qkv");
    const Value c = r.param("c", c0);
    r.call_all(kernels::scatter_view(), {t.slice(1, 4, 8), c});    // 0: k's columns
    r.call_all(kernels::scatter_view(), {t.slice(1, 0, 4), c});    // 1: q's, apart from 0
    r.call_all(kernels::scatter_view(), {t.slice(1, 2, 6), c});    // 2: columns 2-5 meet both
    r.result(r.call(kernels::gather_view(), {t.slice(1, 6, 8)}));  // 3: k's last two columns
  });
  EXPECT_FALSE(has_edge(g, 0, 1));
  EXPECT_TRUE(has_edge(g, 0, 2));
  EXPECT_TRUE(has_edge(g, 1, 2));
  EXPECT_TRUE(has_edge(g, 0, 3));   // 2's write left columns 6-7 as 0 wrote them
  EXPECT_FALSE(has_edge(g, 1, 3));  // q's columns: apart
  EXPECT_FALSE(has_edge(g, 2, 3));  // columns 2-5: apart from 6-7
  g.build(Device::cpu());
  const std::vector<float> got = g()[0].to_vector<float>(), c = c0.to_vector<float>();
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 2; ++j) EXPECT_EQ(got[i * 2 + j], c[i * 4 + 2 + j]);
}

TEST(Record, HostDecisionsRecordOnlyThePathTaken) {
  for (bool debug : {false, true}) {
    Array x0 = host_f32({4});
    Graph g = Graph::record([&](Recorder& r) {
      Value y = r.param("x", x0);
      for (int k = 0; k < 3; ++k) y = r.call(scale(), {y, 2.0});
      if (debug) y = r.call(add(), {y, y});
      r.result(y);
    });
    EXPECT_EQ(g.nodes().size(), debug ? 4u : 3u);
    EXPECT_EQ(g.nodes().back().kernel, debug ? "add" : "scale");
  }
}

TEST(Record, InPlaceUpdateOfTheSameViewIsAllowedForPerSampleKernels) {
  Graph g = Graph::record([&](Recorder& r) {
    Value t = r.empty({8}, DType::f32);
    r.call(fill(), {1.0}, buffer(t));
    Value same = r.call(scale(), {t, 2.0}, buffer(t));
    r.result(same);
  });
  EXPECT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(g.nodes()[1].arrays[0].buffer, g.nodes()[1].arrays[1].buffer);
}

TEST(Record, PartialOverlapInsideOneNodeIsARaceNamingNodeAndArray) {
  try {
    Graph::record([&](Recorder& r) {
      Value t = r.empty({4, 8}, DType::f32, "scratch");
      r.call(fill(), {1.0}, buffer(t));
      r.call(scale(), {t.slice(0, 2), 2.0}, buffer(t.slice(1, 3), "shift"));
    });
    FAIL() << "expected a RecordError";
  } catch (const RecordError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("race"), std::string::npos) << m;
    EXPECT_NE(m.find("node 1 'shift'"), std::string::npos) << m;
    EXPECT_NE(m.find("'scratch'"), std::string::npos) << m;
    EXPECT_NE(m.find("'x'"), std::string::npos) << m;
    EXPECT_NE(m.find("'out'"), std::string::npos) << m;
  }
}

TEST(Record, InPlaceWriteByAReducingKernelIsARace) {
  EXPECT_THROW(Graph::record([&](Recorder& r) {
                 Value t = r.empty({1}, DType::f32, "acc");
                 r.call(fill(), {1.0}, buffer(t));
                 r.call(kernels::sum(), {t}, buffer(t));
               }),
               RecordError);
}

TEST(Record, CallerArraysThatShareMemoryAreRefused) {
  Array x0 = host_f32({8});
  try {
    Graph::record([&](Recorder& r) {
      r.param("x", x0);
      r.param("y", x0.slice(0, 2, 6));
    });
    FAIL() << "expected a RecordError";
  } catch (const RecordError& e) {
    EXPECT_NE(std::string(e.what()).find("overlaps the memory of param array 'x'"),
              std::string::npos)
        << e.what();
  }
}

TEST(Record, AWrittenParamGetsAPrivateCopyFilledFirst) {
  Array x0 = host_f32({8});
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    Value before = r.call(scale(), {x, 2.0});  // 0 reads the param itself
    r.call(scale(), {x, 3.0}, buffer(x));      // 1 copy_in, 2 scales the copy in place
    r.result({before, x});
  });
  ASSERT_EQ(g.nodes().size(), 3u);
  EXPECT_EQ(g.nodes()[1].kind, NodeKind::copy_in);
  const int param = g.recording().param_buffer("x");
  const int copy = g.nodes()[1].arrays[1].buffer;
  EXPECT_NE(copy, param);
  EXPECT_EQ(g.recording().buffers()[copy].shadow_of, param);
  EXPECT_EQ(g.nodes()[0].arrays[0].buffer, param);
  EXPECT_EQ(g.nodes()[2].arrays[0].buffer, copy);
  EXPECT_EQ(g.nodes()[2].arrays[1].buffer, copy);
  EXPECT_TRUE(has_edge(g, 1, 2));
  EXPECT_EQ(g.recording().results()[1].buffer, copy);
}

TEST(Record, ErrorsNameTheArgumentAndTheRule) {
  Array x0 = host_f32({8});
  Array y0 = host_f32({4});
  auto message = [](const std::function<void(Recorder&)>& body) {
    try {
      Graph::record(body);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&](Recorder& r) {
              r.call(add(), {r.param("x", x0), r.param("y", y0)});
            }).find("argument 'b' has shape [4] but 'a' has [8]"),
            std::string::npos);
  EXPECT_NE(message([&](Recorder& r) {
              r.call(scale(), {r.param("x", x0)});
            }).find("expects 1 scalar arguments, got 0"),
            std::string::npos);
  EXPECT_NE(message([&](Recorder& r) { r.call(fill(), {1.0}); }).find("supply it with buffer="),
            std::string::npos);
  EXPECT_NE(message([&](Recorder& r) {
              Value x = r.param("x", x0);
              r.call(scale(), {x, 2.0}, buffer(r.empty({3}, DType::f32)));
            }).find("must be f32[8] but buffer= is f32[3]"),
            std::string::npos);
  EXPECT_NE(message([&](Recorder& r) {
              r.param("x", x0);
              r.param("x", y0);
            }).find("a param named 'x' already exists"),
            std::string::npos);
  EXPECT_NE(message([&](Recorder& r) {
              r.call(kernels::sum(),
                     {r.param("x", test::random_array({8}, DType::f16, Device::cpu()))});
            }).find("dtype f16 is not served"),
            std::string::npos);
}

TEST(Record, AValueFromAnotherRecordingIsRefused) {
  Array x0 = host_f32({8});
  Value foreign;
  Graph first = Graph::record([&](Recorder& r) { foreign = r.param("x", x0); });
  try {
    Graph::record([&](Recorder& r) { r.call(scale(), {foreign, 2.0}); });
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("does not belong to this recording"), std::string::npos)
        << e.what();
  }
}

TEST(Record, ToJsonAndToDotDescribeNodesEdgesAndArrays) {
  Array x0 = host_f32({8});
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    Value a = r.call(scale(), {x, 2.0}, CallOptions{{}, "double"});
    r.result(r.call(add(), {a, x}));
  });
  const std::string json = g.to_json();
  EXPECT_NE(json.find("\"params\": [\"x\"]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"label\": \"double\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"kernel\": \"add\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"edges\": [[0, 1]]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"kind\": \"param\""), std::string::npos) << json;
  const std::string dot = g.to_dot();
  EXPECT_EQ(dot.rfind("digraph eagle {", 0), 0u) << dot;
  EXPECT_NE(dot.find("n0 -> n1"), std::string::npos) << dot;
  EXPECT_NE(dot.find("\"0: double\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("double#0.out"), std::string::npos) << dot;
}

}  // namespace
}  // namespace eagle

namespace eagle {
namespace {

TEST(Record, ReadOnlyArraysAreNeverWritten) {
  const Array ro = test::random_array({8}, DType::f32, Device::cpu()).as_read_only();
  const auto before = ro.to_vector<float>();
  // An external read-only array may be read, not written.
  test::expect_throw_with<InvalidArgument>(
      [&] {
        Graph::record([&](Recorder& r) {
          const Value e = r.external(ro, "state");
          r.result(r.call(kernels::scale(), {e, 2.0}));  // reading is fine
          r.call(kernels::fill(), {1.0}, buffer(e));
        });
      },
      {"kernel fill", "'out'", "'state'", "read-only"});
  test::expect_throw_with<InvalidArgument>(
      [&] { Graph::record([&](Recorder& r) { r.call(kernels::fill(), {1.0}, buffer(ro)); }); },
      {"output 'out'", "read-only"});
  // A written param is shadowed: a read-only param is fine, and stays untouched.
  Graph g = Graph::record([&](Recorder& r) {
    const Value p = r.param("p", ro);
    r.call(kernels::scale(), {p, 3.0}, buffer(p));
    r.result(p);
  });
  g.build(Device::cpu());
  const auto got = g()[0].to_vector<float>();
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], 3 * before[i]);
  EXPECT_EQ(ro.to_vector<float>(), before);
}

TEST(Record, ShapesWhoseSizeOverflowsAreRefused) {
  Graph::record([&](Recorder& r) {
    test::expect_throw_with<InvalidArgument>(
        [&] { r.empty({int64_t{1} << 62}, DType::f32, "huge"); }, {"Recorder::empty", "fit"});
    test::expect_throw_with<InvalidArgument>(
        [&] {
          r.empty({int64_t{1} << 32, int64_t{1} << 32}, DType::u8);
        },
        {"fit"});
    test::expect_throw_with<InvalidArgument>([&] { r.empty({4, -1}, DType::u8); }, {"negative"});
    const Value t = r.empty({4}, DType::f32, "t");
    test::expect_throw_with<InvalidArgument>(
        [&] {
          (void)t.reshape({int64_t{1} << 62, 4});
        },
        {"Value::reshape", "fit"});
    r.result(t);
  });
}

}  // namespace
}  // namespace eagle
