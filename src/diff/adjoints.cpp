#include "diff/adjoints.hpp"

#include "eagle/core/error.hpp"
#include "eagle/kernel/standard.hpp"
#include "eagle/kernel/views.hpp"

namespace eagle::diff::detail {

bool Adjoints::whole(const NodeArgInfo& v) const {
  const BufferInfo& b = buffers_[static_cast<std::size_t>(v.buffer)];
  return v.byte_offset == 0 && v.strides.empty() && v.bytes == static_cast<int64_t>(b.bytes);
}

namespace {

// The byte offsets a view touches, coarsely: blocks of `run` contiguous bytes every `period`
// bytes (run <= period), starting at byte_offset. A contiguous view is one block.
struct Layout {
  int64_t run, period;
};
Layout layout_of(const NodeArgInfo& v) {
  const int64_t item = static_cast<int64_t>(itemsize(v.dtype));
  if (v.strides.empty()) return {v.bytes, 0};
  // The innermost dims that are contiguous together form the run; the next stride out the period
  // (only when every outer stride is a multiple of it).
  int64_t run = 1;
  int k = static_cast<int>(v.shape.size()) - 1;
  for (; k >= 0 && (v.shape[k] == 1 || v.strides[k] == run); --k) run *= v.shape[k];
  if (k < 0) return {v.bytes, 0};
  const int64_t period = v.strides[k];
  for (int j = k; j >= 0; --j)
    if (v.shape[j] > 1 && (v.strides[j] <= 0 || v.strides[j] % period != 0)) return {-1, 0};
  if (run > period) return {-1, 0};
  return {run * item, period * item};
}

// Whether views a and b of one buffer share no byte: apart as byte ranges, or blocks of the same
// layout (a column slice beside another of one [T, 3 D] array) whose offsets keep them apart.
// False when unsure.
bool disjoint(const NodeArgInfo& a, const NodeArgInfo& b) {
  if (a.byte_offset + a.bytes <= b.byte_offset || b.byte_offset + b.bytes <= a.byte_offset)
    return true;
  const Layout la = layout_of(a), lb = layout_of(b);
  if (la.run < 0 || lb.run < 0 || la.period == 0 || la.period != lb.period) return false;
  const int64_t d = ((b.byte_offset - a.byte_offset) % la.period + la.period) % la.period;
  // b's blocks start d bytes after a's (modulo the period): apart when each fits in the gap.
  return d >= la.run && la.period - d >= lb.run;
}

}  // namespace

bool Adjoints::still_zero(const Entry& e, const NodeArgInfo& v) const {
  if (!e.zero_elsewhere || pinned_.count(v.buffer)) return false;
  for (const NodeArgInfo& w : e.written)
    if (!disjoint(v, w)) return false;
  return true;
}

Value Adjoints::part(const Entry& e, const NodeArgInfo& v) {
  if (whole(v)) return e.value->shape() == v.shape ? *e.value : e.value->reshape(v.shape);
  return r_.view(e.value->buffer(), e.value->byte_offset() + v.byte_offset, v.shape, v.dtype,
                 v.strides);
}

void Adjoints::own(int b_id, Entry& e) {
  if (e.owned) return;
  const BufferInfo& b = buffers_[static_cast<std::size_t>(b_id)];
  Value fresh = r_.empty(b.shape, b.dtype, "grad " + b.label);
  if (e.value) {
    r_.call(kernels::copy(), {*e.value}, buffer(fresh));
  } else {
    r_.call(kernels::fill(), {0.0}, buffer(fresh));
    e.zero_elsewhere = true;
    e.written.clear();
  }
  e.value.emplace(fresh);  // emplace: Value::operator= inside a construct would merge arrays
  e.owned = true;
  owned_.insert(fresh.buffer());
}

std::optional<Value> Adjoints::read(const NodeArgInfo& v) {
  auto it = entries_.find(v.buffer);
  if (it == entries_.end() || !it->second.value) return std::nullopt;
  const Value at = part(it->second, v);
  // A derivative receives contiguous cotangents: a strided view's is gathered.
  return at.is_contiguous() ? at : r_.call(kernels::gather_view(), {at});
}

void Adjoints::pin(int b) {
  if (pinned_.count(b)) return;
  own(b, entries_[b]);
  pinned_.insert(b);
}

void Adjoints::zero(const NodeArgInfo& v) {
  auto it = entries_.find(v.buffer);
  if (it == entries_.end() || !it->second.value) return;
  if (whole(v) && !pinned_.count(v.buffer)) {
    entries_.erase(it);
    return;
  }
  own(v.buffer, it->second);
  const Value at = part(it->second, v);
  if (at.is_contiguous())
    r_.call(kernels::fill(), {0.0}, buffer(at));
  else
    r_.call_all(kernels::zero_view(), {at});
}

void Adjoints::add(const NodeArgInfo& v, const Value& given) {
  // A derivative may hand back a strided view (of an array it made): gathered first.
  const Value c = given.is_contiguous() ? given : r_.call(kernels::gather_view(), {given});
  const BufferInfo& b = buffers_[static_cast<std::size_t>(v.buffer)];
  Entry& e = entries_[v.buffer];
  if (whole(v) && !pinned_.count(v.buffer)) {
    const Value flat = c.shape() == b.shape ? c : c.reshape(b.shape);
    if (!e.value) {
      e.value.emplace(flat);  // kept as is: never written in place while not owned
      e.owned = false;
    } else {
      Value sum = r_.call(kernels::add(), {*e.value, flat});
      e.value.emplace(sum);
      e.owned = true;
      owned_.insert(sum.buffer());
    }
    e.zero_elsewhere = false;
    return;
  }
  own(v.buffer, e);
  const Value at = part(e, v);
  const bool zero_there = still_zero(e, v);
  if (e.zero_elsewhere) e.written.push_back(v);
  if (zero_there) {  // stored where zeros lie: no sum to form
    if (at.is_contiguous())
      r_.call(kernels::copy(), {c}, buffer(at));
    else
      r_.call_all(kernels::scatter_view(), {at, c});
    return;
  }
  if (at.is_contiguous()) {
    r_.call(kernels::add(), {at, c}, buffer(at));
    return;
  }
  // The cotangent of a strided view (a transpose, a column slice) goes where the view lies: in
  // place for f32 and f64; a 16-bit sum (the typed kernels do no 16-bit arithmetic) is gathered,
  // added by the standard add (rounded once, as in place) and scattered back.
  if (c.dtype() == DType::f32 || c.dtype() == DType::f64) {
    r_.call_all(kernels::add_to_view(), {at, c});
    return;
  }
  const Value sum = r_.call(kernels::add(), {r_.call(kernels::gather_view(), {at}), c});
  r_.call_all(kernels::scatter_view(), {at, sum});
}

}  // namespace eagle::diff::detail
