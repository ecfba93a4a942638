#include "exec/cuda/driver.hpp"

#ifdef EAGLE_HAVE_CUDA
#include <string>

#include "eagle/core/error.hpp"

namespace eagle::detail {

namespace {

template <class Fn>
void resolve_optional(const char* symbol, Fn& out) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, 12030, cudaEnableDefault, &status) ==
          cudaSuccess &&
      status == cudaDriverEntryPointSuccess)
    out = reinterpret_cast<Fn>(fn);
}

template <class Fn>
void resolve(const char* symbol, Fn& out) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  const cudaError_t err =
      cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &status);
  if (err != cudaSuccess || status != cudaDriverEntryPointSuccess || !fn)
    throw CudaError(std::string("the CUDA driver does not provide ") + symbol + " (12.0 API)");
  out = reinterpret_cast<Fn>(fn);
}

}  // namespace

const DriverGraphCalls& driver_graph_calls() {
  static const DriverGraphCalls calls = [] {
    DriverGraphCalls c;
    resolve("cuGraphKernelNodeGetParams", c.kernel_node_get_params);
    resolve("cuGraphAddKernelNode", c.add_kernel_node);
    resolve("cuGraphExecKernelNodeSetParams", c.exec_kernel_node_set_params);
    resolve("cuGraphKernelNodeCopyAttributes", c.kernel_node_copy_attributes);
    resolve_optional("cuFuncGetName", c.func_get_name);
    resolve_optional("cuKernelGetName", c.kernel_get_name);
    return c;
  }();
  return calls;
}

void check_driver(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS)
    throw CudaError(std::string(what) + " failed: CUresult " + std::to_string(result));
}

}  // namespace eagle::detail
#endif
