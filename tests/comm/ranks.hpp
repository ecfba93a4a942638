// Helpers of the comm tests: ranks as threads, and the serial computation every collective is
// compared with.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "eagle/eagle.hpp"

namespace eagle::test {

// Runs body(rank) on one thread per rank and joins them; returns what each rank threw ("" when
// it threw nothing).
inline std::vector<std::string> on_ranks(int ranks, const std::function<void(int)>& body) {
  std::vector<std::string> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = std::string("threw: ") + e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  return errors;
}

// `v` as the dtype holds it.
inline double round_to(DType dtype, double v) {
  switch (dtype) {
    case DType::f32:
      return static_cast<float>(v);
    case DType::f16:
      return static_cast<float>(half(static_cast<float>(v)));
    case DType::bf16:
      return static_cast<float>(bfloat16(static_cast<float>(v)));
    default:
      return v;
  }
}

// The serial reduction of xs[0], xs[1], ... (ranks in order), element by element: in float for
// f32, f16 and bf16, in double for f64, exactly for integers (the tests' integers are small);
// avg divides the sum by the rank count; then rounded to the dtype.
inline std::vector<double> serial_reduce(const std::vector<std::vector<double>>& xs,
                                         comm::ReduceOp op, DType dtype) {
  const std::size_t n = xs[0].size(), k = xs.size();
  const bool single = dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16;
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    double acc = xs[0][i];
    float facc = static_cast<float>(xs[0][i]);
    for (std::size_t r = 1; r < k; ++r) {
      const double v = xs[r][i];
      switch (op) {
        case comm::ReduceOp::sum:
        case comm::ReduceOp::avg:
          acc += v;
          facc += static_cast<float>(v);
          break;
        case comm::ReduceOp::max:
          acc = std::max(acc, v);
          facc = std::max(facc, static_cast<float>(v));
          break;
        case comm::ReduceOp::min:
          acc = std::min(acc, v);
          facc = std::min(facc, static_cast<float>(v));
          break;
      }
    }
    if (op == comm::ReduceOp::avg) {
      acc /= static_cast<double>(k);
      facc /= static_cast<float>(k);
    }
    out[i] = round_to(dtype, single ? static_cast<double>(facc) : acc);
  }
  return out;
}

// Whether two CPU arrays hold the same bytes.
inline bool same_bytes(const Array& a, const Array& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

}  // namespace eagle::test
