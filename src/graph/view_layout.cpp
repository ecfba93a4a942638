#include "graph/view_layout.hpp"

#include <algorithm>
#include <utility>

#include "eagle/core/shape.hpp"

namespace eagle::detail {

namespace {

// Whether distinct indices of `v` name distinct elements: its dims of more than one element,
// innermost stride first, each step past the whole extent of the dims inside it.
bool injective(const NodeArgInfo& v) {
  if (v.strides.empty()) return true;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (std::size_t i = 0; i < v.shape.size(); ++i)
    if (v.shape[i] > 1) dims.emplace_back(v.strides[i], v.shape[i]);
  std::sort(dims.begin(), dims.end());
  int64_t extent = 1;  // elements spanned by the dims so far
  for (const auto& [stride, size] : dims) {
    if (stride < extent) return false;
    extent = stride * (size - 1) + extent;
  }
  return true;
}

}  // namespace

ViewLayout view_layout(const NodeArgInfo& v) {
  if (v.strides.empty()) return {v.bytes, 0};
  const auto item = static_cast<int64_t>(itemsize(v.dtype));
  int64_t run = 1;  // elements of the contiguous innermost dims
  int k = static_cast<int>(v.shape.size()) - 1;
  for (; k >= 0 && (v.shape[k] == 1 || v.strides[k] == run); --k) run *= v.shape[k];
  if (k < 0) return {v.bytes, 0};
  const int64_t period = v.strides[k];
  if (period < run) return {};
  for (int j = k; j >= 0; --j)
    if (v.shape[j] > 1 && (v.strides[j] <= 0 || v.strides[j] % period != 0)) return {};
  return {run * item, period * item};
}

bool views_apart(int64_t a0, int64_t a_bytes, ViewLayout la, int64_t b0, int64_t b_bytes,
                 ViewLayout lb) {
  if (a0 + a_bytes <= b0 || b0 + b_bytes <= a0) return true;
  if (la.run < 0 || lb.run < 0 || la.period == 0 || la.period != lb.period) return false;
  // Modulo the period, b's blocks start d bytes after a's: apart when each fits in the gap.
  const int64_t d = ((b0 - a0) % la.period + la.period) % la.period;
  return d >= la.run && la.period - d >= lb.run;
}

bool views_tile(const std::vector<NodeArgInfo>& views, int64_t buffer_bytes) {
  int64_t covered = 0;
  for (std::size_t i = 0; i < views.size(); ++i) {
    const NodeArgInfo& v = views[i];
    if (v.byte_offset < 0 || v.byte_offset + v.bytes > buffer_bytes || !injective(v)) return false;
    covered += checked_numel(v.shape, "views_tile") * static_cast<int64_t>(itemsize(v.dtype));
    for (std::size_t j = 0; j < i; ++j)
      if (!views_apart(v, views[j])) return false;
  }
  return covered == buffer_bytes;
}

}  // namespace eagle::detail
