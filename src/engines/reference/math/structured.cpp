#include "engines/reference/math/structured.hpp"

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "eagle/core/error.hpp"
#include "engines/reference/math/lanes.hpp"
#include "engines/reference/math/pointwise.hpp"

namespace eagle::reference {
namespace {

using namespace lanes;  // NOLINT(google-build-using-namespace): the routines' shared vocabulary

// A reduction folds pre(x) with a binary op from init, then finishes with the element count.
struct ReduceMode {
  std::string_view name, pre, combine;
  double init;
  double (*finish)(double acc, int64_t n);
};

double as_is(double acc, int64_t) {
  return acc;
}

const ReduceMode kReduceModes[] = {
    {"sum", "identity", "add", 0.0, as_is},
    {"mean", "identity", "add", 0.0,
     [](double acc, int64_t n) { return n == 0 ? kNaN : acc / static_cast<double>(n); }},
    {"max", "identity", "max", -kInf, as_is},
    {"min", "identity", "min", kInf, as_is},
    {"prod", "identity", "mul", 1.0, as_is},
    {"l2", "square", "add", 0.0, [](double acc, int64_t) { return std::sqrt(acc); }},
    {"amax", "abs", "max", 0.0, as_is},
};

// The exact mean of n integers, truncated toward zero, without overflow: each x splits into
// x / n and x % n, and the remainders carry into the quotient as they pass n.
struct ExactMean {
  int64_t q = 0, r = 0;
  void add(int64_t x, int64_t n) {
    q += x / n;
    r += x % n;
    if (r >= n) {
      r -= n;
      ++q;
    } else if (r <= -n) {
      r += n;
      --q;
    }
  }
  int64_t value() const {  // q + r / n, |r| < n, truncated toward zero
    if (q > 0 && r < 0) return q - 1;
    if (q < 0 && r > 0) return q + 1;
    return q;
  }
};

// Reduces an integer tensor exactly: sum and prod wrap (two's complement, in uint64), max and
// min are exact, amax is the largest |x| (|INT64_MIN| wraps to INT64_MIN, like abs), mean is
// ExactMean. `to` maps each element of x to its output; n elements reach each output (n > 0).
Dense reduce_exact(const Dense& x, std::string_view mode, const Dims& kept,
                   const std::vector<int64_t>& to, int64_t n) {
  const std::size_t outputs = static_cast<std::size_t>(count(kept));
  std::vector<int64_t> acc(outputs, mode == "prod" ? 1 : 0);
  std::vector<bool> seen(outputs, false);
  std::vector<ExactMean> means(mode == "mean" ? outputs : 0);
  for (std::size_t i = 0; i < x.ints.size(); ++i) {
    const std::size_t o = static_cast<std::size_t>(to[i]);
    const int64_t v = x.ints[i];
    const uint64_t magnitude = v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : uint64_t(v);
    if (mode == "sum") {
      acc[o] = static_cast<int64_t>(static_cast<uint64_t>(acc[o]) + static_cast<uint64_t>(v));
    } else if (mode == "prod") {
      acc[o] = static_cast<int64_t>(static_cast<uint64_t>(acc[o]) * static_cast<uint64_t>(v));
    } else if (mode == "max") {
      acc[o] = seen[o] ? std::max(acc[o], v) : v;
    } else if (mode == "min") {
      acc[o] = seen[o] ? std::min(acc[o], v) : v;
    } else if (mode == "amax") {
      if (!seen[o] || magnitude > static_cast<uint64_t>(acc[o]))
        acc[o] = static_cast<int64_t>(magnitude);
    } else {  // mean
      means[o].add(v, n);
    }
    seen[o] = true;
  }
  if (mode == "mean")
    for (std::size_t o = 0; o < outputs; ++o) acc[o] = means[o].value();
  return Dense::of_ints(kept, std::move(acc));
}

// layer_norm and rms_norm: the same checks and row loop, with or without centering.
NormOut normalize(std::string_view op, const Dense& x, const Dense* scale, const Dense* bias,
                  int normalized_ndim, double epsilon, bool centered) {
  const int rank = static_cast<int>(x.dims.size());
  if (normalized_ndim < 1 || normalized_ndim > rank)
    throw InvalidArgument(str(op) + ": normalized_ndim " + str(normalized_ndim) +
                          " must be in [1, " + str(rank) + "] for x dims " + format_dims(x.dims));
  if (!(epsilon >= 0))
    throw InvalidArgument(str(op) + ": epsilon " + str(epsilon) + " must be >= 0");
  const auto split = x.dims.end() - normalized_ndim;
  const Dims lead(x.dims.begin(), split), trail(split, x.dims.end());
  for (auto [param, name] : {std::pair{scale, "scale"}, std::pair{bias, "bias"}})
    if (param && param->dims != trail)
      throw InvalidArgument(str(op) + ": " + name + " dims " + format_dims(param->dims) +
                            " must equal the normalized trailing dims " + format_dims(trail) +
                            " of x dims " + format_dims(x.dims));

  NormOut out{Dense(x.dims), Dense(lead), Dense(lead)};
  const int64_t len = count(trail);
  const double n = static_cast<double>(len);
  for_each_lane({count(lead), len, 1}, [&](int64_t row, Lane l) {
    // Two passes (mean, then squared deviations) rather than E[x^2] - E[x]^2, which cancels.
    const double mean = centered ? lane_sum(x.data, l) / n : 0.0;
    double squares = 0;
    for (int64_t i = 0; i < len; ++i) squares += (x.data[l[i]] - mean) * (x.data[l[i]] - mean);
    const double inv = 1.0 / std::sqrt(squares / n + epsilon);
    for (int64_t i = 0; i < len; ++i) {
      double v = (x.data[l[i]] - mean) * inv;
      if (scale) v *= scale->data[static_cast<std::size_t>(i)];
      if (bias) v += bias->data[static_cast<std::size_t>(i)];
      out.y.data[l[i]] = v;
    }
    out.mean.data[static_cast<std::size_t>(row)] = mean;
    out.inv_std.data[static_cast<std::size_t>(row)] = inv;
  });
  return out;
}

void require_rank(std::string_view op, std::string_view name, const Dims& dims, bool at_least,
                  std::size_t rank, std::string_view form) {
  if (at_least ? dims.size() >= rank : dims.size() == rank) return;
  throw InvalidArgument(str(op) + ": " + str(name) + " dims " + format_dims(dims) + " must be " +
                        (at_least ? "at least " : "") + str(rank) + "-D " + str(form));
}

}  // namespace

Dense reduce(const Dense& x, std::string_view mode, const std::vector<int>& axes, bool keepdim) {
  const ReduceMode* m = nullptr;
  for (const auto& candidate : kReduceModes)
    if (candidate.name == mode) m = &candidate;
  if (!m)
    throw InvalidArgument("reduce: mode '" + str(mode) +
                          "' is unknown (sum, mean, max, min, prod, l2, amax)");

  const std::size_t rank = x.dims.size();
  std::vector<bool> reduced(rank, axes.empty());
  for (int axis : axes) {
    const std::size_t k = resolve_axis("reduce", "axes entry", axis, x.dims);
    if (reduced[k])
      throw InvalidArgument("reduce: axes " + format_dims(Dims(axes.begin(), axes.end())) +
                            " name axis " + str(k) + " more than once");
    reduced[k] = true;
  }
  Dims kept = x.dims, dropped;
  int64_t n = 1;
  for (std::size_t k = 0; k < rank; ++k) {
    if (!reduced[k]) {
      dropped.push_back(x.dims[k]);
      continue;
    }
    n *= x.dims[k];
    kept[k] = 1;
  }

  // Each element of x broadcasts from its output element, so the same index map gathers it.
  const auto to = broadcast_index(kept, x.dims);
  // Integers reduce exactly; over no elements max, min and mean have no integer value, and the
  // real path's -inf, +inf and NaN saturate into the output dtype (its min, its max, 0).
  if (x.integer && mode != "l2" && (n > 0 || mode == "sum" || mode == "prod")) {
    Dense out = reduce_exact(x, mode, kept, to, n);
    if (!keepdim) out.dims = dropped;
    return out;
  }
  Dense out(kept, m->init);
  const UnaryFn pre = unary_fn(m->pre);
  const BinaryFn combine = binary_fn(m->combine);
  for (std::size_t i = 0; i < x.data.size(); ++i) {
    double& acc = out.data[static_cast<std::size_t>(to[i])];
    acc = combine(acc, pre(x.data[i]));
  }
  for (double& v : out.data) v = m->finish(v, n);
  if (!keepdim) out.dims = dropped;
  return out;
}

Dense softmax(const Dense& x, int axis, bool log) {
  Dense y(x.dims);
  for_each_lane(lanes_along(x.dims, resolve_axis("softmax", "axis", axis, x.dims)),
                [&](int64_t, Lane l) {
                  const double lse = lane_logsumexp(x.data, l);
                  for (int64_t i = 0; i < l.len; ++i) {
                    const double shifted = x.data[l[i]] - lse;
                    y.data[l[i]] = log ? shifted : std::exp(shifted);
                  }
                });
  return y;
}

NormOut layer_norm(const Dense& x, const Dense* scale, const Dense* bias, int normalized_ndim,
                   double epsilon) {
  return normalize("layer_norm", x, scale, bias, normalized_ndim, epsilon, true);
}

RmsOut rms_norm(const Dense& x, const Dense* scale, const Dense* bias, int normalized_ndim,
                double epsilon) {
  NormOut n = normalize("rms_norm", x, scale, bias, normalized_ndim, epsilon, false);
  return {std::move(n.y), std::move(n.inv_std)};
}

Dense matmul(const Dense& a, const Dense& b, const Dense* bias) {
  require_rank("matmul", "a", a.dims, true, 2, "[..., M, K]");
  require_rank("matmul", "b", b.dims, true, 2, "[..., K, N]");
  const int64_t m = a.dims.end()[-2], k = a.dims.back(), n = b.dims.back();
  if (b.dims.end()[-2] != k)
    throw InvalidArgument("matmul: b dims " + format_dims(b.dims) + ": inner dimension " +
                          str(b.dims.end()[-2]) + " must equal a's last dimension " + str(k));
  const Dims a_batch(a.dims.begin(), a.dims.end() - 2), b_batch(b.dims.begin(), b.dims.end() - 2);
  Dims dims = in_context("matmul: batch dims of a dims " + format_dims(a.dims) + " and b dims " +
                             format_dims(b.dims) + " must broadcast",
                         [&] { return broadcast_dims(a_batch, b_batch); });
  const auto ia = broadcast_index(a_batch, dims), ib = broadcast_index(b_batch, dims);
  dims.insert(dims.end(), {m, n});

  Dense c(dims);
  for (std::size_t p = 0; p < ia.size(); ++p) {
    const int64_t a0 = ia[p] * m * k, b0 = ib[p] * k * n, c0 = static_cast<int64_t>(p) * m * n;
    // i, k, j order: the inner loop runs along rows of b and c; each c element still sums over
    // k in increasing order.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t kk = 0; kk < k; ++kk) {
        const double aik = a.data[static_cast<std::size_t>(a0 + i * k + kk)];
        for (int64_t j = 0; j < n; ++j)
          c.data[static_cast<std::size_t>(c0 + i * n + j)] +=
              aik * b.data[static_cast<std::size_t>(b0 + kk * n + j)];
      }
  }
  if (bias) {
    const auto ib2 = in_context("matmul: bias dims " + format_dims(bias->dims) +
                                    " must broadcast to the result dims " + format_dims(dims),
                                [&] { return broadcast_index(bias->dims, dims); });
    for (std::size_t i = 0; i < c.data.size(); ++i)
      c.data[i] += bias->data[static_cast<std::size_t>(ib2[i])];
  }
  return c;
}

