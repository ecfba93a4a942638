#include "eagle/ragged/validate.hpp"

#include "eagle/ragged/kernels.hpp"

namespace eagle::ragged {

bool checks_enabled() {
  return EAGLE_RAGGED_CHECKS != 0;
}

Value validate(Recorder& r, const Value& cu_seqlens, int64_t tokens, const std::string& what) {
  if (!checks_enabled()) return Value();
  const Value error = r.call(validate_cu_seqlens(), {cu_seqlens, tokens});
  r.check(error, [what](const Array& flags) { throw_if_invalid(flags, what); });
  return error;
}

}  // namespace eagle::ragged
