#include "eagle/plan/operand_rules.hpp"

#include <cstring>

#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"

namespace eagle::plan {

void OperandRules::add(const OperandLayout& layout, const op::Tensor& tensor, Device device,
                       bool row_major, bool optional) {
  Rule r{layout.index_of(tensor),
         tensor.dtype(),
         0,
         {},
         device,
         row_major,
         optional,
         tensor.producer() >= 0,
         tensor.uid(),
         tensor.name()};
  const op::Dims& dims = tensor.dims();
  if (dims.size() > static_cast<std::size_t>(kMaxOperandDims))
    throw NotSupported("tensor '" + tensor.name() + "' has more than " +
                       std::to_string(kMaxOperandDims) + " dims");
  r.ndim = static_cast<int32_t>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) r.dims[i] = dims[i];
  rules_.push_back(std::move(r));
}

namespace {
// Which rule part a buffer breaks, or nullptr.
template <class Rule>
const char* broken(const Rule& r, const OperandBuffer& b) noexcept {
  if (!b.filled()) return r.optional ? nullptr : "no buffer was passed for it";
  if (b.dtype != r.dtype) return "its dtype differs from the declared one";
  if (b.ndim != r.ndim || std::memcmp(b.dims, r.dims, sizeof(int64_t) * r.ndim) != 0)
    return "its dims differ from those the plan was built for";
  if (b.device != r.device) return "it lives on another device than the plan's";
  if (r.output && b.read_only) return "it is read-only and the plan writes it (an output)";
  if (r.output && may_overlap(b.dims, b.strides, b.ndim))
    return "its strides make two elements share memory; an output needs its own address for "
           "every element";
  if (r.row_major && !b.row_major()) return "this plan needs it dense and row-major";
  if (!b.data && b.numel() > 0) return "its data pointer is null";
  return nullptr;
}
}  // namespace

bool OperandRules::match(const OperandBuffer* operands) const noexcept {
  for (const Rule& r : rules_)
    if (broken(r, operands[r.position])) return false;
  return true;
}

void OperandRules::explain(const OperandBuffer* operands) const {
  for (const Rule& r : rules_) {
    const OperandBuffer& b = operands[r.position];
    if (const char* why = broken(r, b)) {
      const OperandBuffer want =
          dense_buffer(nullptr, Shape(r.dims, r.dims + r.ndim), r.dtype, r.device);
      std::string got = describe(b);
      if (b.filled() && !b.row_major())
        got += " with strides " + shape_str(Shape(b.strides, b.strides + b.ndim));
      if (b.filled() && b.read_only) got += ", read-only";
      throw InvalidArgument("execute: operand '" + r.name + "' (uid " + std::to_string(r.uid) +
                            ", position " + std::to_string(r.position) + "): " + why +
                            " (expected " + describe(want) + ", got " + got + ")");
    }
  }
}

int OperandRules::position_of(const op::Tensor& tensor) const {
  for (const Rule& r : rules_)
    if (r.uid == tensor.uid()) return r.position;
  return -1;
}

}  // namespace eagle::plan
