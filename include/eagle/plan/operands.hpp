// The variant pack: what the caller passes to execute(), normalized once into positions.
// Positions follow the plan's operand layout (the graph's caller-filled tensors by ascending
// uid). A pack belongs to one call: two threads executing one plan use two packs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eagle/core/array.hpp"
#include "eagle/core/dlpack_abi.h"
#include "eagle/op/graph.hpp"

namespace eagle::plan {

inline constexpr int kMaxOperandDims = 8;

// One caller buffer described: pointer, dims, strides (elements), dtype, device. Non-owning.
struct OperandBuffer {
  void* data = nullptr;
  DType dtype = DType::f32;
  int32_t ndim = -1;  // -1: the position was not filled
  int64_t dims[kMaxOperandDims] = {};
  int64_t strides[kMaxOperandDims] = {};
  Device device = Device::cpu();

  bool filled() const { return ndim >= 0; }
  bool row_major() const;
  int64_t numel() const;
};

// What a caller may pass for one operand: an eagle Array, a DLPack tensor (viewed, not owned),
// or a raw device pointer with a declared shape. Each is turned into an OperandBuffer at once.
class Operand {
 public:
  Operand(const Array& array);  // NOLINT(google-explicit-constructor)
  static Operand dlpack(const DLTensor& tensor);
  static Operand raw(void* data, const Shape& dims, DType dtype, Device device,
                     const Shape& strides = {});
  const OperandBuffer& buffer() const { return buffer_; }

 private:
  Operand() = default;
  OperandBuffer buffer_;
};

// The plan's operand order and the declared tensor at each position.
class OperandLayout {
 public:
  OperandLayout() = default;
  explicit OperandLayout(const op::Graph& graph);
  int size() const { return static_cast<int>(uids_.size()); }
  const std::vector<int64_t>& uids() const { return uids_; }
  const op::Tensor& tensor_at(int position) const { return tensors_.at(position); }
  // Position of a tensor or uid; InvalidArgument naming it when it is not an operand.
  int index_of(int64_t uid) const;
  int index_of(const op::Tensor& tensor) const;

 private:
  std::vector<int64_t> uids_;
  std::vector<op::Tensor> tensors_;
};

class VariantPack {
 public:
  explicit VariantPack(const OperandLayout& layout);
  // Fills a position (by uid, tensor or position). Throws InvalidArgument for an unknown uid.
  VariantPack& set(int64_t uid, const Operand& operand);
  VariantPack& set(const op::Tensor& tensor, const Operand& operand);
  VariantPack& set_at(int position, const Operand& operand);
  // Swaps only the pointer of a filled position: the per-call path when shapes stay.
  void set_data(int position, void* data) { buffers_[position].data = data; }
  const OperandBuffer* data() const { return buffers_.data(); }
  int size() const { return static_cast<int>(buffers_.size()); }
  const OperandLayout& layout() const { return *layout_; }

 private:
  const OperandLayout* layout_;
  std::vector<OperandBuffer> buffers_;
};

// A dense row-major buffer of `dims` at `data` (null allowed: a declared operand whose address
// comes per call). Throws InvalidArgument past kMaxOperandDims or for negative dims.
OperandBuffer dense_buffer(void* data, const Shape& dims, DType dtype, Device device);

std::string describe(const OperandBuffer& b);  // "f32[4,8] on cuda:0"

}  // namespace eagle::plan
