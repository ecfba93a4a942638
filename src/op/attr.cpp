#include "eagle/op/attr.hpp"

#include <sstream>

#include "eagle/core/error.hpp"
#include "util/json.hpp"

namespace eagle::op {

std::string_view attr_type_name(AttrType type) {
  switch (type) {
    case AttrType::boolean:
      return "bool";
    case AttrType::integer:
      return "integer";
    case AttrType::real:
      return "real";
    case AttrType::text:
      return "text";
    case AttrType::integers:
      return "integer list";
    case AttrType::dtype:
      return "dtype";
  }
  return "?";
}

namespace {
[[noreturn]] void wrong_type(const std::string& what, AttrType want, AttrType got) {
  std::string m = what;
  m += ": must be ";
  m += attr_type_name(want);
  m += ", got ";
  m += attr_type_name(got);
  throw InvalidArgument(m);
}
}  // namespace

bool Attr::as_bool(const std::string& what) const {
  if (type() != AttrType::boolean) wrong_type(what, AttrType::boolean, type());
  return std::get<bool>(value_);
}
int64_t Attr::as_int(const std::string& what) const {
  if (type() != AttrType::integer) wrong_type(what, AttrType::integer, type());
  return std::get<int64_t>(value_);
}
double Attr::as_real(const std::string& what) const {
  if (type() == AttrType::integer) return static_cast<double>(std::get<int64_t>(value_));
  if (type() != AttrType::real) wrong_type(what, AttrType::real, type());
  return std::get<double>(value_);
}
const std::string& Attr::as_text(const std::string& what) const {
  if (type() != AttrType::text) wrong_type(what, AttrType::text, type());
  return std::get<std::string>(value_);
}
const std::vector<int64_t>& Attr::as_ints(const std::string& what) const {
  if (type() != AttrType::integers) wrong_type(what, AttrType::integers, type());
  return std::get<std::vector<int64_t>>(value_);
}
DType Attr::as_dtype(const std::string& what) const {
  if (type() == AttrType::text) {
    try {
      return dtype_from_name(std::get<std::string>(value_));
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(what + ": " + e.what());  // name the attribute, not only the text
    }
  }
  if (type() != AttrType::dtype) wrong_type(what, AttrType::dtype, type());
  return std::get<DType>(value_);
}

std::string Attr::to_json() const {
  switch (type()) {
    case AttrType::boolean:
      return std::get<bool>(value_) ? "true" : "false";
    case AttrType::integer:
      return std::to_string(std::get<int64_t>(value_));
    case AttrType::real: {
      std::ostringstream s;
      s.precision(17);
      s << std::get<double>(value_);
      return s.str();
    }
    case AttrType::text:
      return detail::json_quote(std::get<std::string>(value_));
    case AttrType::integers: {
      std::string out = "[";
      for (int64_t v : std::get<std::vector<int64_t>>(value_)) {
        if (out.size() > 1) out += ",";
        out += std::to_string(v);
      }
      return out + "]";
    }
    case AttrType::dtype:
      return detail::json_quote(dtype_name(std::get<DType>(value_)));
  }
  return "null";
}

}  // namespace eagle::op
