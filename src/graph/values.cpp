// Value handles: lookup, liveness and views (slice, transpose, reshape).
#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "graph/state.hpp"

namespace eagle {

int64_t view_span_bytes(const Shape& shape, const Shape& strides, DType dtype) {
  const auto size = static_cast<int64_t>(itemsize(dtype));
  if (strides.empty()) return checked_numel(shape, "a view") * size;
  int64_t last = 0;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return 0;
    last += (shape[i] - 1) * strides[i];
  }
  return (last + 1) * size;
}

NodeArgInfo view_arg_info(const std::string& param, Access access, int buffer, int64_t byte_offset,
                          const Shape& shape, DType dtype, const Shape& strides) {
  return NodeArgInfo{param, access, buffer, byte_offset, view_span_bytes(shape, strides, dtype),
                     shape, dtype,  strides};
}

std::string node_name(const NodeInfo& n) {
  return "node " + std::to_string(n.id) + " '" + n.label + "'";
}

// ---- the recording's side

const Recording::State::ValueData& Recording::State::value(const Value& v,
                                                           const std::string& what) const {
  if (v.raw_ == nullptr)
    throw InvalidArgument(what + ": the value is undefined (a default-constructed Value)");
  if (v.raw_ != self || v.id_ < 0 || v.id_ >= static_cast<int>(values.size()))
    throw InvalidArgument(what + ": the value does not belong to this recording");
  const ValueData& d = values[static_cast<std::size_t>(v.id_)];
  if (d.dead)
    throw InvalidArgument(what +
                          ": the value was made by a call that was refused and rolled "
                          "back; it holds nothing");
  return d;
}

int Recording::State::new_value(int buffer, int64_t byte_offset, const Shape& shape, DType dtype,
                                const Shape& strides) {
  // A contiguous view keeps no strides: the common case stays cheap.
  Shape kept = strides;
  if (!kept.empty() && kept == contiguous_strides(shape)) kept.clear();
  values.push_back(ValueData{buffer, byte_offset, shape, std::move(kept), dtype});
  const int id = static_cast<int>(values.size()) - 1;
  values_of_buffer[static_cast<std::size_t>(buffer)].push_back(id);
  return id;
}

Value Recording::State::handle(int value) const {
  return Value(self->shared_from_this(), value);
}

// ---- the handle's side

std::shared_ptr<Recording> Value::live(const char* what) const {
  if (raw_ == nullptr)
    throw InvalidArgument(std::string(what) +
                          ": the value is undefined (a default-constructed Value)");
  std::shared_ptr<Recording> rec = rec_.lock();
  if (!rec)
    throw InvalidArgument(std::string(what) +
                          ": the value's recording is gone (its Graph was destroyed or moved "
                          "from); values live as long as their graph");
  return rec;
}

const Shape& Value::shape() const {
  return live("Value::shape")->s_->value(*this, "Value::shape").shape;
}
Shape Value::strides() const {
  auto rec = live("Value::strides");
  const auto& v = rec->s_->value(*this, "Value::strides");
  return v.strides.empty() ? contiguous_strides(v.shape) : v.strides;
}
DType Value::dtype() const {
  return live("Value::dtype")->s_->value(*this, "Value::dtype").dtype;
}
int64_t Value::numel() const {
  return checked_numel(shape(), "Value::numel");
}
bool Value::is_contiguous() const {
  return live("Value::is_contiguous")->s_->value(*this, "Value::is_contiguous").strides.empty();
}

int Value::buffer() const {
  return live("Value::buffer")->s_->value(*this, "Value::buffer").buffer;
}
int64_t Value::byte_offset() const {
  return live("Value::byte_offset")->s_->value(*this, "Value::byte_offset").byte_offset;
}

Value& Value::operator=(const Value& other) {
  if (this == &other) return *this;
  // Outside a recording being made this is a plain handle copy; inside one, Recorder::assign.
  std::shared_ptr<Recording> rec = rec_.lock();
  if (rec && raw_ == other.raw_ && !rec->s_->finished && id_ >= 0 && other.id_ >= 0) {
    Recorder(rec.get()).assign(*this, other);
    return *this;
  }
  rec_ = other.rec_;
  raw_ = other.raw_;
  id_ = other.id_;
  return *this;
}

Value Value::slice(int64_t begin, int64_t end) const {
  return slice(0, begin, end);
}

Value Value::slice(int dim, int64_t begin, int64_t end) const {
  auto rec = live("Value::slice");
  Recording::State& s = *rec->s_;
  s.check_open("Value::slice");
  const auto v = s.value(*this, "Value::slice");  // a copy: new_value may move values
  if (v.shape.empty()) throw InvalidArgument("Value::slice: a 0-d value has no dimensions");
  if (dim < 0 || dim >= static_cast<int>(v.shape.size()))
    throw InvalidArgument("Value::slice: dim " + std::to_string(dim) + " is out of range for " +
                          std::to_string(v.shape.size()) + " dims");
  const int64_t n = v.shape[static_cast<std::size_t>(dim)];
  if (begin < 0 || end < begin || end > n)
    throw InvalidArgument("Value::slice: range [" + std::to_string(begin) + ", " +
                          std::to_string(end) + ") must lie within [0, " + std::to_string(n) +
                          "] of dim " + std::to_string(dim));
  const Shape strides = v.strides.empty() ? contiguous_strides(v.shape) : v.strides;
  Shape shape = v.shape;
  shape[static_cast<std::size_t>(dim)] = end - begin;
  const int64_t offset = v.byte_offset + begin * strides[static_cast<std::size_t>(dim)] *
                                             static_cast<int64_t>(itemsize(v.dtype));
  // Rows of a contiguous value stay contiguous.
  const Shape kept = (v.strides.empty() && dim == 0) ? Shape{} : strides;
  return s.handle(s.new_value(v.buffer, offset, shape, v.dtype, kept));
}

