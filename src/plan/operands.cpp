#include "eagle/plan/operands.hpp"

#include "eagle/core/dlpack.hpp"
#include "eagle/core/error.hpp"

namespace eagle::plan {

bool OperandBuffer::row_major() const {
  int64_t expect = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    if (dims[i] != 1 && strides[i] != expect) return false;
    expect *= dims[i];
  }
  return true;
}

int64_t OperandBuffer::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= dims[i];
  return n;
}

namespace {
OperandBuffer normalize(void* data, const Shape& dims, DType dtype, Device device,
                        const Shape& strides, const char* who) {
  if (dims.size() > static_cast<std::size_t>(kMaxOperandDims))
    throw InvalidArgument(std::string(who) + ": " + std::to_string(dims.size()) +
                          " dims; an operand has at most " + std::to_string(kMaxOperandDims));
  if (!strides.empty() && strides.size() != dims.size())
    throw InvalidArgument(std::string(who) + ": strides " + shape_str(strides) +
                          " must have one entry per dim of " + shape_str(dims));
  const Shape s = strides.empty() ? contiguous_strides(dims) : strides;
  OperandBuffer b;
  b.data = data;
  b.dtype = dtype;
  b.device = device;
  b.ndim = static_cast<int32_t>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0)
      throw InvalidArgument(std::string(who) + ": dims " + shape_str(dims) + " must be >= 0");
    b.dims[i] = dims[i];
    b.strides[i] = s[i];
  }
  return b;
}
}  // namespace

Operand::Operand(const Array& array) {
  if (!array.defined()) throw InvalidArgument("Operand: the Array is undefined");
  buffer_ = normalize(array.data(), array.shape(), array.dtype(), array.device(), array.strides(),
                      "Operand(Array)");
}

Operand Operand::dlpack(const DLTensor& tensor) {
  const Array view = view_dlpack(tensor);
  Operand o;
  o.buffer_ = normalize(view.data(), view.shape(), view.dtype(), view.device(), view.strides(),
                        "Operand::dlpack");
  return o;
}

Operand Operand::raw(void* data, const Shape& dims, DType dtype, Device device,
                     const Shape& strides) {
  Operand o;
  o.buffer_ = normalize(data, dims, dtype, device, strides, "Operand::raw");
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  if (!data && n > 0) throw InvalidArgument("Operand::raw: data is null for a non-empty operand");
  return o;
}

OperandBuffer dense_buffer(void* data, const Shape& dims, DType dtype, Device device) {
  return normalize(data, dims, dtype, device, {}, "dense_buffer");
}

std::string describe(const OperandBuffer& b) {
  if (!b.filled()) return "(not filled)";
  return std::string(dtype_name(b.dtype)) + shape_str(Shape(b.dims, b.dims + b.ndim)) + " on " +
         b.device.str();
}

OperandLayout::OperandLayout(const op::Graph& graph) : tensors_(graph.operand_tensors()) {
  for (const op::Tensor& t : tensors_) uids_.push_back(t.uid());
}

int OperandLayout::index_of(int64_t uid) const {
  for (std::size_t i = 0; i < uids_.size(); ++i)
    if (uids_[i] == uid) return static_cast<int>(i);
  throw InvalidArgument("variant pack: uid " + std::to_string(uid) +
                        " is not an operand of the plan (operands are the graph's non-virtual "
                        "tensors and ragged offsets)");
}

int OperandLayout::index_of(const op::Tensor& tensor) const {
  if (!tensor.defined()) throw InvalidArgument("variant pack: the tensor is undefined");
  const int i = index_of(tensor.uid());
  if (!(tensors_[i] == tensor))
    throw InvalidArgument("variant pack: tensor '" + tensor.name() +
                          "' belongs to another graph than the plan's");
  return i;
}

VariantPack::VariantPack(const OperandLayout& layout)
    : layout_(&layout), buffers_(static_cast<std::size_t>(layout.size())) {}

VariantPack& VariantPack::set(int64_t uid, const Operand& operand) {
  return set_at(layout_->index_of(uid), operand);
}
VariantPack& VariantPack::set(const op::Tensor& tensor, const Operand& operand) {
  return set_at(layout_->index_of(tensor), operand);
}
VariantPack& VariantPack::set_at(int position, const Operand& operand) {
  if (position < 0 || position >= size())
    throw InvalidArgument("VariantPack::set_at: position " + std::to_string(position) +
                          " is outside [0, " + std::to_string(size()) + ")");
  buffers_[position] = operand.buffer();
  return *this;
}

}  // namespace eagle::plan
