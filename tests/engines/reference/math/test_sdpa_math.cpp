// Checks the float64 ragged attention reference against hand-computed values, the support
// library's attention oracle (a masked softmax(QK^T * scale) V per sequence), and central finite
// differences for the backward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "dense.hpp"
#include "eagle/core/error.hpp"
#include "engines/reference/math/sdpa.hpp"
#include "oracles/attention.hpp"
#include "oracles/gradient.hpp"
#include "oracles/pointwise.hpp"
#include "test_util.hpp"

namespace eagle::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

using test::expect_all_near;
using test::expect_invalid;
using test::make_dense;
using test::random_dense_signed;
using test::oracle::sigmoid;

// Element (t, h, c) of a [T, H, C] tensor, or (t, h) of a [T, H] one.
double& at(Dense& x, int64_t t, int64_t h, int64_t c = 0) {
  const int64_t inner = x.dims.size() == 3 ? x.dims[2] : 1;
  return x.data[(t * x.dims[1] + h) * inner + c];
}
double at(const Dense& x, int64_t t, int64_t h, int64_t c = 0) {
  return at(const_cast<Dense&>(x), t, h, c);
}

// --- A ragged problem with gaps, q_len != kv_len both ways, empty and key-less sequences ---

struct Problem {
  Dense q, k, v, d_o;
  SdpaSequences seqs;
  double scale;
};

// q rows 0, 4, 9, 12 and kv rows 5, 10, 11 are padding.
SdpaSequences ragged_sequences() {
  return SdpaSequences{
      .q_start = {1, 4, 5, 10, 12},
      .q_len = {3, 0, 4, 2, 0},  // seq 1: no queries; seq 4: empty
      .kv_start = {0, 6, 8, 10, 11},
      .kv_len = {5, 2, 2, 0, 0},  // seq 2: causal rows 0, 1 see nothing; seq 3: no keys
  };
}
const std::vector<int64_t> kPadQ = {0, 4, 9, 12}, kPadKv = {5, 10, 11};

// Fresh inputs, bounded away from zero so a dropped term cannot hide behind a zero input.
Problem ragged_problem(int64_t h, int64_t hk) {
  const int64_t tq = 13, tk = 12, d = 3, dv = 2;
  return Problem{random_dense_signed({tq, h, d}),
                 random_dense_signed({tk, hk, d}),
                 random_dense_signed({tk, hk, dv}),
                 random_dense_signed({tq, h, dv}),
                 ragged_sequences(),
                 0.7};
}

// The oracle's view of the same sequences.
test::oracle::Sequences oracle_seqs(const SdpaSequences& s) {
  return {s.q_start, s.q_len, s.kv_start, s.kv_len};
}

// sum(dO * o) over the rows that belong to a sequence (padding rows are NaN).
double loss(const Dense& o, const Dense& d_o, const SdpaSequences& seqs) {
  double l = 0.0;
  for (std::size_t b = 0; b < seqs.q_start.size(); ++b)
    for (int64_t t = seqs.q_start[b]; t < seqs.q_start[b] + seqs.q_len[b]; ++t)
      for (int64_t h = 0; h < o.dims[1]; ++h)
        for (int64_t c = 0; c < o.dims[2]; ++c) l += at(o, t, h, c) * at(d_o, t, h, c);
  return l;
}

bool in_rows(const std::vector<int64_t>& start, const std::vector<int64_t>& len, int64_t t) {
  for (std::size_t b = 0; b < start.size(); ++b)
    if (t >= start[b] && t < start[b] + len[b]) return true;
  return false;
}

// --- Hand-computed: one head, D = 1, q = [1, 2], k = [1, 2], v = [10, 20], scale = 0.5 ---

const Dense kQ = make_dense({2, 1, 1}, {1, 2}), kK = make_dense({2, 1, 1}, {1, 2}),
            kV = make_dense({2, 1, 1}, {10, 20});

