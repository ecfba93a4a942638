#include "engines/reference/math/structured_grad.hpp"

#include <cmath>
#include <string>

#include "eagle/core/error.hpp"
#include "engines/reference/math/lanes.hpp"
#include "engines/reference/math/pointwise.hpp"

namespace eagle::reference {
namespace {

using lanes::for_each_lane;
using lanes::Lane;
using lanes::str;

void require_same_dims(std::string_view op, const char* a, const Dense& x, const char* b,
                       const Dense& y) {
  if (x.dims != y.dims)
    throw InvalidArgument(str(op) + ": " + a + " dims " + format_dims(x.dims) + " must equal " + b +
                          " dims " + format_dims(y.dims));
}

void require_dims(std::string_view op, const char* name, const Dense& t, const Dims& dims,
                  const std::string& what) {
  if (t.dims != dims)
    throw InvalidArgument(str(op) + ": " + name + " dims " + format_dims(t.dims) + " must be " +
                          what + " " + format_dims(dims));
}

}  // namespace

Dense softmax_bwd(const Dense& y, const Dense& dy, int axis, bool log) {
  require_same_dims("softmax_bwd", "dy", dy, "y", y);
  Dense dx(y.dims);
  const std::size_t k = lanes::resolve_axis("softmax_bwd", "axis", axis, y.dims);
  for_each_lane(lanes::lanes_along(y.dims, k), [&](int64_t, Lane l) {
    double s = 0;
    for (int64_t i = 0; i < l.len; ++i) s += log ? dy.data[l[i]] : dy.data[l[i]] * y.data[l[i]];
    for (int64_t i = 0; i < l.len; ++i)
      dx.data[l[i]] =
          log ? dy.data[l[i]] - std::exp(y.data[l[i]]) * s : y.data[l[i]] * (dy.data[l[i]] - s);
  });
  return dx;
}

NormGrads norm_bwd(std::string_view op, const Dense& dy, const Dense& x, const Dense* mean,
                   const Dense& inv_std, const Dense* scale, int normalized_ndim, bool bias_grad) {
  const int rank = static_cast<int>(x.dims.size());
  if (normalized_ndim < 1 || normalized_ndim > rank)
    throw InvalidArgument(str(op) + ": normalized_ndim " + str(normalized_ndim) +
                          " must be in [1, " + str(rank) + "] for x dims " + format_dims(x.dims));
  require_same_dims(op, "dy", dy, "x", x);
  const auto split = x.dims.end() - normalized_ndim;
  const Dims lead(x.dims.begin(), split), trail(split, x.dims.end());
  if (mean) require_dims(op, "mean", *mean, lead, "the leading dims of x");
  require_dims(op, mean ? "inv_variance" : "inv_rms", inv_std, lead, "the leading dims of x");
  if (scale) require_dims(op, "scale", *scale, trail, "the normalized trailing dims of x");

  const int64_t len = count(trail);
  const double n = static_cast<double>(len);
  NormGrads out{Dense(x.dims), scale ? Dense(trail) : Dense(), bias_grad ? Dense(trail) : Dense()};
  std::vector<double> g(static_cast<std::size_t>(len)), xhat(static_cast<std::size_t>(len));
  for_each_lane({count(lead), len, 1}, [&](int64_t row, Lane l) {
    const auto r = static_cast<std::size_t>(row);
    const double mu = mean ? mean->data[r] : 0.0, inv = inv_std.data[r];
    double mean_g = 0, mean_gx = 0;
    for (int64_t i = 0; i < len; ++i) {
      const auto j = static_cast<std::size_t>(i);
      xhat[j] = (x.data[l[i]] - mu) * inv;
      g[j] = scale ? dy.data[l[i]] * scale->data[j] : dy.data[l[i]];
      mean_g += g[j];
      mean_gx += g[j] * xhat[j];
      if (scale) out.dscale.data[j] += dy.data[l[i]] * xhat[j];
      if (bias_grad) out.dbias.data[j] += dy.data[l[i]];
    }
    mean_g /= n;
    mean_gx /= n;
    for (int64_t i = 0; i < len; ++i) {
      const auto j = static_cast<std::size_t>(i);
      out.dx.data[l[i]] = inv * (g[j] - (mean ? mean_g : 0.0) - xhat[j] * mean_gx);
    }
  });
  return out;
}

Dense embedding_bwd(const Dense& dy, const std::vector<int64_t>& ids, int64_t num_embeddings) {
  if (dy.dims.empty())
    throw InvalidArgument("embedding_bwd: dy dims " + format_dims(dy.dims) +
                          " must be at least 1-D [..., D]");
  const int64_t d = dy.dims.back();
  if (static_cast<int64_t>(ids.size()) * d != dy.numel())
    throw InvalidArgument("embedding_bwd: ids holds " + str(ids.size()) + " values but dy dims " +
                          format_dims(dy.dims) + " have " + str(d == 0 ? 0 : dy.numel() / d) +
                          " rows");
  if (num_embeddings < 0)
    throw InvalidArgument("embedding_bwd: num_embeddings " + str(num_embeddings) + " must be >= 0");
  for (std::size_t r = 0; r < ids.size(); ++r)
    if (ids[r] < 0 || ids[r] >= num_embeddings)
      throw InvalidArgument("embedding_bwd: ids element " + str(r) + " = " + str(ids[r]) +
                            " is outside [0, " + str(num_embeddings) + "), the rows of the table");
  Dense dtable({num_embeddings, d});
  const auto du = static_cast<std::size_t>(d);
  for (std::size_t r = 0; r < ids.size(); ++r)
    for (std::size_t j = 0; j < du; ++j)
      dtable.data[static_cast<std::size_t>(ids[r]) * du + j] += dy.data[r * du + j];
  return dtable;
}

Dense cross_entropy_bwd(const Dense& logits, const std::vector<int64_t>& targets,
                        const Dense& dloss, const Dense* lse, int64_t ignore_index,
                        double label_smoothing, std::string_view reduction) {
  if (logits.dims.size() != 2)
    throw InvalidArgument("cross_entropy_bwd: logits dims " + format_dims(logits.dims) +
                          " must be 2-D [N, C]");
  const int64_t rows = logits.dims[0], classes = logits.dims[1];
  if (static_cast<int64_t>(targets.size()) != rows)
    throw InvalidArgument("cross_entropy_bwd: targets holds " + str(targets.size()) +
                          " values but logits dims " + format_dims(logits.dims) + " have " +
                          str(rows) + " rows");
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    throw InvalidArgument("cross_entropy_bwd: label_smoothing " + str(label_smoothing) +
                          " must be in [0, 1]");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    throw InvalidArgument("cross_entropy_bwd: reduction '" + str(reduction) +
                          "' is unknown (none, sum, mean)");
  require_dims("cross_entropy_bwd", "dloss", dloss, reduction == "none" ? Dims{rows} : Dims{},
               "for reduction " + str(reduction));
  if (lse) require_dims("cross_entropy_bwd", "lse", *lse, {rows}, "[N]");
  int64_t counted = 0;
  for (std::size_t r = 0; r < targets.size(); ++r) {
    if (targets[r] == ignore_index) continue;
    if (targets[r] < 0 || targets[r] >= classes)
      throw InvalidArgument("cross_entropy_bwd: targets element " + str(r) + " = " +
                            str(targets[r]) + " is outside [0, " + str(classes) +
                            "), the classes of logits dims " + format_dims(logits.dims) +
                            " (only ignore_index = " + str(ignore_index) + " may lie outside)");
    ++counted;
  }
  Dense dlogits(logits.dims);
  for_each_lane({rows, classes, 1}, [&](int64_t r, Lane l) {
    const auto row = static_cast<std::size_t>(r);
    const int64_t t = targets[row];
    if (t == ignore_index) return;  // stays 0
    const double w = reduction == "none"  ? dloss.data[row]
                     : reduction == "sum" ? dloss.data[0]
                                          : dloss.data[0] / static_cast<double>(counted);
    const double m = lse ? lse->data[row] : lanes::lane_logsumexp(logits.data, l);
    for (int64_t c = 0; c < classes; ++c) {
      double g = std::exp(logits.data[l[c]] - m) - label_smoothing / static_cast<double>(classes);
      if (c == t) g -= 1 - label_smoothing;
      dlogits.data[l[c]] = w * g;
    }
  });
  return dlogits;
}

}  // namespace eagle::reference
