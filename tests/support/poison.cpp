#include "poison.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace eagle::test {

namespace {
constexpr uint8_t kPoisonByte = 0xAB;
}

double poison_value(DType dtype) {
  if (is_floating(dtype)) return std::nan("");
  switch (dtype) {
    case DType::u32:
      return 3735928559.0;  // 0xDEADBEEF
    case DType::u8:
    case DType::boolean:
      return kPoisonByte;
    default:
      return -123456789.0;
  }
}

bool is_poison(double v, DType dtype) {
  if (is_floating(dtype)) return std::isnan(v);
  if (dtype == DType::boolean) return false;  // every non-zero byte reads as 1: not visible
  return v == poison_value(dtype);
}

void poison(const Array& a) {
  const std::size_t n = static_cast<std::size_t>(a.numel());
  if (a.dtype() == DType::u8 || a.dtype() == DType::boolean) {
    std::vector<uint8_t> bytes(n, kPoisonByte);
    a.copy_from(Array::wrap(bytes.data(), a.shape(), a.dtype(), Device::cpu()));
    return;
  }
  a.copy_from(from_doubles(std::vector<double>(n, poison_value(a.dtype())), a.shape(), a.dtype(),
                           Device::cpu()));
}

Array poisoned(const Shape& shape, DType dtype, Device device) {
  Array a = Array::empty(shape, dtype, device);
  poison(a);
  return a;
}

void poison_padding(const Array& a, const RaggedRows& rows) {
  if (a.ndim() == 0 || a.shape()[0] != rows.rows)
    throw std::invalid_argument("poison_padding: " + a.describe() + " does not have " +
                                std::to_string(rows.rows) + " rows");
  const Array host = a.to(Device::cpu());
  const Array one = poisoned({1}, a.dtype());
  const std::size_t item = itemsize(a.dtype());
  const int64_t row_elems = rows.rows == 0 ? 0 : a.numel() / rows.rows;
  auto* base = static_cast<uint8_t*>(host.data());
  for (int64_t r = 0; r < rows.rows; ++r) {
    if (!rows.is_padding(r)) continue;
    for (int64_t e = 0; e < row_elems; ++e)
      std::memcpy(base + (r * row_elems + e) * item, one.data(), item);
  }
  a.copy_from(host);
}

}  // namespace eagle::test