TEST(SdpaHand, NonCausal) {
  const auto f = sdpa_forward(kQ, kK, kV, {{0}, {2}, {0}, {2}}, {0.5, false});
  // Row 0 scores [0.5, 1]: weight on key 1 is sigmoid(0.5). Row 1 scores [1, 2]: sigmoid(1).
  EXPECT_NEAR(at(f.o, 0, 0), 10 + 10 * sigmoid(0.5), 1e-13);
  EXPECT_NEAR(at(f.lse, 0, 0), std::log(std::exp(0.5) + std::exp(1.0)), 1e-13);
  EXPECT_NEAR(at(f.o, 1, 0), 10 + 10 * sigmoid(1.0), 1e-13);
  EXPECT_NEAR(at(f.lse, 1, 0), std::log(std::exp(1.0) + std::exp(2.0)), 1e-13);
}

TEST(SdpaHand, Causal) {
  const auto f = sdpa_forward(kQ, kK, kV, {{0}, {2}, {0}, {2}}, {0.5, true});
  // Row 0 sees key 0 only; row 1 sees both.
  EXPECT_DOUBLE_EQ(at(f.o, 0, 0), 10.0);
  EXPECT_DOUBLE_EQ(at(f.lse, 0, 0), 0.5);
  EXPECT_NEAR(at(f.o, 1, 0), 10 + 10 * sigmoid(1.0), 1e-13);
  EXPECT_NEAR(at(f.lse, 1, 0), std::log(std::exp(1.0) + std::exp(2.0)), 1e-13);
}

TEST(SdpaHand, CausalIsBottomRightAligned) {
  // Two queries, one key: query 0 sees j <= 0 + (1 - 2) = -1, i.e. nothing.
  const auto more_q = sdpa_forward(kQ, kK, kV, {{0}, {2}, {0}, {1}}, {0.5, true});
  EXPECT_EQ(at(more_q.o, 0, 0), 0.0);
  EXPECT_EQ(at(more_q.lse, 0, 0), -kInf);
  EXPECT_DOUBLE_EQ(at(more_q.o, 1, 0), 10.0);
  EXPECT_DOUBLE_EQ(at(more_q.lse, 1, 0), 1.0);
  // One query (q = 2), two keys: it sees j <= 0 + (2 - 1) = 1, i.e. both.
  const auto more_k = sdpa_forward(kQ, kK, kV, {{1}, {1}, {0}, {2}}, {0.5, true});
  EXPECT_NEAR(at(more_k.o, 1, 0), 10 + 10 * sigmoid(1.0), 1e-13);
  EXPECT_TRUE(std::isnan(at(more_k.o, 0, 0)));  // q row 0 is padding here
}

TEST(SdpaHand, Backward) {
  // One query q = 1, keys [1, 2], dO = 1: p = [1 - s, s] with s = sigmoid(0.5).
  // do/dq = scale * Cov_p(k, v) = 0.5 * s(1 - s) * (2 - 1) * (20 - 10); dv_j = p_j.
  const SdpaSequences seqs{{0}, {1}, {0}, {2}};
  const SdpaOptions opt{0.5, false};
  const Dense q = make_dense({1, 1, 1}, {1}), d_o = make_dense({1, 1, 1}, {1});
  const auto f = sdpa_forward(q, kK, kV, seqs, opt);
  const auto g = sdpa_backward(q, kK, kV, f.o, f.lse, d_o, seqs, opt);
  const double s = sigmoid(0.5);
  EXPECT_NEAR(g.dq.data[0], 0.5 * s * (1 - s) * 10, 1e-13);
  EXPECT_NEAR(g.dv.data[0], 1 - s, 1e-13);
  EXPECT_NEAR(g.dv.data[1], s, 1e-13);
  // dk_j = scale * q * p_j * (v_j - o); o = 10 + 10 s.
  EXPECT_NEAR(g.dk.data[0], 0.5 * (1 - s) * (10 - (10 + 10 * s)), 1e-13);
  EXPECT_NEAR(g.dk.data[1], 0.5 * s * (20 - (10 + 10 * s)), 1e-13);
}

// --- Forward against the dense formula and against itself under repacking ---

class SdpaRandom : public ::testing::TestWithParam<bool> {};

