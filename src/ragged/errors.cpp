#include <string>
#include <vector>

#include "eagle/core/error.hpp"
#include "eagle/ragged/kernels.hpp"

namespace eagle::ragged {

void throw_if_invalid(const Array& error, const std::string& what) {
  if (!error.defined() || error.dtype() != DType::u32 || error.numel() != 2)
    throw InvalidArgument(
        "ragged::throw_if_invalid: error must be the u32 [2] that "
        "validate_cu_seqlens wrote");
  const std::vector<uint32_t> e = error.to_vector<uint32_t>();
  const std::string at = " (index " + std::to_string(e[1]) + ")";
  switch (static_cast<Rule>(e[0])) {
    case Rule::ok:
      return;
    case Rule::first_not_zero:
      throw InvalidArgument(what + ": the first entry must be 0" + at);
    case Rule::decreasing:
      throw InvalidArgument(what + ": entries must not decrease; entry " + std::to_string(e[1]) +
                            " is less than the one before" + at);
    case Rule::past_capacity:
      throw InvalidArgument(what + ": the last entry must be <= T, the graph's token capacity" +
                            at);
  }
  throw InvalidArgument(what + ": unknown rule " + std::to_string(e[0]) + at);
}

}  // namespace eagle::ragged
