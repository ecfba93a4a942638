#include "engines/reference/dense_io.hpp"

#include <cmath>

namespace eagle::reference {

namespace {

template <class T>
double load(const T& v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
    return static_cast<float>(v);
  else
    return static_cast<double>(v);
}

template <class T>
T store(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (std::is_integral_v<T>) {
    return std::isfinite(v) ? static_cast<T>(std::trunc(v)) : T{};
  } else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
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
  Dense out(Dims(b.dims, b.dims + b.ndim));
  if (b.dtype == DType::boolean) {
    // Read as bytes: boolean storage from DLPack or wrap may hold any non-zero byte for true,
    // and loading such a byte as a bool is undefined.
    const auto* p = static_cast<const uint8_t*>(b.data);
    for_each_offset(b, [&](int64_t i, int64_t off) { out.data[i] = p[off] != 0 ? 1.0 : 0.0; });
    return out;
  }
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
    for_each_offset(b, [&](int64_t i, int64_t off) { p[off] = store<T>(value.data[i]); });
  });
}

void round_to(Dense& value, DType dtype) {
  if (dtype == DType::f64) return;
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    for (double& v : value.data) {
      // NaN stays NaN for floats; integers hold no NaN (store gives 0).
      v = load(store<T>(v));
    }
  });
}

std::vector<int64_t> as_integers(const Dense& value) {
  std::vector<int64_t> out(value.data.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(value.data[i]);
  return out;
}

}  // namespace eagle::reference
