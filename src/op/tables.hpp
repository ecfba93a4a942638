// Internal: the three op tables (one file each) and helpers their shape rules share.
#pragma once

#include <string>
#include <vector>

#include "eagle/op/schema.hpp"

namespace eagle::op {

std::string dims_str(const Dims& dims);

namespace detail {

const std::vector<OpSchema>& pointwise_ops();
const std::vector<OpSchema>& structured_ops();
const std::vector<OpSchema>& captured_ops();

// numpy broadcasting of two shapes; fails naming `port` of ctx on a mismatch.
Dims broadcast(const InferContext& ctx, const std::string& port, const Dims& a, const Dims& b);

// Derivative rules (OpSchema::grad) of the pointwise table (pointwise_grads.cpp).
void pointwise_grad_identity(GradContext& c);
void pointwise_grad_cast(GradContext& c);
void pointwise_grad_zero(GradContext& c);
void pointwise_grad_neg(GradContext& c);
void pointwise_grad_abs(GradContext& c);
void pointwise_grad_exp(GradContext& c);
void pointwise_grad_log(GradContext& c);
void pointwise_grad_sqrt(GradContext& c);
void pointwise_grad_rsqrt(GradContext& c);
void pointwise_grad_reciprocal(GradContext& c);
void pointwise_grad_square(GradContext& c);
void pointwise_grad_tanh(GradContext& c);
void pointwise_grad_sigmoid(GradContext& c);
void pointwise_grad_relu(GradContext& c);
void pointwise_grad_gelu(GradContext& c);
void pointwise_grad_gelu_tanh(GradContext& c);
void pointwise_grad_silu(GradContext& c);
void pointwise_grad_softplus(GradContext& c);
void pointwise_grad_erf(GradContext& c);
void pointwise_grad_sin(GradContext& c);
void pointwise_grad_cos(GradContext& c);
void pointwise_grad_add(GradContext& c);
void pointwise_grad_sub(GradContext& c);
void pointwise_grad_mul(GradContext& c);
void pointwise_grad_div(GradContext& c);
void pointwise_grad_max(GradContext& c);
void pointwise_grad_min(GradContext& c);
void pointwise_grad_pow(GradContext& c);
void pointwise_grad_mod(GradContext& c);
void pointwise_grad_where(GradContext& c);
void pointwise_grad_gelu_backward(GradContext& c);
void pointwise_grad_silu_backward(GradContext& c);

// Derivative rules of the structured and captured ops (structured_grads.cpp, captured_grads.cpp).
void reduction_grad(GradContext& c);
void softmax_grad(GradContext& c);
void layer_norm_grad(GradContext& c);
void rms_norm_grad(GradContext& c);
void matmul_grad(GradContext& c);
void embedding_grad(GradContext& c);
void cross_entropy_grad(GradContext& c);
void sdpa_grad(GradContext& c);
void delta_rule_grad(GradContext& c);  // gdn, kda, gdn2 through their _bwd ops

}  // namespace detail
}  // namespace eagle::op
