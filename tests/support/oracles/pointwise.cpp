#include "oracles/pointwise.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>

namespace eagle::test::oracle {

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double softplus(double x) {
  return std::log1p(std::exp(x));
}

namespace {

double truth(bool b) {
  return b ? 1.0 : 0.0;
}

const std::map<std::string, Pointwise, std::less<>>& table() {
  using V = const std::vector<double>&;
  static const std::map<std::string, Pointwise, std::less<>> refs = {
      {"identity", {[](V x) { return x[0]; }}},
      {"neg", {[](V x) { return -x[0]; }}},
      {"abs", {[](V x) { return std::abs(x[0]); }}},
      {"exp", {[](V x) { return std::exp(x[0]); }}},
      {"log", {[](V x) { return std::log(x[0]); }, {0.05, 3}}},
      {"sqrt", {[](V x) { return std::sqrt(x[0]); }, {0.05, 3}}},
      {"rsqrt", {[](V x) { return 1 / std::sqrt(x[0]); }, {0.05, 3}}},
      {"reciprocal", {[](V x) { return 1 / x[0]; }, {0.2, 3}}},
      {"square", {[](V x) { return x[0] * x[0]; }}},
      {"tanh", {[](V x) { return std::tanh(x[0]); }}},
      {"sigmoid", {[](V x) { return sigmoid(x[0]); }}},
      {"relu", {[](V x) { return std::max(x[0], 0.0); }}},
      {"gelu", {[](V x) { return 0.5 * x[0] * (1 + std::erf(x[0] / std::sqrt(2.0))); }}},
      {"gelu_tanh", {[](V x) {
         const double c = std::sqrt(2 / std::numbers::pi);
         return 0.5 * x[0] * (1 + std::tanh(c * (x[0] + 0.044715 * std::pow(x[0], 3))));
       }}},
      {"silu", {[](V x) { return x[0] / (1 + std::exp(-x[0])); }}},
      {"softplus", {[](V x) { return softplus(x[0]); }}},
      {"erf", {[](V x) { return std::erf(x[0]); }}},
      {"sin", {[](V x) { return std::sin(x[0]); }}},
      {"cos", {[](V x) { return std::cos(x[0]); }}},
      {"floor", {[](V x) { return std::floor(x[0]); }, {-3, 3}}},
      {"ceil", {[](V x) { return std::ceil(x[0]); }, {-3, 3}}},
      {"logical_not", {[](V x) { return truth(x[0] == 0); }}},
      {"cast", {[](V x) { return x[0]; }}},  // the value; the caller rounds to the target dtype
      {"add", {[](V x) { return x[0] + x[1]; }}},
      {"sub", {[](V x) { return x[0] - x[1]; }}},
      {"mul", {[](V x) { return x[0] * x[1]; }}},
      {"div", {[](V x) { return x[0] / x[1]; }, {-2, 2}, {0.3, 2}}},
      {"max", {[](V x) { return std::max(x[0], x[1]); }}},
      {"min", {[](V x) { return std::min(x[0], x[1]); }}},
      {"pow", {[](V x) { return std::pow(x[0], x[1]); }, {0.1, 2}, {-2, 2}}},
      {"mod", {[](V x) { return std::fmod(x[0], x[1]); }, {-3, 3}, {0.4, 1.5}}},
      // Both cross their derivative's root inside b's range (see Pointwise::cancel).
      {"gelu_backward",
       {[](V x) {
          const double pdf = std::exp(-x[1] * x[1] / 2) / std::sqrt(2 * std::numbers::pi);
          return x[0] * (0.5 * (1 + std::erf(x[1] / std::sqrt(2.0))) + x[1] * pdf);
        },
        {-2, 2},
        {-3, 3},
        1e-6}},
      {"silu_backward",
       {[](V x) {
          const double s = 1 / (1 + std::exp(-x[1]));
          return x[0] * (s + x[1] * s * (1 - s));
        },
        {-2, 2},
        {-3, 3},
        1e-6}},
      {"cmp_eq", {[](V x) { return truth(x[0] == x[1]); }}},
      {"cmp_neq", {[](V x) { return truth(x[0] != x[1]); }}},
      {"cmp_lt", {[](V x) { return truth(x[0] < x[1]); }}},
      {"cmp_le", {[](V x) { return truth(x[0] <= x[1]); }}},
      {"cmp_gt", {[](V x) { return truth(x[0] > x[1]); }}},
      {"cmp_ge", {[](V x) { return truth(x[0] >= x[1]); }}},
      {"logical_and", {[](V x) { return truth(x[0] != 0 && x[1] != 0); }}},
      {"logical_or", {[](V x) { return truth(x[0] != 0 || x[1] != 0); }}},
      {"where", {[](V x) { return x[0] != 0 ? x[1] : x[2]; }}},
  };
  return refs;
}

}  // namespace

const Pointwise* pointwise(std::string_view op) {
  const auto it = table().find(op);
  return it == table().end() ? nullptr : &it->second;
}

bool yields_boolean(std::string_view op) {
  return op.starts_with("cmp_") || op.starts_with("logical_");
}

}  // namespace eagle::test::oracle
