// The fused kernel's names for the IR's pointwise ops and dtypes (host side; no CUDA needed).
#include <utility>

#include "engines/native/fused_kernels.hpp"

namespace eagle::native {

#define EAGLE_PW_COUNT(name, binary) +1  // NOLINT(bugprone-macro-parentheses): a sum's term
static_assert(0 EAGLE_POINTWISE_OPS(EAGLE_PW_COUNT) <= static_cast<int>(FusedExtra::cmp_eq),
              "the pointwise table's op codes must stay below the fused extras'");
#undef EAGLE_PW_COUNT

bool fused_type_of(DType dtype, FusedType& type) {
  switch (dtype) {
    case DType::f32:
      type = FusedType::f32;
      return true;
    case DType::f16:
      type = FusedType::f16;
      return true;
    case DType::bf16:
      type = FusedType::bf16;
      return true;
    case DType::boolean:
      type = FusedType::boolean;
      return true;
    case DType::u8:
      type = FusedType::u8;
      return true;
    default:
      return false;
  }
}

bool fused_op_of(std::string_view name, uint8_t& op) {
  PwOp pw;
  if (pointwise_op_of(name, pw)) {
    op = static_cast<uint8_t>(pw);
    return true;
  }
  static constexpr std::pair<std::string_view, FusedExtra> kExtra[] = {
      {"cmp_eq", FusedExtra::cmp_eq},
      {"cmp_neq", FusedExtra::cmp_neq},
      {"cmp_lt", FusedExtra::cmp_lt},
      {"cmp_le", FusedExtra::cmp_le},
      {"cmp_gt", FusedExtra::cmp_gt},
      {"cmp_ge", FusedExtra::cmp_ge},
      {"logical_not", FusedExtra::logical_not},
      {"logical_and", FusedExtra::logical_and},
      {"logical_or", FusedExtra::logical_or},
      {"where", FusedExtra::where},
      {"cast", FusedExtra::cast}};
  for (const auto& [n, e] : kExtra)
    if (name == n) {
      op = static_cast<uint8_t>(e);
      return true;
    }
  return false;
}

}  // namespace eagle::native
