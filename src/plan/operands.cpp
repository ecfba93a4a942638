#include "eagle/plan/operands.hpp"

#include <span>

#include "eagle/core/dlpack.hpp"
#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"

namespace eagle::plan {

bool OperandBuffer::row_major() const {
  if (numel() == 0) return true;  // no element is addressed through an empty buffer's strides
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
void check_rank(std::size_t ndim, const char* who) {
  if (ndim > static_cast<std::size_t>(kMaxOperandDims))
    throw InvalidArgument(std::string(who) + ": " + std::to_string(ndim) +
                          " dims; an operand has at most " + std::to_string(kMaxOperandDims));
}

// A buffer of checked dims and strides (one stride per dim).
OperandBuffer filled(void* data, std::span<const int64_t> dims, std::span<const int64_t> strides,
                     DType dtype, Device device) {
  OperandBuffer b;
  b.data = data;
  b.dtype = dtype;
  b.device = device;
  b.ndim = static_cast<int32_t>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    b.dims[i] = dims[i];
    b.strides[i] = strides[i];
  }
  return b;
}

OperandBuffer normalize(void* data, const Shape& dims, DType dtype, Device device,
                        const Shape& strides, const char* who) {
  check_rank(dims.size(), who);
  if (!strides.empty() && strides.size() != dims.size())
    throw InvalidArgument(std::string(who) + ": strides " + shape_str(strides) +
                          " must have one entry per dim of " + shape_str(dims));
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (dims[i] < 0)
      throw InvalidArgument(std::string(who) + ": dims " + shape_str(dims) + " must be >= 0");
  // Engines count elements and step through strides in int64: both must fit.
  checked_nbytes(dims, dtype, who);
  const Shape s = strides.empty() ? contiguous_strides(dims) : strides;
  checked_byte_extent(dims, s, dtype, who);
  return filled(data, dims, s, dtype, device);
}
}  // namespace

Operand::Operand(const Array& array) {
  if (!array.defined()) throw InvalidArgument("Operand: the Array is undefined");
  // An Array's dims and strides passed its own checks when it was made (Array::wrap, empty,
  // on_storage; views keep them): only the operand's rank limit is new here. Execute imports
  // every operand at every call, so the checks are not repeated.
  check_rank(array.shape().size(), "Operand(Array)");
  buffer_ = filled(array.data(), array.shape(), array.strides(), array.dtype(), array.device());
  buffer_.read_only = array.read_only();
}

// The checks of view_dlpack, on the tensor's own dims and strides: no Array, no allocation
// (a planned call imports every foreign operand at every execute).
Operand Operand::dlpack(const DLTensor& tensor) {
  constexpr const char* who = "Operand::dlpack";
  const DType dtype = dlpack_dtype(tensor.dtype, who);
  const Device device = dlpack_device(tensor.device, who);
  const std::span<const int64_t> dims = dlpack_dims(tensor, who);
  check_rank(dims.size(), who);
  const int64_t numel = checked_numel(dims, who);
  checked_nbytes(dims, dtype, who);
  int64_t row_major[kMaxOperandDims];
  std::span<const int64_t> strides(tensor.strides, tensor.strides ? dims.size() : 0);
  if (!tensor.strides) {
    contiguous_strides(dims, {row_major, dims.size()});
    strides = {row_major, dims.size()};
  }
  checked_byte_extent(dims, strides, dtype, who);
  Operand o;
  o.buffer_ = filled(dlpack_start(tensor, numel, who), dims, strides, dtype, device);
  return o;
}

Operand Operand::dlpack(const DLManagedTensorVersioned& tensor) {
  Operand o = dlpack(tensor.dl_tensor);
  o.buffer_.read_only = (tensor.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
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

OperandLayout::OperandLayout(const op::Graph& graph) {
  auto table = std::make_shared<Table>();
  table->tensors = graph.operand_tensors();
  for (const op::Tensor& t : table->tensors) table->uids.push_back(t.uid());
  table_ = std::move(table);
}

const std::vector<int64_t>& OperandLayout::uids() const {
  static const std::vector<int64_t> none;
  return table_ ? table_->uids : none;
}

const op::Tensor& OperandLayout::tensor_at(int position) const {
  if (position < 0 || position >= size())
    throw InvalidArgument("OperandLayout::tensor_at: position " + std::to_string(position) +
                          " is outside [0, " + std::to_string(size()) + ")");
  return table_->tensors[static_cast<std::size_t>(position)];
}

int OperandLayout::index_of(int64_t uid) const {
  const std::vector<int64_t>& all = uids();
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i] == uid) return static_cast<int>(i);
  throw InvalidArgument("variant pack: uid " + std::to_string(uid) +
                        " is not an operand of the plan (operands are the graph's non-virtual "
                        "tensors and ragged offsets)");
}

int OperandLayout::index_of(const op::Tensor& tensor) const {
  if (!tensor.defined()) throw InvalidArgument("variant pack: the tensor is undefined");
  const int i = index_of(tensor.uid());
  if (!(tensor_at(i) == tensor))
    throw InvalidArgument("variant pack: tensor '" + tensor.name() +
                          "' belongs to another graph than the plan's");
  return i;
}

VariantPack::VariantPack(const OperandLayout& layout)
    : layout_(layout), buffers_(static_cast<std::size_t>(layout.size())) {}

VariantPack& VariantPack::set(int64_t uid, const Operand& operand) {
  return set_at(layout_.index_of(uid), operand);
}
VariantPack& VariantPack::set(const op::Tensor& tensor, const Operand& operand) {
  return set_at(layout_.index_of(tensor), operand);
}

void VariantPack::set_data(int position, void* data) {
  if (position < 0 || position >= size())
    throw InvalidArgument("VariantPack::set_data: position " + std::to_string(position) +
                          " is outside [0, " + std::to_string(size()) + ")");
  OperandBuffer& b = buffers_[static_cast<std::size_t>(position)];
  if (!b.filled())
    throw InvalidArgument("VariantPack::set_data: position " + std::to_string(position) +
                          " is not filled; fill it with set or set_at before swapping its pointer");
  b.data = data;
}
VariantPack& VariantPack::set_at(int position, const Operand& operand) {
  if (position < 0 || position >= size())
    throw InvalidArgument("VariantPack::set_at: position " + std::to_string(position) +
                          " is outside [0, " + std::to_string(size()) + ")");
  buffers_[position] = operand.buffer();
  return *this;
}

}  // namespace eagle::plan
