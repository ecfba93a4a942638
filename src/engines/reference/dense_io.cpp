#include "engines/reference/dense_io.hpp"

#include <cmath>
#include <type_traits>

#include "eagle/core/convert.hpp"

namespace eagle::reference {

namespace {

template <class T>
double load(const T& v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
    return static_cast<float>(v);
  else
    return static_cast<double>(v);
}

// A real value in a floating dtype (16-bit formats round through float).
template <class T>
T store_real(double v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

template <class T>
constexpr bool kIntegerType = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Element i of `value` in the integer dtype T: exact values wrap (two's complement, like an
// integer cast), real values saturate (convert.hpp: truncated, clamped, NaN -> 0).
template <class T>
T store_int(const Dense& value, std::size_t i) {
  if (value.integer) return static_cast<T>(value.ints[i]);
  return saturating_cast<T>(value.data[i]);
}

bool truth(const Dense& value, std::size_t i) {
  return value.integer ? value.ints[i] != 0 : value.data[i] != 0;  // NaN is true
}

// Visits the byte offset (in elements) of every element of `b` in row-major order.
template <class F>
void for_each_offset(const plan::OperandBuffer& b, const F& f) {
  const int64_t n = b.numel();
  if (n == 0) return;
  int64_t index[plan::kMaxOperandDims] = {};
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(i, offset);
    for (int d = b.ndim - 1; d >= 0; --d) {
      offset += b.strides[d];
      if (++index[d] < b.dims[d]) break;
      offset -= b.strides[d] * b.dims[d];
      index[d] = 0;
    }
  }
}

}  // namespace

Dense gather(const plan::OperandBuffer& b) {
  const Dims dims(b.dims, b.dims + b.ndim);
  if (b.dtype == DType::boolean) {
    // Read as bytes: boolean storage from DLPack or wrap may hold any non-zero byte for true,
    // and loading such a byte as a bool is undefined.
    std::vector<int64_t> v(static_cast<std::size_t>(b.numel()));
    const auto* p = static_cast<const uint8_t*>(b.data);
    for_each_offset(b, [&](int64_t i, int64_t off) { v[i] = p[off] != 0 ? 1 : 0; });
    return Dense::of_ints(dims, std::move(v));
  }
  if (!is_floating(b.dtype)) {
    // Exactly: an i64 above 2^53 has no double.
    std::vector<int64_t> v(static_cast<std::size_t>(b.numel()));
    visit_dtype(b.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* p = static_cast<const T*>(b.data);
      for_each_offset(b, [&](int64_t i, int64_t off) { v[i] = static_cast<int64_t>(p[off]); });
    });
    return Dense::of_ints(dims, std::move(v));
  }
  Dense out(dims);
  visit_dtype(b.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* p = static_cast<const T*>(b.data);
    for_each_offset(b, [&](int64_t i, int64_t off) { out.data[i] = load(p[off]); });
  });
  return out;
}

void scatter(const Dense& value, const plan::OperandBuffer& b) {
  visit_dtype(b.dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = static_cast<T*>(b.data);
    for_each_offset(b, [&](int64_t i, int64_t off) {
      const auto k = static_cast<std::size_t>(i);
      if constexpr (std::is_same_v<T, bool>)
        p[off] = truth(value, k);
      else if constexpr (kIntegerType<T>)
        p[off] = store_int<T>(value, k);
      else
        p[off] = store_real<T>(value.data[k]);
    });
  });
}

void round_to(Dense& value, DType dtype) {
  if (is_floating(dtype)) {
    value.integer = false;  // an integer result becomes a real one
    value.ints.clear();
    if (dtype == DType::f64) return;
    visit_dtype(dtype, [&](auto zero) {
      using T = decltype(zero);
      if constexpr (!kIntegerType<T> && !std::is_same_v<T, bool>)
        for (double& v : value.data) v = load(store_real<T>(v));  // NaN stays NaN
    });
    return;
  }
  std::vector<int64_t> v(value.data.size());
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, bool>)
        v[i] = truth(value, i) ? 1 : 0;
      else if constexpr (kIntegerType<T>)
        v[i] = static_cast<int64_t>(store_int<T>(value, i));
    }
  });
  value = Dense::of_ints(std::move(value.dims), std::move(v));
}

std::vector<int64_t> as_integers(const Dense& value) {
  if (value.integer) return value.ints;
  std::vector<int64_t> out(value.data.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = saturating_cast<int64_t>(value.data[i]);
  return out;
}

}  // namespace eagle::reference