Dense embedding(const Dense& table, const std::vector<int64_t>& ids, const Dims& ids_dims) {
  require_rank("embedding", "table", table.dims, false, 2, "[V, D]");
  if (static_cast<int64_t>(ids.size()) != count(ids_dims))
    throw InvalidArgument("embedding: ids holds " + str(ids.size()) + " values but ids_dims " +
                          format_dims(ids_dims) + " need " + str(count(ids_dims)));
  const int64_t v = table.dims[0], d = table.dims[1];
  // Like torch: an id that names no row is an error, not a row of made-up values.
  for (std::size_t r = 0; r < ids.size(); ++r)
    if (ids[r] < 0 || ids[r] >= v)
      throw InvalidArgument("embedding: ids element " + str(r) + " = " + str(ids[r]) +
                            " is outside [0, " + str(v) + "), the rows of table dims " +
                            format_dims(table.dims));
  Dims dims = ids_dims;
  dims.push_back(d);
  Dense y(dims);
  for (std::size_t r = 0; r < ids.size(); ++r)
    for (int64_t j = 0; j < d; ++j)
      y.data[r * static_cast<std::size_t>(d) + static_cast<std::size_t>(j)] =
          table.data[static_cast<std::size_t>(ids[r] * d + j)];
  return y;
}