// Padding rows (NaN), key-less rows (o = 0, lse = -inf) and the rest, element for element.
TEST_P(SdpaRandom, ForwardMatchesTheOracle) {
  const bool causal = GetParam();
  const Problem p = ragged_problem(4, 2);
  const auto f = sdpa_forward(p.q, p.k, p.v, p.seqs, {p.scale, causal});
  const auto want = test::oracle::sdpa(p.q, p.k, p.v, oracle_seqs(p.seqs), p.scale, causal);
  expect_all_near(f.o, want.o, 1e-12, "o");
  expect_all_near(f.lse, want.lse, 1e-12, "lse");
}

// Packing sequences with gaps must give each sequence exactly what it gets alone.
TEST_P(SdpaRandom, PackedEqualsEachSequenceAlone) {
  const SdpaOptions opt{0.7, GetParam()};
  const Problem p = ragged_problem(4, 2);
  const auto f = sdpa_forward(p.q, p.k, p.v, p.seqs, opt);
  const auto g = sdpa_backward(p.q, p.k, p.v, f.o, f.lse, p.d_o, p.seqs, opt);
  // Rows [start, start + len) of x as their own tensor.
  auto rows = [](const Dense& x, int64_t start, int64_t len) {
    return test::dense_rows(x, start, start + len);
  };
  for (std::size_t b = 0; b < p.seqs.q_start.size(); ++b) {
    const int64_t q0 = p.seqs.q_start[b], nq = p.seqs.q_len[b];
    const int64_t k0 = p.seqs.kv_start[b], nk = p.seqs.kv_len[b];
    const SdpaSequences one{{0}, {nq}, {0}, {nk}};
    const Dense q = rows(p.q, q0, nq), k = rows(p.k, k0, nk), v = rows(p.v, k0, nk);
    const auto fb = sdpa_forward(q, k, v, one, opt);
    const auto gb = sdpa_backward(q, k, v, fb.o, fb.lse, rows(p.d_o, q0, nq), one, opt);
    EXPECT_EQ(fb.o.data, rows(f.o, q0, nq).data) << "sequence " << b;
    EXPECT_EQ(fb.lse.data, rows(f.lse, q0, nq).data) << "sequence " << b;
    EXPECT_EQ(gb.dq.data, rows(g.dq, q0, nq).data) << "sequence " << b;
    EXPECT_EQ(gb.dk.data, rows(g.dk, k0, nk).data) << "sequence " << b;
    EXPECT_EQ(gb.dv.data, rows(g.dv, k0, nk).data) << "sequence " << b;
  }
}

// GQA and MQA equal plain multi-head attention on kv heads repeated per group; the grouped dk,
// dv are the repeated heads' gradients summed over the group.
TEST_P(SdpaRandom, GroupedEqualsRepeatedKvHeads) {
  const SdpaOptions opt{0.7, GetParam()};
  for (int64_t hk : {1, 2}) {
    const int64_t h = 4, group = h / hk;
    const Problem p = ragged_problem(h, hk);
    auto repeat = [&](const Dense& x) {
      Dense r({x.dims[0], h, x.dims[2]});
      for (int64_t t = 0; t < x.dims[0]; ++t)
        for (int64_t j = 0; j < h; ++j)
          for (int64_t c = 0; c < x.dims[2]; ++c) at(r, t, j, c) = at(x, t, j / group, c);
      return r;
    };
    const Dense k = repeat(p.k), v = repeat(p.v);
    const auto f = sdpa_forward(p.q, p.k, p.v, p.seqs, opt);
    const auto fr = sdpa_forward(p.q, k, v, p.seqs, opt);
    const auto g = sdpa_backward(p.q, p.k, p.v, f.o, f.lse, p.d_o, p.seqs, opt);
    const auto gr = sdpa_backward(p.q, k, v, fr.o, fr.lse, p.d_o, p.seqs, opt);
    for (int64_t t = 0; t < p.q.dims[0]; ++t) {
      if (!in_rows(p.seqs.q_start, p.seqs.q_len, t)) continue;
      for (int64_t j = 0; j < h; ++j) {
        EXPECT_EQ(at(f.lse, t, j), at(fr.lse, t, j));
        for (int64_t c = 0; c < 2; ++c) EXPECT_EQ(at(f.o, t, j, c), at(fr.o, t, j, c));
        for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(at(g.dq, t, j, c), at(gr.dq, t, j, c));
      }
    }
    for (int64_t t = 0; t < p.k.dims[0]; ++t) {
      if (!in_rows(p.seqs.kv_start, p.seqs.kv_len, t)) continue;
      for (int64_t j = 0; j < hk; ++j) {
        for (int64_t c = 0; c < 3; ++c) {
          double sum = 0.0;
          for (int64_t r = j * group; r < (j + 1) * group; ++r) sum += at(gr.dk, t, r, c);
          EXPECT_NEAR(at(g.dk, t, j, c), sum, 1e-13);
        }
        for (int64_t c = 0; c < 2; ++c) {
          double sum = 0.0;
          for (int64_t r = j * group; r < (j + 1) * group; ++r) sum += at(gr.dv, t, r, c);
          EXPECT_NEAR(at(g.dv, t, j, c), sum, 1e-13);
        }
      }
    }
  }
}

