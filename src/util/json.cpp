#include "util/json.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "eagle/core/error.hpp"

namespace eagle::detail {

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

namespace {

struct Reader {
  std::string_view s;
  std::string_view what;
  std::size_t i = 0;

  [[noreturn]] void fail(const std::string& rule) const {
    throw InvalidArgument(std::string(what) + ": " + rule + " at offset " + std::to_string(i));
  }
  void skip() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  void expect(char c) {
    skip();
    if (i >= s.size() || s[i] != c) fail(std::string("expected '") + c + "'");
    ++i;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (i < s.size() && s[i] != '"') {
      if (s[i] == '\\') {
        ++i;
        if (i >= s.size()) fail("unterminated escape");
        const char e = s[i];
        if (e == 'u') {  // \u00XX, as json_quote writes control characters
          if (i + 4 >= s.size()) fail("truncated \\u escape");
          const std::string hex(s.substr(i + 1, 4));
          char* end = nullptr;
          const long code = std::strtol(hex.c_str(), &end, 16);
          if (end != hex.c_str() + 4 || code > 0x7f) fail("unsupported \\u escape '" + hex + "'");
          out += static_cast<char>(code);
          i += 4;
        } else {
          out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        }
      } else {
        out += s[i];
      }
      ++i;
    }
    if (i >= s.size()) fail("unterminated string");
    ++i;
    return out;
  }
  // An integer; `key` names the field in the error for anything else (9.5, true, null).
  std::string number(const std::string& key) {
    skip();
    std::size_t start = i;
    if (i < s.size() && s[i] == '-') ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    const bool digits = !(start == i || (s[start] == '-' && i == start + 1));
    if (!digits || (i < s.size() && (s[i] == '.' || s[i] == 'e' || s[i] == 'E')))
      fail("field '" + key + "' must be a string or an integer");
    return std::string(s.substr(start, i - start));
  }
};

}  // namespace

std::map<std::string, std::string> parse_flat_json(std::string_view json, std::string_view what) {
  Reader r{json, what};
  std::map<std::string, std::string> out;
  r.expect('{');
  r.skip();
  if (r.i < json.size() && json[r.i] == '}') {
    ++r.i;
    return out;
  }
  for (;;) {
    std::string key = r.string();
    r.expect(':');
    r.skip();
    out[key] = (r.i < json.size() && json[r.i] == '"') ? r.string() : r.number(key);
    r.skip();
    if (r.i < json.size() && json[r.i] == ',') {
      ++r.i;
      continue;
    }
    r.expect('}');
    break;
  }
  r.skip();
  if (r.i != json.size()) r.fail("trailing characters");
  return out;
}

}  // namespace eagle::detail
