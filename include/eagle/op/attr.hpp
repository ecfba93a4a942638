// A node attribute value: one of a few plain types, compared and printed uniformly.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "eagle/core/dtype.hpp"

namespace eagle::op {

enum class AttrType : uint8_t { boolean, integer, real, text, integers, dtype };
std::string_view attr_type_name(AttrType type);

class Attr {
 public:
  Attr(bool v) : value_(v) {}                             // NOLINT(google-explicit-constructor)
  Attr(int v) : value_(static_cast<int64_t>(v)) {}        // NOLINT(google-explicit-constructor)
  Attr(int64_t v) : value_(v) {}                          // NOLINT(google-explicit-constructor)
  Attr(double v) : value_(v) {}                           // NOLINT(google-explicit-constructor)
  Attr(const char* v) : value_(std::string(v)) {}         // NOLINT(google-explicit-constructor)
  Attr(std::string v) : value_(std::move(v)) {}           // NOLINT(google-explicit-constructor)
  Attr(std::vector<int64_t> v) : value_(std::move(v)) {}  // NOLINT(google-explicit-constructor)
  Attr(std::initializer_list<int64_t> v) : value_(std::vector<int64_t>(v)) {}  // NOLINT
  Attr(DType v) : value_(v) {}  // NOLINT(google-explicit-constructor)

  AttrType type() const { return static_cast<AttrType>(value_.index()); }
  // Typed reads; each throws InvalidArgument naming `what` when the type differs. An integer
  // reads as a real too (scale = 1 is fine).
  bool as_bool(const std::string& what) const;
  int64_t as_int(const std::string& what) const;
  double as_real(const std::string& what) const;
  const std::string& as_text(const std::string& what) const;
  const std::vector<int64_t>& as_ints(const std::string& what) const;
  DType as_dtype(const std::string& what) const;
  std::string to_json() const;
  friend bool operator==(const Attr& a, const Attr& b) { return a.value_ == b.value_; }

 private:
  std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, DType> value_;
};

}  // namespace eagle::op