// --- Backward against central finite differences of sum(dO * o) ---

TEST_P(SdpaRandom, BackwardMatchesFiniteDifferences) {
  const SdpaOptions opt{0.7, GetParam()};
  Problem p = ragged_problem(4, 2);
  const auto f = sdpa_forward(p.q, p.k, p.v, p.seqs, opt);
  const auto g = sdpa_backward(p.q, p.k, p.v, f.o, f.lse, p.d_o, p.seqs, opt);
  const auto forward_loss = [&] {
    return loss(sdpa_forward(p.q, p.k, p.v, p.seqs, opt).o, p.d_o, p.seqs);
  };
  // Padding rows have NaN gradients; the rows of a sequence match central differences.
  auto check = [&](Dense& x, const Dense& grad, const std::vector<int64_t>& start,
                   const std::vector<int64_t>& len, const char* name) {
    const std::vector<double> fd = test::oracle::central_difference(x.data, forward_loss);
    const int64_t row = count(x.dims) / x.dims[0];
    int checked = 0;
    for (int64_t t = 0; t < x.dims[0]; ++t) {
      if (!in_rows(start, len, t)) continue;
      for (int64_t e = t * row; e < (t + 1) * row; ++e) {
        EXPECT_NEAR(grad.data[e], fd[e], 1e-6 * std::max(1.0, std::abs(fd[e])))
            << name << " element " << e << " (row " << t << ")";
        ++checked;
      }
    }
    EXPECT_GT(checked, 0);
  };
  check(p.q, g.dq, p.seqs.q_start, p.seqs.q_len, "dq");
  check(p.k, g.dk, p.seqs.kv_start, p.seqs.kv_len, "dk");
  check(p.v, g.dv, p.seqs.kv_start, p.seqs.kv_len, "dv");

  // Rows that see no key, and keys no query sees, get exactly zero.
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t c = 0; c < 3; ++c) {
      EXPECT_EQ(at(g.dq, 10, h, c), 0.0);  // seq 3 has no keys
      EXPECT_EQ(at(g.dq, 11, h, c), 0.0);
      if (opt.causal) {
        EXPECT_EQ(at(g.dq, 5, h, c), 0.0);  // seq 2 row 0 is fully masked
      }
    }
  for (int64_t c = 0; c < 2; ++c) EXPECT_EQ(at(g.dv, 6, 0, c), 0.0);  // seq 1 has no queries
}

