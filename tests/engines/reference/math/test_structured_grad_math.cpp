// Reference gradients of the structured ops (softmax, layer_norm, rms_norm, embedding,
// cross_entropy) against float64 central differences of their forward routines, on fresh random
// inputs, and their refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "dense.hpp"
#include "engines/reference/math/structured.hpp"
#include "engines/reference/math/structured_grad.hpp"
#include "oracles/gradient.hpp"
#include "test_util.hpp"

namespace eagle::reference {
namespace {

using test::expect_throw_with;
using test::random_dense;
namespace oracle = test::oracle;

// Central differences of float64 with step 1e-6 are good to about 1e-8 relative.
constexpr double kFdTol = 1e-7;

// sum(w * f) for a fixed random weight w: its gradient w.r.t. f's inputs is f's backward at dy = w.
double weighted_sum(const Dense& w, const Dense& f) {
  double s = 0;
  for (std::size_t i = 0; i < f.data.size(); ++i) s += w.data[i] * f.data[i];
  return s;
}

TEST(StructuredGrad, SoftmaxAndLogSoftmaxMatchFiniteDifferences) {
  for (bool log : {false, true})
    for (int axis : {-1, 0, 1}) {
      SCOPED_TRACE(std::string(log ? "log_softmax" : "softmax") + " axis " + std::to_string(axis));
      Dense x = random_dense({3, 5, 4}, -2, 2);
      const Dense dy = random_dense({3, 5, 4});
      const Dense dx = softmax_bwd(softmax(x, axis, log), dy, axis, log);
      const auto fd = oracle::central_difference(
          x.data, [&] { return weighted_sum(dy, softmax(x, axis, log)); });
      EXPECT_CLOSE(dx.data, fd, kFdTol);
    }
}

TEST(StructuredGrad, LayerNormAndRmsNormMatchFiniteDifferences) {
  for (bool centered : {true, false})
    for (int nd : {1, 2}) {
      SCOPED_TRACE(std::string(centered ? "layer_norm" : "rms_norm") + " normalized_ndim " +
                   std::to_string(nd));
      Dense x = random_dense({4, 3, 6}, -2, 2);
      const Dims trail(x.dims.end() - nd, x.dims.end());
      Dense scale = random_dense(trail, 0.5, 1.5), bias = random_dense(trail);
      const Dense dy = random_dense(x.dims);
      const double eps = 1e-3;
      auto forward = [&] {
        return centered ? layer_norm(x, &scale, &bias, nd, eps).y
                        : rms_norm(x, &scale, &bias, nd, eps).y;
      };
      const NormOut stats = centered ? layer_norm(x, &scale, &bias, nd, eps) : NormOut{};
      const RmsOut rstats = centered ? RmsOut{} : rms_norm(x, &scale, &bias, nd, eps);
      const NormGrads g = norm_bwd(centered ? "layer_norm_bwd" : "rms_norm_bwd", dy, x,
                                   centered ? &stats.mean : nullptr,
                                   centered ? stats.inv_std : rstats.inv_rms, &scale, nd, true);
      const auto loss = [&] { return weighted_sum(dy, forward()); };
      EXPECT_CLOSE(g.dx.data, oracle::central_difference(x.data, loss), kFdTol);
      EXPECT_CLOSE(g.dscale.data, oracle::central_difference(scale.data, loss), kFdTol);
      EXPECT_CLOSE(g.dbias.data, oracle::central_difference(bias.data, loss), kFdTol);
      // Without a scale: dx is the unscaled gradient and there is no dscale.
      const NormGrads plain =
          norm_bwd("norm_bwd", dy, x, centered ? &stats.mean : nullptr,
                   centered ? stats.inv_std : rstats.inv_rms, nullptr, nd, false);
      EXPECT_TRUE(plain.dscale.data.empty());
      EXPECT_TRUE(plain.dbias.data.empty());
      auto unscaled = [&] {
        return weighted_sum(dy, centered ? layer_norm(x, nullptr, nullptr, nd, eps).y
                                         : rms_norm(x, nullptr, nullptr, nd, eps).y);
      };
      EXPECT_CLOSE(plain.dx.data, oracle::central_difference(x.data, unscaled), kFdTol);
    }
}

TEST(StructuredGrad, EmbeddingSumsRowsPerIdIncludingRepeats) {
  Dense table = random_dense({5, 3});
  const std::vector<int64_t> ids = {4, 0, 4, 2, 4, 0};
  const Dense dy = random_dense({2, 3, 3});
  const Dense dt = embedding_bwd(dy, ids, 5);
  EXPECT_EQ(dt.dims, (Dims{5, 3}));
  const auto fd = oracle::central_difference(table.data, [&] {
    return weighted_sum(dy, embedding(table, ids, {2, 3}));
  });
  EXPECT_CLOSE(dt.data, fd, kFdTol);
  for (int j = 0; j < 3; ++j) EXPECT_EQ(dt.data[3 * 3 + j], 0.0) << "row 3 is never picked";
  expect_throw_with<InvalidArgument>(
      [&] {
        embedding_bwd(dy, {4, 0, 5, 2, 4, 0}, 5);
      },
      {"embedding_bwd", "ids element 2 = 5", "[0, 5)"});
  expect_throw_with<InvalidArgument>(
      [&] {
        embedding_bwd(dy, {1, 2}, 5);
      },
      {"embedding_bwd", "ids holds 2 values", "6 rows"});
}

TEST(StructuredGrad, CrossEntropyMatchesFiniteDifferencesForEveryReduction) {
  const std::vector<int64_t> targets = {2, -100, 0, 4, 1};
  for (const char* reduction : {"none", "sum", "mean"})
    for (double ls : {0.0, 0.1}) {
      SCOPED_TRACE(std::string(reduction) + " label_smoothing " + std::to_string(ls));
      Dense logits = random_dense({5, 6}, -3, 3);
      const bool none = std::string(reduction) == "none";
      const Dense dloss = random_dense(none ? Dims{5} : Dims{});
      const CrossEntropyOut fwd = cross_entropy(logits, targets, -100, ls, reduction);
      for (const Dense* lse : {static_cast<const Dense*>(nullptr), &fwd.lse}) {
        const Dense g = cross_entropy_bwd(logits, targets, dloss, lse, -100, ls, reduction);
        const auto fd = oracle::central_difference(logits.data, [&] {
          return weighted_sum(dloss, cross_entropy(logits, targets, -100, ls, reduction).loss);
        });
        EXPECT_CLOSE(g.data, fd, kFdTol);
        for (int c = 0; c < 6; ++c) EXPECT_EQ(g.data[6 + c], 0.0) << "the ignored row";
      }
    }
}

TEST(StructuredGrad, CrossEntropyRefusesWhatTheForwardRefuses) {
  const Dense logits = random_dense({2, 3});
  expect_throw_with<InvalidArgument>(
      [&] {
        cross_entropy_bwd(logits, {0, 3}, random_dense({}), nullptr, -100, 0, "mean");
      },
      {"cross_entropy_bwd", "targets element 1 = 3", "[0, 3)"});
  expect_throw_with<InvalidArgument>(
      [&] {
        cross_entropy_bwd(logits, {0, 1}, random_dense({}), nullptr, -100, 0, "none");
      },
      {"cross_entropy_bwd", "dloss dims []", "for reduction none", "[2]"});
  expect_throw_with<InvalidArgument>(
      [&] {
        cross_entropy_bwd(logits, {0, 1}, random_dense({}), nullptr, -100, 1.5, "sum");
      },
      {"label_smoothing", "[0, 1]"});
}

TEST(StructuredGrad, NormRefusesMismatchedStatistics) {
  const Dense x = random_dense({4, 6}), dy = random_dense({4, 6});
  expect_throw_with<InvalidArgument>(
      [&] { norm_bwd("layer_norm_bwd", dy, x, nullptr, random_dense({3}), nullptr, 1, false); },
      {"layer_norm_bwd", "inv_rms dims [3]", "the leading dims of x [4]"});
  expect_throw_with<InvalidArgument>(
      [&] {
        norm_bwd("rms_norm_bwd", random_dense({4, 5}), x, nullptr, random_dense({4}), nullptr, 1,
                 false);
      },
      {"rms_norm_bwd", "dy dims [4,5]", "x dims [4,6]"});
}

}  // namespace
}  // namespace eagle::reference