CrossEntropyOut cross_entropy(const Dense& logits, const std::vector<int64_t>& targets,
                              int64_t ignore_index, double label_smoothing,
                              std::string_view reduction) {
  require_rank("cross_entropy", "logits", logits.dims, false, 2, "[N, C]");
  const int64_t rows = logits.dims[0], classes = logits.dims[1];
  if (static_cast<int64_t>(targets.size()) != rows)
    throw InvalidArgument("cross_entropy: targets holds " + str(targets.size()) +
                          " values but logits dims " + format_dims(logits.dims) + " have " +
                          str(rows) + " rows");
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    throw InvalidArgument("cross_entropy: label_smoothing " + str(label_smoothing) +
                          " must be in [0, 1]");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    throw InvalidArgument("cross_entropy: reduction '" + str(reduction) +
                          "' is unknown (none, sum, mean)");
  // Like torch: a target that names no class is an error, not a NaN loss.
  for (std::size_t r = 0; r < targets.size(); ++r)
    if (targets[r] != ignore_index && (targets[r] < 0 || targets[r] >= classes))
      throw InvalidArgument("cross_entropy: targets element " + str(r) + " = " + str(targets[r]) +
                            " is outside [0, " + str(classes) + "), the classes of logits dims " +
                            format_dims(logits.dims) +
                            " (only ignore_index = " + str(ignore_index) + " may lie outside)");

  // A zero weight drops its term outright, so an infinite logit it would multiply is no NaN.
  const auto weighted = [](double w, double v) { return w == 0 ? 0.0 : w * v; };
  CrossEntropyOut out{Dense({rows}), Dense({rows})};
  int64_t counted = 0;
  for_each_lane({rows, classes, 1}, [&](int64_t r, Lane l) {
    const std::size_t row = static_cast<std::size_t>(r);
    const double lse = out.lse.data[row] = lane_logsumexp(logits.data, l);
    const int64_t t = targets[row];
    if (t == ignore_index) return;  // loss stays 0
    ++counted;
    const double mean_logit = lane_sum(logits.data, l) / static_cast<double>(classes);
    out.loss.data[row] = weighted(1 - label_smoothing, lse - logits.data[l[t]]) +
                         weighted(label_smoothing, lse - mean_logit);
  });

  if (reduction == "none") return out;
  double total = 0;
  for (double v : out.loss.data) total += v;
  if (reduction == "mean") total = counted == 0 ? kNaN : total / static_cast<double>(counted);
  out.loss = Dense(Dims{}, total);
  return out;
}

}  // namespace eagle::reference
