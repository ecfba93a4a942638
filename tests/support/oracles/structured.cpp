#include "oracles/structured.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace eagle::test::oracle {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The row-major multi-index of flat element i of `dims`.
std::vector<int64_t> unflatten(int64_t i, const Dims& dims) {
  std::vector<int64_t> idx(dims.size());
  for (std::size_t d = dims.size(); d-- > 0;) {
    idx[d] = dims[d] == 0 ? 0 : i % dims[d];
    i = dims[d] == 0 ? 0 : i / dims[d];
  }
  return idx;
}

// The flat element of `dims` at `idx`, where an index broadcasts over a dim of extent 1 and the
// index is right-aligned to `dims`.
int64_t flatten_broadcast(const std::vector<int64_t>& idx, const Dims& dims) {
  int64_t flat = 0;
  const std::size_t lead = idx.size() - dims.size();
  for (std::size_t d = 0; d < dims.size(); ++d)
    flat = flat * dims[d] + (dims[d] == 1 ? 0 : idx[lead + d]);
  return flat;
}

double fold(std::string_view mode, const std::vector<double>& e) {
  for (double x : e)
    if (std::isnan(x)) return kNaN;
  double r = mode == "prod" ? 1 : mode == "max" ? -kInf : mode == "min" ? kInf : 0;
  for (double x : e) {
    if (mode == "sum" || mode == "mean") r += x;
    if (mode == "prod") r *= x;
    if (mode == "max") r = x > r ? x : r;
    if (mode == "min") r = x < r ? x : r;
    if (mode == "l2") r += x * x;
    if (mode == "amax") r = std::fabs(x) > r ? std::fabs(x) : r;
  }
  if (mode == "mean") return e.empty() ? kNaN : r / static_cast<double>(e.size());
  if (mode == "l2") return std::sqrt(r);
  return r;
}

}  // namespace

Dense reduce(const Dense& x, std::string_view mode, std::vector<int64_t> axes, bool keepdim) {
  const std::size_t rank = x.dims.size();
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) reduced[a < 0 ? a + static_cast<int64_t>(rank) : a] = true;
  Dims kept, out_dims;
  for (std::size_t d = 0; d < rank; ++d) {
    if (!reduced[d]) kept.push_back(x.dims[d]);
    if (!reduced[d] || keepdim) out_dims.push_back(reduced[d] ? 1 : x.dims[d]);
  }
  Dense out(out_dims);
  std::vector<std::vector<double>> folded(out.data.size());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const std::vector<int64_t> idx = unflatten(i, x.dims);
    int64_t o = 0;
    for (std::size_t d = 0; d < rank; ++d)
      if (!reduced[d]) o = o * x.dims[d] + idx[d];
    folded[o].push_back(x.data[i]);
  }
  for (std::size_t o = 0; o < folded.size(); ++o) out.data[o] = fold(mode, folded[o]);
  return out;
}

Dense softmax(const Dense& x, int64_t axis, bool log) {
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dims[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.dims[d];
  const int64_t n = x.dims[axis];
  Dense y(x.dims);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const auto at = [&](int64_t j) { return (o * n + j) * inner + i; };
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(x.data[at(j)]);
      for (int64_t j = 0; j < n; ++j)
        y.data[at(j)] = log ? x.data[at(j)] - std::log(sum) : std::exp(x.data[at(j)]) / sum;
    }
  return y;
}

namespace {

// x as rows of the trailing `normalized_ndim` dims; the statistics' dims are the leading ones.
struct Rows {
  int64_t count = 1, width = 1;
  Dims stat_dims;
};
Rows rows(const Dense& x, int normalized_ndim) {
  Rows r;
  const std::size_t lead = x.dims.size() - static_cast<std::size_t>(normalized_ndim);
  for (std::size_t d = 0; d < x.dims.size(); ++d) {
    if (d < lead) {
      r.count *= x.dims[d];
      r.stat_dims.push_back(x.dims[d]);
    } else {
      r.width *= x.dims[d];
    }
  }
  return r;
}

}  // namespace

