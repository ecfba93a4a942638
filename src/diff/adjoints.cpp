#include "diff/adjoints.hpp"

#include "eagle/core/error.hpp"
#include "eagle/kernel/standard.hpp"
#include "eagle/kernel/views.hpp"
#include "graph/view_layout.hpp"

namespace eagle::diff::detail {

bool Adjoints::whole(const NodeArgInfo& v) const {
  const BufferInfo& b = buffers_[static_cast<std::size_t>(v.buffer)];
  return v.byte_offset == 0 && v.strides.empty() && v.bytes == static_cast<int64_t>(b.bytes);
}

bool Adjoints::still_zero(const Entry& e, const NodeArgInfo& v) const {
  if (!e.zero_elsewhere || pinned_.count(v.buffer)) return false;
  for (const NodeArgInfo& w : e.written)
    if (!eagle::detail::views_apart(v, w)) return false;
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

// Whether `buffer` holds one planned derivative's gradients laid out as their inputs
// (Adjoints::adopt) and nothing else: filled whole with zeros by its first writer and written by
// one node after that, or written by views that cover it exactly (no zeros needed in between).
bool Adjoints::written_once_laid_out(int buffer) const {
  const Recording& rec = r_.recording();
  const BufferInfo& b = rec.buffers()[static_cast<std::size_t>(buffer)];
  int writers = 0;
  bool filled = false;
  std::vector<NodeArgInfo> writes_there;
  for (const NodeInfo& n : rec.nodes()) {
    bool wrote = false;
    for (const NodeArgInfo& a : n.arrays) {
      if (a.buffer != buffer || !writes(a.access)) continue;
      if (writers == 0 && !wrote && n.kernel == "fill" && n.scalars.size() == 1 &&
          n.scalars[0].i == 0 && a.byte_offset == 0 && a.bytes == static_cast<int64_t>(b.bytes))
        filled = true;
      else
        writes_there.push_back(a);
      wrote = true;
    }
    writers += wrote ? 1 : 0;
  }
  if (filled) return writers == 2;
  return writers == 1 && eagle::detail::views_tile(writes_there, static_cast<int64_t>(b.bytes));
}

bool Adjoints::adopt(const NodeArgInfo& v, const Value& c) {
  if (pinned_.count(v.buffer) || c.byte_offset() != v.byte_offset || c.shape() != v.shape ||
      c.dtype() != v.dtype || c.strides() != v.strides)
    return false;
  const auto it = entries_.find(v.buffer);
  if (it != entries_.end() && it->second.value)  // c lies in the adopted array already
    return it->second.owned && it->second.value->buffer() == c.buffer() &&
           it->second.value->byte_offset() == 0;
  const BufferInfo& fb = buffers_[static_cast<std::size_t>(v.buffer)];
  const BufferInfo& cb = r_.recording().buffers()[static_cast<std::size_t>(c.buffer())];
  if (cb.shape != fb.shape || cb.dtype != fb.dtype || !written_once_laid_out(c.buffer()))
    return false;
  Entry& e = entries_[v.buffer];
  e.value.emplace(r_.view(c.buffer(), 0, fb.shape, fb.dtype));
  e.owned = true;
  e.zero_elsewhere = false;  // the derivative's other views there are not zero
  e.written.clear();
  owned_.insert(c.buffer());
  return true;
}

void Adjoints::add(const NodeArgInfo& v, const Value& given) {
  if (!given.is_contiguous() && adopt(v, given)) return;
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
