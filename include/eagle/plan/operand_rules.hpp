// A pattern engines copy for their per-call table: what each operand must be, fixed at build
// (position, dtype, dims, layout), checked in one flat loop per call; the same table explains a
// refusal. An engine may keep its own; this one serves plans whose operands must match the
// declared tensors exactly.
#pragma once

#include <string>
#include <vector>

#include "eagle/plan/operands.hpp"

namespace eagle::plan {

class OperandRules {
 public:
  // Declares that `tensor` (an operand of `layout`) must arrive with its declared dtype and
  // dims on `device`; `row_major` also requires dense row-major strides; `optional` lets the
  // position be unfilled (the plan then reads nothing there). A tensor some node writes (an
  // output) must also arrive writable (not read-only) and with strides that give every element
  // its own address; inputs may broadcast with stride 0.
  void add(const OperandLayout& layout, const op::Tensor& tensor, Device device, bool row_major,
           bool optional = false);
  // The per-call check: one loop over the table, no allocation, no throw.
  bool match(const OperandBuffer* operands) const noexcept;
  // Throws InvalidArgument naming the first operand that breaks its rule (and the rule).
  void explain(const OperandBuffer* operands) const;
  int position_of(const op::Tensor& tensor) const;  // of an added tensor, or -1

 private:
  struct Rule {
    int position;
    DType dtype;
    int32_t ndim;
    int64_t dims[kMaxOperandDims];
    Device device;
    bool row_major;
    bool optional;
    bool output;  // written by the plan
    int64_t uid;
    std::string name;  // read only by explain()
  };
  std::vector<Rule> rules_;
};

}  // namespace eagle::plan