Norm layer_norm(const Dense& x, const Dense* scale, const Dense* bias, int normalized_ndim,
                double eps) {
  const Rows r = rows(x, normalized_ndim);
  Norm n{Dense(x.dims), Dense(r.stat_dims), Dense(r.stat_dims)};
  for (int64_t row = 0; row < r.count; ++row) {
    const double* v = x.data.data() + row * r.width;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < r.width; ++i) mean += v[i];
    mean /= static_cast<double>(r.width);
    for (int64_t i = 0; i < r.width; ++i) var += (v[i] - mean) * (v[i] - mean);
    var /= static_cast<double>(r.width);
    n.mean.data[row] = mean;
    n.inv.data[row] = 1 / std::sqrt(var + eps);
    for (int64_t i = 0; i < r.width; ++i) {
      double y = (v[i] - mean) * n.inv.data[row];
      if (scale) y *= scale->data[i];
      if (bias) y += bias->data[i];
      n.y.data[row * r.width + i] = y;
    }
  }
  return n;
}

Norm rms_norm(const Dense& x, const Dense* scale, const Dense* bias, int normalized_ndim,
              double eps) {
  const Rows r = rows(x, normalized_ndim);
  Norm n{Dense(x.dims), Dense(), Dense(r.stat_dims)};
  for (int64_t row = 0; row < r.count; ++row) {
    const double* v = x.data.data() + row * r.width;
    double ms = 0;
    for (int64_t i = 0; i < r.width; ++i) ms += v[i] * v[i];
    ms /= static_cast<double>(r.width);
    n.inv.data[row] = 1 / std::sqrt(ms + eps);
    for (int64_t i = 0; i < r.width; ++i) {
      double y = v[i] * n.inv.data[row];
      if (scale) y *= scale->data[i];
      if (bias) y += bias->data[i];
      n.y.data[row * r.width + i] = y;
    }
  }
  return n;
}

Dense matmul(const Dense& a, const Dense& b, const Dense* bias) {
  if (a.dims.size() < 2 || b.dims.size() < 2)
    throw std::invalid_argument("oracle::matmul: a and b must be at least 2-D");
  const int64_t M = a.dims[a.dims.size() - 2], K = a.dims.back(), N = b.dims.back();
  const Dims a_batch(a.dims.begin(), a.dims.end() - 2), b_batch(b.dims.begin(), b.dims.end() - 2);
  Dims batch(std::max(a_batch.size(), b_batch.size()));
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const std::size_t ai = i + a_batch.size(), bi = i + b_batch.size();
    const int64_t x = ai < batch.size() ? 1 : a_batch[ai - batch.size()];
    const int64_t y = bi < batch.size() ? 1 : b_batch[bi - batch.size()];
    batch[i] = x == 1 ? y : x;
  }
  Dims out_dims = batch;
  out_dims.push_back(M);
  out_dims.push_back(N);
  Dense c(out_dims);
  for (int64_t e = 0; e < c.numel(); ++e) {
    const std::vector<int64_t> idx = unflatten(e, out_dims);
    const int64_t i = idx[idx.size() - 2], j = idx.back();
    std::vector<int64_t> ai(idx), bi(idx);
    double s = bias ? bias->data[flatten_broadcast(idx, bias->dims)] : 0.0;
    for (int64_t k = 0; k < K; ++k) {
      ai[ai.size() - 2] = i, ai.back() = k;
      bi[bi.size() - 2] = k, bi.back() = j;
      s += a.data[flatten_broadcast(ai, a.dims)] * b.data[flatten_broadcast(bi, b.dims)];
    }
    c.data[e] = s;
  }
  return c;
}

CrossEntropy cross_entropy(const Dense& logits, const std::vector<int64_t>& targets,
                           int64_t ignore_index, double label_smoothing,
                           std::string_view reduction) {
  const int64_t rows = logits.dims[0], classes = logits.dims[1];
  CrossEntropy out{Dense({rows}), Dense({rows})};
  double total = 0;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double* x = logits.data.data() + r * classes;
    double sum = 0, mean = 0;
    for (int64_t c = 0; c < classes; ++c) {
      sum += std::exp(x[c]);
      mean += x[c] / static_cast<double>(classes);
    }
    out.lse.data[r] = std::log(sum);
    const int64_t t = targets[r];
    double loss = 0;
    if (t == ignore_index) {
      loss = 0;
    } else if (t < 0 || t >= classes) {
      loss = kNaN;
      ++counted;
    } else {
      const double nll = out.lse.data[r] - x[t];
      loss = (1 - label_smoothing) * nll + label_smoothing * (out.lse.data[r] - mean);
      ++counted;
    }
    out.loss.data[r] = loss;
    total += loss;
  }
  if (reduction == "sum") out.loss = make_dense({}, {total});
  if (reduction == "mean") out.loss = make_dense({}, {counted ? total / counted : kNaN});
  return out;
}

}  // namespace eagle::test::oracle
