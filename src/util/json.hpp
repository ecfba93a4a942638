// Internal: a minimal JSON writer and a reader for flat objects of strings and integers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace eagle::detail {

std::string json_quote(std::string_view text);

// Parses {"key": "text" | integer, ...}. Values are returned as their text (strings unquoted).
// Throws InvalidArgument with `what` and the offending position on malformed input.
std::map<std::string, std::string> parse_flat_json(std::string_view json, std::string_view what);

}  // namespace eagle::detail
