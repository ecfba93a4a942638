// Internal: the three op tables (one file each) and helpers their shape rules share.
#pragma once

#include <string>
#include <vector>

#include "eagle/op/schema.hpp"

namespace eagle::op {

std::string dims_str(const Dims& dims);

namespace detail {

const std::vector<OpSchema>& pointwise_ops();
const std::vector<OpSchema>& structured_ops();
const std::vector<OpSchema>& captured_ops();

// numpy broadcasting of two shapes; fails naming `port` of ctx on a mismatch.
Dims broadcast(const InferContext& ctx, const std::string& port, const Dims& a, const Dims& b);

}  // namespace detail
}  // namespace eagle::op