INSTANTIATE_TEST_SUITE_P(CausalAndNot, SdpaRandom, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Causal" : "NonCausal"; });

TEST(Sdpa, PaddingRowsAreNaN) {
  const Problem p = ragged_problem(4, 2);
  const SdpaOptions opt{p.scale, true};
  const auto f = sdpa_forward(p.q, p.k, p.v, p.seqs, opt);
  const auto g = sdpa_backward(p.q, p.k, p.v, f.o, f.lse, p.d_o, p.seqs, opt);
  for (int64_t t = 0; t < 13; ++t) {
    const bool pad = std::find(kPadQ.begin(), kPadQ.end(), t) != kPadQ.end();
    for (int64_t h = 0; h < 4; ++h) {
      EXPECT_EQ(std::isnan(at(f.lse, t, h)), pad) << "lse row " << t;
      for (int64_t c = 0; c < 2; ++c) EXPECT_EQ(std::isnan(at(f.o, t, h, c)), pad) << t;
      for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(std::isnan(at(g.dq, t, h, c)), pad) << t;
    }
  }
  for (int64_t t = 0; t < 12; ++t) {
    const bool pad = std::find(kPadKv.begin(), kPadKv.end(), t) != kPadKv.end();
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(std::isnan(at(g.dk, t, h, c)), pad) << t;
      for (int64_t c = 0; c < 2; ++c) EXPECT_EQ(std::isnan(at(g.dv, t, h, c)), pad) << t;
    }
  }
  EXPECT_EQ(at(f.lse, 5, 0), -kInf);  // fully masked, not padding
}

// --- sequences_from_cu_seqlens ---

TEST(Sdpa, SequencesFromCuSeqlens) {
  const auto s = sequences_from_cu_seqlens({2, 5, 5, 9}, {0, 4, 7, 7});
  EXPECT_EQ(s.q_start, (std::vector<int64_t>{2, 5, 5}));
  EXPECT_EQ(s.q_len, (std::vector<int64_t>{3, 0, 4}));
  EXPECT_EQ(s.kv_start, (std::vector<int64_t>{0, 4, 7}));
  EXPECT_EQ(s.kv_len, (std::vector<int64_t>{4, 3, 0}));
  EXPECT_TRUE(sequences_from_cu_seqlens({3}, {0}).q_start.empty());
}

// --- Every InvalidArgument path: the message names the argument ---

TEST(SdpaInvalid, CuSeqlens) {
  expect_invalid([] { sequences_from_cu_seqlens({0, 1}, {0}); }, "same size");
  expect_invalid([] { sequences_from_cu_seqlens({}, {}); }, "B + 1 >= 1");
  expect_invalid([] { sequences_from_cu_seqlens({0, 3, 2}, {0, 1, 2}); }, "cu_q[2]");
  expect_invalid([] { sequences_from_cu_seqlens({0, 1, 2}, {0, 3, 2}); }, "cu_kv[2]");
  expect_invalid([] { sequences_from_cu_seqlens({-1, 1}, {0, 1}); }, "cu_q[0]");
  expect_invalid([] { sequences_from_cu_seqlens({0, 1}, {-2, 1}); }, "cu_kv[0]");
}

