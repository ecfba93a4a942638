// Internal: the AdamW arithmetic shared by the CPU and CUDA implementations
// (eagle/kernel/optim.hpp).
#pragma once

#include <cmath>
#include <cstdint>

#include "eagle/core/hd.hpp"
#include "eagle/kernel/kernel.hpp"

namespace eagle::detail {

// Array slots of the adamw argument block: count, then four per tensor.
inline constexpr int kAdamwParam = 0, kAdamwGrad = 1, kAdamwM = 2, kAdamwV = 3;
EAGLE_HD constexpr int adamw_slot(int tensor, int which) {
  return 1 + 4 * tensor + which;
}
inline constexpr int kAdamwScalars = 5;  // lr, beta1, beta2, eps, weight_decay

// What every element of one step shares, computed once per call (thread): the bias corrections.
struct AdamwStep {
  float lr, beta1, beta2, eps, decay;  // decay = 1 - lr * weight_decay
  float step_size;                     // lr / (1 - beta1^t)
  float inv_sqrt_bc2;                  // 1 / sqrt(1 - beta2^t)
};

template <class Args>
EAGLE_HD AdamwStep adamw_step(const Args& a) {
  const double lr = a.scalars[0].f, b1 = a.scalars[1].f, b2 = a.scalars[2].f;
  const int64_t t = *static_cast<const int64_t*>(a.arrays[0].data);
  const double td = static_cast<double>(t < 1 ? 1 : t);  // a counter never advanced counts as 1
  AdamwStep s;
  s.lr = static_cast<float>(lr);
  s.beta1 = static_cast<float>(b1);
  s.beta2 = static_cast<float>(b2);
  s.eps = static_cast<float>(a.scalars[3].f);
  s.decay = static_cast<float>(1.0 - lr * a.scalars[4].f);
  s.step_size = static_cast<float>(lr / (1.0 - pow(b1, td)));
  s.inv_sqrt_bc2 = static_cast<float>(1.0 / sqrt(1.0 - pow(b2, td)));
  return s;
}

EAGLE_HD void adamw_update(const AdamwStep& s, float& p, float g, float& m, float& v) {
  p *= s.decay;
  m = s.beta1 * m + (1.0f - s.beta1) * g;
  v = s.beta2 * v + (1.0f - s.beta2) * g * g;
  p -= s.step_size * m / (sqrtf(v) * s.inv_sqrt_bc2 + s.eps);
}

// The CUDA side (adamw_cuda.cu): the function for `tensors` tensors and its grid; a build
// without CUDA leaves impl as it is (adamw_nocuda.cpp).
void attach_cuda_adamw(KernelImpl& impl, int tensors);
void attach_cuda_step_count(KernelImpl& impl);

}  // namespace eagle::detail
