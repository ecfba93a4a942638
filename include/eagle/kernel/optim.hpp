// Optimizer kernels: a fused multi-tensor AdamW and the step counter it reads, for training steps
// recorded as one graph (forward, reverse, update). Each has a CPU and a CUDA implementation and
// declares no_gradient (an update is not differentiated).
#pragma once

#include "eagle/kernel/kernel.hpp"

namespace eagle::kernels {

// The most tensors one adamw call updates: its argument block (1 + 4 n arrays) stays within the
// 4 KiB every CUDA kernel parameter list may hold. Record more tensors as several calls.
inline constexpr int kAdamwMaxTensors = 6;

// count [1] i64 (read-write): count += 1. The step counter adamw reads, kept on the device so a
// replayed graph advances it without the host.
const Kernel& step_count();

// AdamW over n tensors (1 <= n <= kAdamwMaxTensors) in one launch, updating in place:
//   arrays: count [1] i64 (read; t = count, the step being taken, >= 1), then per tensor j
//           param_j f32 (read-write), grad_j f32 (read, param_j's shape), m_j, v_j f32
//           (read-write, param_j's shape: the first and second moments)
//   scalars: lr, beta1, beta2, eps, weight_decay
//   p -= lr * weight_decay * p                       (decoupled weight decay)
//   m = beta1 m + (1 - beta1) g,  v = beta2 v + (1 - beta2) g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// Refused (InvalidArgument): lr < 0, a beta outside [0, 1), eps <= 0, weight_decay < 0, a dtype
// or shape that differs from the above.
const Kernel& adamw(int tensors);

}  // namespace eagle::kernels
