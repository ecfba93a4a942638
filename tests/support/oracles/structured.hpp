// Float64 oracles of the structured ops, written from their definitions with plain loops (never
// the reference engine's code). Inputs and outputs are contiguous row-major Dense tensors.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "dense.hpp"

namespace eagle::test::oracle {

// Reduction of x over `axes` (negative counts from the end; empty: every axis); keepdim keeps
// them as 1. Modes: sum, mean, max, min, prod, l2 (sqrt of the sum of squares), amax (max |x|).
// A NaN in a fold gives NaN.
Dense reduce(const Dense& x, std::string_view mode, std::vector<int64_t> axes, bool keepdim);

// Softmax along `axis`, exp(x) / sum(exp(x)), or x - log(sum(exp(x))) when `log`. Unshifted
// (the implementations under test subtract the max): keep inputs moderate, |x| < 50.
Dense softmax(const Dense& x, int64_t axis, bool log);

// Normalization over the last `normalized_ndim` dims; scale and bias (may be null) have those
// dims. Statistics have the leading dims.
struct Norm {
  Dense y;
  Dense mean;  // layer_norm only
  Dense inv;   // 1 / sqrt(variance + eps), or 1 / sqrt(mean square + eps) for rms_norm
};
// Two-pass mean and biased variance.
Norm layer_norm(const Dense& x, const Dense* scale, const Dense* bias, int normalized_ndim,
                double eps);
Norm rms_norm(const Dense& x, const Dense* scale, const Dense* bias, int normalized_ndim,
              double eps);

// a [..., M, K] @ b [..., K, N] with numpy broadcasting of the batch dims, plus bias (may be
// null) broadcast against the result [..., M, N]. A rank-1 b is not supported.
Dense matmul(const Dense& a, const Dense& b, const Dense* bias = nullptr);

// Cross entropy of logits [N, C] against class targets [N]: per row lse - x[target], with label
// smoothing s: (1 - s) * nll + s * (lse - mean(x)). Rows whose target is ignore_index give 0 and
// are not counted; a target outside [0, C) gives NaN. reduction: none ([N]), sum or mean ([]; a
// mean over no counted row is NaN). lse [N] is log(sum(exp(x))) of every row.
struct CrossEntropy {
  Dense loss, lse;
};
CrossEntropy cross_entropy(const Dense& logits, const std::vector<int64_t>& targets,
                           int64_t ignore_index, double label_smoothing,
                           std::string_view reduction);

}  // namespace eagle::test::oracle
