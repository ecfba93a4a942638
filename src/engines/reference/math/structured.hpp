// Reference semantics of the structured operations: reductions, softmax, normalizations, matmul,
// embedding lookup and cross entropy, over Dense tensors. Bad shapes, arguments or data (an id or
// a target out of range, as torch refuses them) throw InvalidArgument naming the argument, the
// element and the rule; the engine's run() turns that into a refusal that explain() reports.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engines/reference/math/dense.hpp"

namespace eagle::reference {

// Reduces `axes` of x (negative counts from the end; empty means every axis). Modes: sum, mean,
// max, min, prod, l2 (sqrt of the sum of squares), amax (max of abs). NaN propagates, max and min
// included. Over no elements: sum, l2 and amax give 0, prod 1, mean NaN, max -inf, min +inf.
// keepdim keeps each reduced axis as size 1. An integer x reduces exactly (an integer result):
// sum and prod wrap (two's complement), max, min and amax are exact (amax of INT64_MIN wraps to
// itself, like abs), mean is the exact mean truncated toward zero; l2, and max, min and mean over
// no elements, take the real path (the output dtype then saturates -inf, +inf, NaN).
Dense reduce(const Dense& x, std::string_view mode, const std::vector<int>& axes, bool keepdim);

// Softmax along `axis` (negative counts from the end), stabilised by the lane's max; log = true
// gives log_softmax. A lane of all -inf gives NaN, as 0/0 would.
Dense softmax(const Dense& x, int axis, bool log);

struct NormOut {
  Dense y, mean, inv_std;
};
// Normalizes over the trailing normalized_ndim dims of x (1 <= normalized_ndim <= x's rank):
// y = (x - mean) * inv_std * scale + bias, inv_std = 1 / sqrt(biased variance + epsilon).
// scale and bias may be null; otherwise their dims are exactly the trailing dims. mean and inv_std
// have x's leading dims.
NormOut layer_norm(const Dense& x, const Dense* scale, const Dense* bias, int normalized_ndim,
                   double epsilon);

struct RmsOut {
  Dense y, inv_rms;
};
// As layer_norm without centering: y = x * inv_rms * scale + bias,
// inv_rms = 1 / sqrt(mean(x^2) + epsilon).
RmsOut rms_norm(const Dense& x, const Dense* scale, const Dense* bias, int normalized_ndim,
                double epsilon);

// a [..., M, K] @ b [..., K, N] -> [..., M, N]; both at least 2-D, batch dims broadcast
// numpy-style. bias (may be null) broadcasts to the result, e.g. dims [N].
Dense matmul(const Dense& a, const Dense& b, const Dense* bias);

// Rows of table [V, D] picked by ids (laid out as ids_dims) -> ids_dims + [D]. An id outside
// [0, V) is refused (InvalidArgument naming the first one).
Dense embedding(const Dense& table, const std::vector<int64_t>& ids, const Dims& ids_dims);

struct CrossEntropyOut {
  Dense loss;
  Dense lse;
};
// logits [N, C], targets [N]. Per row: lse = logsumexp(logits),
// loss = (1 - ls) * (lse - x[t]) + ls * (lse - mean_c x[c]). A row whose target is ignore_index
// has loss 0 and does not count; any other target outside [0, C) is refused (InvalidArgument
// naming the first one, its value and the range).
// reduction: "none" -> loss [N]; "sum" -> loss []; "mean" -> sum / counted rows (NaN if none).
// lse is always [N]. label_smoothing must lie in [0, 1].
CrossEntropyOut cross_entropy(const Dense& logits, const std::vector<int64_t>& targets,
                              int64_t ignore_index, double label_smoothing,
                              std::string_view reduction);

}  // namespace eagle::reference
