#include "graph/view_layout.hpp"

namespace eagle::detail {

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

}  // namespace eagle::detail
