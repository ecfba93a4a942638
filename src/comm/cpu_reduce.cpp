#include "comm/cpu_reduce.hpp"

#include <algorithm>
#include <stdexcept>
#include <type_traits>

namespace eagle::comm::detail {

namespace {

// What a reduction of T runs in.
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, half> || std::is_same_v<T, bfloat16>, float, T>;

template <class A>
A combine(ReduceOp op, A a, A b) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      if constexpr (std::is_integral_v<A>) {
        // Wrapping, as NCCL's integer sums do (and no signed overflow).
        using U = std::make_unsigned_t<A>;
        return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
      } else {
        return a + b;
      }
    case ReduceOp::max:
      return b > a ? b : a;
    case ReduceOp::min:
      return b < a ? b : a;
  }
  return a;
}

template <class T>
void reduce_typed(ReduceOp op, const void* const* inputs, int k, void* const* outputs, int n_out,
                  int64_t count) {
  using A = Acc<T>;
  constexpr int64_t kBlock = 512;
  A acc[kBlock];
  for (int64_t begin = 0; begin < count; begin += kBlock) {
    const int64_t n = std::min(kBlock, count - begin);
    const T* first = static_cast<const T*>(inputs[0]) + begin;
    for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<A>(first[i]);
    for (int r = 1; r < k; ++r) {
      const T* in = static_cast<const T*>(inputs[r]) + begin;
      for (int64_t i = 0; i < n; ++i) acc[i] = combine(op, acc[i], static_cast<A>(in[i]));
    }
    if (op == ReduceOp::avg) {
      if constexpr (!std::is_integral_v<A>) {
        const A ranks = static_cast<A>(k);
        for (int64_t i = 0; i < n; ++i) acc[i] /= ranks;
      }
    }
    for (int o = 0; o < n_out; ++o) {
      T* out = static_cast<T*>(outputs[o]) + begin;
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(acc[i]);
    }
  }
}

}  // namespace

bool collective_dtype(DType dtype) {
  switch (dtype) {
    case DType::f64:
    case DType::f32:
    case DType::f16:
    case DType::bf16:
    case DType::i64:
    case DType::i32:
      return true;
    default:
      return false;
  }
}

bool reduce_op_serves(ReduceOp op, DType dtype) {
  return collective_dtype(dtype) && (op != ReduceOp::avg || is_floating(dtype));
}

void reduce_into(DType dtype, ReduceOp op, const void* const* inputs, int k, void* const* outputs,
                 int n_out, int64_t count) {
  switch (dtype) {
    case DType::f64:
      return reduce_typed<double>(op, inputs, k, outputs, n_out, count);
    case DType::f32:
      return reduce_typed<float>(op, inputs, k, outputs, n_out, count);
    case DType::f16:
      return reduce_typed<half>(op, inputs, k, outputs, n_out, count);
    case DType::bf16:
      return reduce_typed<bfloat16>(op, inputs, k, outputs, n_out, count);
    case DType::i64:
      return reduce_typed<int64_t>(op, inputs, k, outputs, n_out, count);
    case DType::i32:
      return reduce_typed<int32_t>(op, inputs, k, outputs, n_out, count);
    default:
      throw std::logic_error("comm: reduce_into called for a dtype the collectives refuse");
  }
}

}  // namespace eagle::comm::detail
