// The variant pack: what the caller passes to execute(), normalized once into positions.
// Positions follow the plan's operand layout (the graph's caller-filled tensors by ascending
// uid). A pack belongs to one call: two threads executing one plan use two packs.
#pragma once

#include <cstdint>
#include <memory>
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
  bool read_only = false;  // a read-only Array or DLPack tensor: no plan may write it

  bool filled() const { return ndim >= 0; }
  bool row_major() const;
  int64_t numel() const;
};

// What a caller may pass for one operand: an eagle Array, a DLPack tensor (viewed, not owned),
// or a raw device pointer with a declared shape. Each is turned into an OperandBuffer at once;
// InvalidArgument when its element count or byte offsets do not fit in int64. A read-only Array,
// or a managed DLPack tensor flagged DLPACK_FLAG_BITMASK_READ_ONLY, gives a read-only buffer,
// which a plan refuses as an output.
class Operand {
 public:
  Operand(const Array& array);  // NOLINT(google-explicit-constructor)
  static Operand dlpack(const DLTensor& tensor);
  static Operand dlpack(const DLManagedTensorVersioned& tensor);  // honours its flags
  static Operand raw(void* data, const Shape& dims, DType dtype, Device device,
                     const Shape& strides = {});
  const OperandBuffer& buffer() const { return buffer_; }

 private:
  Operand() = default;
  OperandBuffer buffer_;
};

// The plan's operand order and the declared tensor at each position. A value: copies share one
// immutable table (cheap to copy), and a copy is the same layout as its original (same_as).
class OperandLayout {
 public:
  OperandLayout() = default;
  explicit OperandLayout(const op::Graph& graph);
  int size() const { return static_cast<int>(uids().size()); }
  const std::vector<int64_t>& uids() const;
  // InvalidArgument when position is outside [0, size()).
  const op::Tensor& tensor_at(int position) const;
  // Position of a tensor or uid; InvalidArgument naming it when it is not an operand.
  int index_of(int64_t uid) const;
  int index_of(const op::Tensor& tensor) const;
  // True when both are copies of one layout (made by one OperandLayout(graph) call). A layout
  // built again from the same graph is another layout.
  bool same_as(const OperandLayout& other) const { return table_ == other.table_; }

 private:
  struct Table {
    std::vector<int64_t> uids;
    std::vector<op::Tensor> tensors;
  };
  std::shared_ptr<const Table> table_;
};

// Keeps its own copy of the layout: a pack made from a temporary layout stays valid.
class VariantPack {
 public:
  explicit VariantPack(const OperandLayout& layout);
  // Fills a position (by uid, tensor or position). Throws InvalidArgument for an unknown uid or
  // a position outside [0, size()).
  VariantPack& set(int64_t uid, const Operand& operand);
  VariantPack& set(const op::Tensor& tensor, const Operand& operand);
  VariantPack& set_at(int position, const Operand& operand);
  // Swaps only the pointer of a filled position: the per-call path when shapes stay. Throws
  // InvalidArgument for a position outside [0, size()) or one not filled yet.
  void set_data(int position, void* data);
  const OperandBuffer* data() const { return buffers_.data(); }
  int size() const { return static_cast<int>(buffers_.size()); }
  const OperandLayout& layout() const { return layout_; }

 private:
  OperandLayout layout_;
  std::vector<OperandBuffer> buffers_;
};

// A dense row-major buffer of `dims` at `data` (null allowed: a declared operand whose address
// comes per call). Throws InvalidArgument past kMaxOperandDims, for negative dims, or for dims
// whose element count or byte size does not fit in int64.
OperandBuffer dense_buffer(void* data, const Shape& dims, DType dtype, Device device);

std::string describe(const OperandBuffer& b);  // "f32[4,8] on cuda:0"

}  // namespace eagle::plan