Value Value::transpose(int d0, int d1) const {
  auto rec = live("Value::transpose");
  Recording::State& s = *rec->s_;
  s.check_open("Value::transpose");
  const auto v = s.value(*this, "Value::transpose");
  const int nd = static_cast<int>(v.shape.size());
  if (d0 < 0 || d0 >= nd || d1 < 0 || d1 >= nd)
    throw InvalidArgument("Value::transpose: dims " + std::to_string(d0) + " and " +
                          std::to_string(d1) + " must lie in [0, " + std::to_string(nd) + ")");
  Shape strides = v.strides.empty() ? contiguous_strides(v.shape) : v.strides;
  Shape shape = v.shape;
  std::swap(shape[static_cast<std::size_t>(d0)], shape[static_cast<std::size_t>(d1)]);
  std::swap(strides[static_cast<std::size_t>(d0)], strides[static_cast<std::size_t>(d1)]);
  return s.handle(s.new_value(v.buffer, v.byte_offset, shape, v.dtype, strides));
}

Value Value::broadcast_to(const Shape& shape) const {
  auto rec = live("Value::broadcast_to");
  Recording::State& s = *rec->s_;
  s.check_open("Value::broadcast_to");
  const auto v = s.value(*this, "Value::broadcast_to");
  checked_numel(shape, "Value::broadcast_to");
  const Shape from = v.strides.empty() ? contiguous_strides(v.shape) : v.strides;
  const std::size_t n = shape.size(), m = v.shape.size();
  if (m > n)
    throw InvalidArgument("Value::broadcast_to: " + shape_str(v.shape) + " has more dims than " +
                          shape_str(shape));
  Shape strides(n, 0);
  for (std::size_t i = 0; i < m; ++i) {
    const int64_t have = v.shape[i], want = shape[n - m + i];
    if (have != want && have != 1)
      throw InvalidArgument("Value::broadcast_to: " + shape_str(v.shape) +
                            " does not broadcast to " + shape_str(shape) + " (dim " +
                            std::to_string(i) + ")");
    strides[n - m + i] = have == want ? from[i] : 0;
  }
  return s.handle(s.new_value(v.buffer, v.byte_offset, shape, v.dtype, strides));
}

Value Value::reshape(const Shape& shape) const {
  auto rec = live("Value::reshape");
  Recording::State& s = *rec->s_;
  s.check_open("Value::reshape");
  const auto v = s.value(*this, "Value::reshape");
  const int64_t n = checked_numel(shape, "Value::reshape");
  const int64_t have = checked_numel(v.shape, "Value::reshape");
  if (n != have)
    throw InvalidArgument("Value::reshape: " + shape_str(shape) + " holds " + std::to_string(n) +
                          " elements but the value has " + std::to_string(have));
  if (!v.strides.empty())
    throw InvalidArgument("Value::reshape: the value is a strided view; reshape a contiguous one");
  return s.handle(s.new_value(v.buffer, v.byte_offset, shape, v.dtype));
}

// A view of any buffer (passes that record over a recording: the reverse pass).
Value Recorder::view(int buffer, int64_t byte_offset, const Shape& shape, DType dtype,
                     const Shape& strides) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::view");
  const std::string who = "Recorder::view";
  if (buffer < 0 || buffer >= static_cast<int>(s.buffers.size()))
    throw InvalidArgument(who + ": buffer " + std::to_string(buffer) + " does not exist");
  const BufferInfo& b = s.buffers[static_cast<std::size_t>(buffer)];
  if (b.merged_into >= 0)
    throw InvalidArgument(who + ": buffer '" + b.label + "' was merged into another");
  if (dtype != b.dtype)
    throw InvalidArgument(who + ": dtype " + std::string(dtype_name(dtype)) + " but buffer '" +
                          b.label + "' holds " + std::string(dtype_name(b.dtype)));
  if (!strides.empty() && strides.size() != shape.size())
    throw InvalidArgument(who + ": strides " + shape_str(strides) + " do not match shape " +
                          shape_str(shape));
  for (int64_t st : strides)
    if (st < 0) throw InvalidArgument(who + ": strides must be >= 0");
  const int64_t span = view_span_bytes(shape, strides, dtype);
  if (byte_offset < 0 || byte_offset % static_cast<int64_t>(itemsize(dtype)) != 0 ||
      byte_offset + span > static_cast<int64_t>(b.bytes))
    throw InvalidArgument(who + ": bytes [" + std::to_string(byte_offset) + ", " +
                          std::to_string(byte_offset + span) + ") do not lie within buffer '" +
                          b.label + "' of " + std::to_string(b.bytes) + " bytes");
  // A pass reads what a node of an arm wrote when that arm ran: readable anywhere from now on.
  auto& where = s.scope[static_cast<std::size_t>(buffer)];
  if (where.first >= 0) {
    s.journal.push_back(
        {Recording::State::Undo::Kind::scope, buffer, where.second, where.first, 0, 0});
    where = {-1, -1};
  }
  return s.handle(s.new_value(buffer, byte_offset, shape, dtype, strides));
}

}  // namespace eagle