TEST(SdpaInvalid, Forward) {
  const Dense q = random_dense_signed({4, 2, 3}), k = random_dense_signed({5, 1, 3}),
              v = random_dense_signed({5, 1, 2});
  const SdpaSequences ok{{0}, {4}, {0}, {5}};
  const SdpaOptions opt{0.5, true};
  auto fwd = [&](const Dense& q2, const Dense& k2, const Dense& v2, const SdpaSequences& s,
                 SdpaOptions o) { return [=] { sdpa_forward(q2, k2, v2, s, o); }; };
  ASSERT_NO_THROW(sdpa_forward(q, k, v, ok, opt));

  expect_invalid(fwd(Dense({4, 6}), k, v, ok, opt), "q must be rank 3");
  expect_invalid(fwd(q, Dense({5, 3}), v, ok, opt), "k must be rank 3");
  expect_invalid(fwd(q, k, Dense({5, 1, 2, 1}), ok, opt), "v must be rank 3");
  Dense short_q = q;
  short_q.data.pop_back();
  expect_invalid(fwd(short_q, k, v, ok, opt), "q.data");
  Dense neg = q;
  neg.dims = {-4, 2, -3};
  expect_invalid(fwd(neg, k, v, ok, opt), "q.dims must be >= 0");
  expect_invalid(fwd(q, random_dense_signed({5, 1, 4}), v, ok, opt), "k.dims[2]");
  expect_invalid(fwd(q, k, random_dense_signed({6, 1, 2}), ok, opt), "v.dims[0:2]");
  expect_invalid(fwd(random_dense_signed({4, 3, 3}), random_dense_signed({5, 2, 3}),
                     random_dense_signed({5, 2, 2}), ok, opt),
                 "multiple of k.dims[1]");
  expect_invalid(fwd(q, Dense({5, 0, 3}), Dense({5, 0, 2}), ok, opt), "k.dims[1]");
  expect_invalid(fwd(q, k, v, ok, {std::nan(""), true}), "opt.scale");
  expect_invalid(fwd(q, k, v, ok, {kInf, false}), "opt.scale");

  expect_invalid(fwd(q, k, v, {{0}, {4}, {0}, {}}, opt), "seqs.kv_len");
  expect_invalid(fwd(q, k, v, {{0, 1}, {4}, {0}, {5}}, opt), "same size");
  expect_invalid(fwd(q, k, v, {{0}, {-1}, {0}, {5}}, opt), "seqs.q_len[0]");
  expect_invalid(fwd(q, k, v, {{0}, {4}, {0}, {-5}}, opt), "seqs.kv_len[0]");
  expect_invalid(fwd(q, k, v, {{-1}, {4}, {0}, {5}}, opt), "seqs.q_start[0]");
  expect_invalid(fwd(q, k, v, {{0}, {4}, {-1}, {5}}, opt), "seqs.kv_start[0]");
  expect_invalid(fwd(q, k, v, {{0, 1}, {1, 4}, {0, 1}, {1, 1}}, opt), "sequence 1 (seqs.q_start");
  expect_invalid(fwd(q, k, v, {{0, 1}, {1, 1}, {0, 4}, {1, 2}}, opt), "sequence 1 (seqs.kv_start");
  const int64_t huge = std::numeric_limits<int64_t>::max();
  expect_invalid(fwd(q, k, v, {{huge}, {1}, {0}, {1}}, opt), "runs past the end of q");
  expect_invalid(fwd(q, k, v, {{2, 0}, {2, 3}, {0, 2}, {2, 2}}, opt),
                 "sequences 0 and 1 overlap in q rows");
  expect_invalid(fwd(q, k, v, {{0, 3, 1}, {1, 1, 1}, {4, 0, 1}, {1, 2, 3}}, opt),
                 "sequences 1 and 2 overlap in k/v rows");
  // Empty sequences own no rows, so they overlap nothing.
  EXPECT_NO_THROW(sdpa_forward(q, k, v, {{0, 2, 4}, {4, 0, 0}, {0, 3, 5}, {5, 0, 0}}, opt));
}

TEST(SdpaInvalid, Backward) {
  const Dense q = random_dense_signed({4, 2, 3}), k = random_dense_signed({5, 1, 3}),
              v = random_dense_signed({5, 1, 2}), d_o = random_dense_signed({4, 2, 2});
  const SdpaSequences ok{{0}, {4}, {0}, {5}};
  const SdpaOptions opt{0.5, false};
  const auto f = sdpa_forward(q, k, v, ok, opt);
  auto bwd = [&](const Dense& o, const Dense& lse, const Dense& dout) {
    return [=] { sdpa_backward(q, k, v, o, lse, dout, ok, opt); };
  };
  ASSERT_NO_THROW(bwd(f.o, f.lse, d_o)());
  expect_invalid(bwd(Dense({4, 2, 3}), f.lse, d_o), "o.dims must be [Tq, H, Dv]");
  expect_invalid(bwd(f.o, Dense({4, 2, 1}), d_o), "lse must be rank 2");
  expect_invalid(bwd(f.o, Dense({4, 1}), d_o), "lse.dims must be [Tq, H]");
  expect_invalid(bwd(f.o, f.lse, Dense({3, 2, 2})), "d_o.dims");
  // The shared checks run in the backward too, under its own name.
  expect_invalid(
      [&] {
        sdpa_backward(q, k, v, f.o, f.lse, d_o, {{0}, {5}, {0}, {5}}, opt);
      },
      "sdpa_backward: sequence 0 (seqs.q_start");
}

}  // namespace
}  // namespace eagle::reference
