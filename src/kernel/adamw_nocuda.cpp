// A build without CUDA: the optimizer kernels have CPU implementations only.
#include "kernel/adamw_impl.hpp"

namespace eagle::detail {

void attach_cuda_adamw(KernelImpl&, int) {}
void attach_cuda_step_count(KernelImpl&) {}

}  // namespace eagle::detail
