#include "engines/reference/math/pointwise.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "eagle/core/error.hpp"

namespace eagle::reference {
namespace {

template <class Fn>
struct NamedFn {
  std::string_view name;
  Fn fn;
};

// exp of a non-positive number only, so neither branch overflows.
double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

// Written so that NaN in either operand gives NaN (std::fmax would drop it).
double max_nan(double a, double b) {
  return (a > b || std::isnan(a)) ? a : b;
}
double min_nan(double a, double b) {
  return (a < b || std::isnan(a)) ? a : b;
}

double truth(bool b) {
  return b ? 1.0 : 0.0;
}

const NamedFn<UnaryFn> kUnary[] = {
    {"identity", [](double x) { return x; }},
    {"neg", [](double x) { return -x; }},
    {"abs", [](double x) { return std::fabs(x); }},
    {"exp", [](double x) { return std::exp(x); }},
    {"log", [](double x) { return std::log(x); }},
    {"sqrt", [](double x) { return std::sqrt(x); }},
    {"rsqrt", [](double x) { return 1.0 / std::sqrt(x); }},
    {"reciprocal", [](double x) { return 1.0 / x; }},
    {"square", [](double x) { return x * x; }},
    {"tanh", [](double x) { return std::tanh(x); }},
    {"sigmoid", sigmoid},
    // x < 0 rather than x > 0 so that NaN passes through.
    {"relu", [](double x) { return x < 0 ? 0.0 : x; }},
    {"gelu", [](double x) { return x * 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2)); }},
    {"gelu_tanh",
     [](double x) {
       const double k = std::numbers::sqrt2 / std::sqrt(std::numbers::pi);  // sqrt(2/pi)
       return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
     }},
    {"silu", [](double x) { return x * sigmoid(x); }},
    // log1p(exp(x)) = max(x, 0) + log1p(exp(-|x|)): exp never overflows.
    {"softplus", [](double x) { return max_nan(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }},
    {"erf", [](double x) { return std::erf(x); }},
    {"sin", [](double x) { return std::sin(x); }},
    {"cos", [](double x) { return std::cos(x); }},
    {"floor", [](double x) { return std::floor(x); }},
    {"ceil", [](double x) { return std::ceil(x); }},
    {"logical_not", [](double x) { return truth(x == 0); }},
    // The engine converts the dtype when it scatters the result; the value is unchanged.
    {"cast", [](double x) { return x; }},
};

const NamedFn<BinaryFn> kBinary[] = {
    {"add", [](double a, double b) { return a + b; }},
    {"sub", [](double a, double b) { return a - b; }},
    {"mul", [](double a, double b) { return a * b; }},
    {"div", [](double a, double b) { return a / b; }},
    {"max", max_nan},
    {"min", min_nan},
    {"pow", [](double a, double b) { return std::pow(a, b); }},
    {"mod", [](double a, double b) { return std::fmod(a, b); }},
    // a f'(b): the backward of gelu and silu (a the cotangent, b the forward input).
    {"gelu_backward",
     [](double a, double b) {
       const double pdf = std::exp(-0.5 * b * b) * std::numbers::inv_sqrtpi / std::numbers::sqrt2;
       return a * (0.5 * (1.0 + std::erf(b / std::numbers::sqrt2)) + b * pdf);
     }},
    {"silu_backward",
     [](double a, double b) {
       const double s = sigmoid(b);
       return a * s * (1.0 + b * (1.0 - s));
     }},
    {"cmp_eq", [](double a, double b) { return truth(a == b); }},
    {"cmp_neq", [](double a, double b) { return truth(a != b); }},
    {"cmp_lt", [](double a, double b) { return truth(a < b); }},
    {"cmp_le", [](double a, double b) { return truth(a <= b); }},
    {"cmp_gt", [](double a, double b) { return truth(a > b); }},
    {"cmp_ge", [](double a, double b) { return truth(a >= b); }},
    {"logical_and", [](double a, double b) { return truth(a != 0 && b != 0); }},
    {"logical_or", [](double a, double b) { return truth(a != 0 || b != 0); }},
};

// Two's-complement arithmetic: through uint64, where overflow is defined (modulo 2^64).
int64_t wrap(uint64_t v) {
  return static_cast<int64_t>(v);  // modulo 2^64 since C++20
}
int64_t wrapping_neg(int64_t x) {
  return wrap(uint64_t{0} - static_cast<uint64_t>(x));
}
int64_t wrapping_mul(int64_t a, int64_t b) {
  return wrap(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
int64_t bit(bool b) {
  return b ? 1 : 0;
}

const NamedFn<IntUnaryFn> kIntUnary[] = {
    {"identity", [](int64_t x) { return x; }},
    {"neg", wrapping_neg},
    {"abs", [](int64_t x) { return x < 0 ? wrapping_neg(x) : x; }},
    {"square", [](int64_t x) { return wrapping_mul(x, x); }},
    {"relu", [](int64_t x) { return x < 0 ? int64_t{0} : x; }},
    {"logical_not", [](int64_t x) { return bit(x == 0); }},
    {"cast", [](int64_t x) { return x; }},  // round_to narrows to the target dtype
};

int64_t wrapping_add(int64_t a, int64_t b) {
  return wrap(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrapping_sub(int64_t a, int64_t b) {
  return wrap(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t int_max(int64_t a, int64_t b) {
  return std::max(a, b);
}
int64_t int_min(int64_t a, int64_t b) {
  return std::min(a, b);
}
int64_t int_eq(int64_t a, int64_t b) {
  return bit(a == b);
}
int64_t int_neq(int64_t a, int64_t b) {
  return bit(a != b);
}
int64_t int_lt(int64_t a, int64_t b) {
  return bit(a < b);
}
int64_t int_le(int64_t a, int64_t b) {
  return bit(a <= b);
}
int64_t int_gt(int64_t a, int64_t b) {
  return bit(a > b);
}
int64_t int_ge(int64_t a, int64_t b) {
  return bit(a >= b);
}
int64_t int_and(int64_t a, int64_t b) {
  return bit(a != 0 && b != 0);
}
int64_t int_or(int64_t a, int64_t b) {
  return bit(a != 0 || b != 0);
}
bool int_div(int64_t a, int64_t b, int64_t* out) {
  if (b == 0) return false;
  *out = b == -1 ? wrapping_neg(a) : a / b;  // INT64_MIN / -1 overflows: wrap
  return true;
}
bool int_mod(int64_t a, int64_t b, int64_t* out) {
  if (b == 0) return false;
  *out = b == -1 ? 0 : a % b;  // INT64_MIN % -1 overflows in C++; the remainder is 0
  return true;
}

// A binary integer op that has a value everywhere.
template <int64_t (*F)(int64_t, int64_t)>
bool always(int64_t a, int64_t b, int64_t* out) {
  *out = F(a, b);
  return true;
}

const NamedFn<IntBinaryFn> kIntBinary[] = {
    {"add", always<wrapping_add>},
    {"sub", always<wrapping_sub>},
    {"mul", always<wrapping_mul>},
    {"div", int_div},
    {"mod", int_mod},
    {"max", always<int_max>},
    {"min", always<int_min>},
    {"cmp_eq", always<int_eq>},
    {"cmp_neq", always<int_neq>},
    {"cmp_lt", always<int_lt>},
    {"cmp_le", always<int_le>},
    {"cmp_gt", always<int_gt>},
    {"cmp_ge", always<int_ge>},
    {"logical_and", always<int_and>},
    {"logical_or", always<int_or>},
};

template <class Fn, std::size_t N>
Fn lookup(const NamedFn<Fn> (&table)[N], std::string_view op) {
  for (const auto& entry : table)
    if (entry.name == op) return entry.fn;
  return nullptr;
}

template <class Fn, std::size_t N>
std::vector<std::string_view> names_of(const NamedFn<Fn> (&table)[N]) {
  std::vector<std::string_view> names;
  for (const auto& entry : table) names.push_back(entry.name);
  return names;
}

// broadcast_dims with the operands named as the calling op knows them, for the message.
Dims broadcast_named(std::string_view op, const Dims& a, std::string_view a_name, const Dims& b,
                     std::string_view b_name) {
  const std::size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (std::size_t k = 1; k <= rank; ++k) {
    const int64_t da = k <= a.size() ? a[a.size() - k] : 1;
    const int64_t db = k <= b.size() ? b[b.size() - k] : 1;
    if (da != db && da != 1 && db != 1)
      throw InvalidArgument(std::string(op) + ": " + std::string(a_name) + " dims " +
                            format_dims(a) + " and " + std::string(b_name) + " dims " +
                            format_dims(b) + " do not broadcast: sizes " + std::to_string(da) +
                            " and " + std::to_string(db) + " at axis -" + std::to_string(k) +
                            " must be equal or one of them 1");
    out[rank - k] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace

UnaryFn unary_fn(std::string_view op) {
  return lookup(kUnary, op);
}
BinaryFn binary_fn(std::string_view op) {
  return lookup(kBinary, op);
}
IntUnaryFn int_unary_fn(std::string_view op) {
  return lookup(kIntUnary, op);
}
IntBinaryFn int_binary_fn(std::string_view op) {
  return lookup(kIntBinary, op);
}

const std::vector<std::string_view>& unary_op_names() {
  static const std::vector<std::string_view> names = names_of(kUnary);
  return names;
}

const std::vector<std::string_view>& binary_op_names() {
  static const std::vector<std::string_view> names = names_of(kBinary);
  return names;
}

std::string format_dims(const Dims& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

Dims broadcast_dims(const Dims& a, const Dims& b) {
  return broadcast_named("broadcast_dims", a, "a", b, "b");
}

std::vector<int64_t> broadcast_index(const Dims& from, const Dims& to) {
  const std::size_t rank = to.size();
  const auto refuse = [&] {
    return InvalidArgument("broadcast_index: from dims " + format_dims(from) +
                           " must broadcast to dims " + format_dims(to) +
                           " (no more axes, each size equal to to's or 1)");
  };
  if (from.size() > rank) throw refuse();
  // Stride of each axis of `to` within `from`: 0 where `from` is missing or stretched.
  std::vector<int64_t> stride(rank, 0);
  int64_t s = 1;
  for (std::size_t k = 1; k <= from.size(); ++k) {
    const int64_t d = from[from.size() - k];
    if (d != 1 && d != to[rank - k]) throw refuse();
    stride[rank - k] = d == 1 ? 0 : s;
    s *= d;
  }
  // Walk `to` in row-major order like an odometer, carrying the offset into `from`.
  std::vector<int64_t> index(static_cast<std::size_t>(count(to)));
  Dims pos(rank, 0);
  int64_t offset = 0;
  for (int64_t& out : index) {
    out = offset;
    for (std::size_t j = rank; j-- > 0;) {
      offset += stride[j];
      if (++pos[j] < to[j]) break;
      offset -= stride[j] * to[j];
      pos[j] = 0;
    }
  }
  return index;
}

Dense map_unary(UnaryFn f, const Dense& x) {
  Dense y(x.dims);
  for (std::size_t i = 0; i < x.data.size(); ++i) y.data[i] = f(x.data[i]);
  return y;
}

Dense map_binary(BinaryFn f, const Dense& a, const Dense& b) {
  Dense y(broadcast_named("map_binary", a.dims, "a", b.dims, "b"));
  const auto ia = broadcast_index(a.dims, y.dims), ib = broadcast_index(b.dims, y.dims);
  for (std::size_t i = 0; i < y.data.size(); ++i) y.data[i] = f(a.data[ia[i]], b.data[ib[i]]);
  return y;
}

Dense map_unary_int(IntUnaryFn f, const Dense& x) {
  std::vector<int64_t> y(x.ints.size());
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = f(x.ints[i]);
  return Dense::of_ints(x.dims, std::move(y));
}

Dense map_binary_int(std::string_view op, IntBinaryFn f, const Dense& a, const Dense& b) {
  const Dims dims = broadcast_named(op, a.dims, "a", b.dims, "b");
  const auto ia = broadcast_index(a.dims, dims), ib = broadcast_index(b.dims, dims);
  std::vector<int64_t> y(ia.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    const int64_t x = a.ints[static_cast<std::size_t>(ia[i])];
    const int64_t z = b.ints[static_cast<std::size_t>(ib[i])];
    if (!f(x, z, &y[i]))
      throw InvalidArgument(std::string(op) + ": b is 0 at element " + std::to_string(i) +
                            " (a = " + std::to_string(x) + "): an integer " + std::string(op) +
                            " by zero has no value");
  }
  return Dense::of_ints(dims, std::move(y));
}

Dense where(const Dense& cond, const Dense& a, const Dense& b) {
  const Dims ca = broadcast_named("where", cond.dims, "cond", a.dims, "a");
  Dense y(broadcast_named("where", ca, "cond and a broadcast", b.dims, "b"));
  const auto ic = broadcast_index(cond.dims, y.dims), ia = broadcast_index(a.dims, y.dims),
             ib = broadcast_index(b.dims, y.dims);
  if (a.integer && b.integer) {
    std::vector<int64_t> v(y.data.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = cond.data[ic[i]] != 0 ? a.ints[ia[i]] : b.ints[ib[i]];
    return Dense::of_ints(y.dims, std::move(v));
  }
  for (std::size_t i = 0; i < y.data.size(); ++i)
    y.data[i] = cond.data[ic[i]] != 0 ? a.data[ia[i]] : b.data[ib[i]];
  return y;
}

}  // namespace eagle::reference
