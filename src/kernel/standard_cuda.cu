// CUDA implementations of the standard kernels. Elementwise kernels are grid-stride loops;
// reductions are CUB calls, captured as opaque sequences.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cub/device/device_reduce.cuh>

#include "eagle/core/error.hpp"
#include "eagle/kernel/cuda_function.hpp"
#include "kernel/cuda_numeric.cuh"
#include "kernel/standard_impl.hpp"

namespace eagle::detail {

namespace {

template <EwOp op, class T>
__global__ void elementwise_kernel(const KernelArgsN<ew_arrays(op), ew_scalars(op)> a) {
  using Acc = typename acc_of<T>::type;
  constexpr int out_index = ew_output_index(op);
  T* out = static_cast<T*>(a.arrays[out_index].data);
  const int64_t n = a.arrays[out_index].numel;
  auto load = [&a](int arg, int64_t i) -> Acc {
    return to_acc(static_cast<const T*>(a.arrays[arg].data)[i]);
  };
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    out[i] = from_acc<T>(ew_apply<op, Acc>(a, i, load));
}

template <EwOp op>
CudaLaunchShape elementwise_shape(const KernelArgs& a, const DeviceProperties& device) {
  constexpr unsigned kThreads = 256;
  const int64_t n = a.arrays[ew_output_index(op)].numel;
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  // Enough blocks to fill the device several times over; the loop strides over the rest.
  const int64_t cap = std::max(1, device.multiprocessors) * 16;
  CudaLaunchShape s;
  s.grid[0] = static_cast<unsigned>(std::max<int64_t>(1, std::min(wanted, cap)));
  s.block[0] = kThreads;
  return s;
}

template <EwOp op, class T>
void attach(KernelImpl& impl) {
  impl.cuda_function = cuda_function(&elementwise_kernel<op, typename device_type<T>::type>);
  impl.cuda_shape = &elementwise_shape<op>;
}

template <EwOp op>
void attach_op(KernelImpl& impl, DType d) {
  switch (d) {
    case DType::f64:
      return attach<op, double>(impl);
    case DType::f32:
      return attach<op, float>(impl);
    case DType::f16:
      return attach<op, half>(impl);
    case DType::bf16:
      return attach<op, bfloat16>(impl);
    case DType::i64:
      return attach<op, int64_t>(impl);
    case DType::i32:
      return attach<op, int32_t>(impl);
    case DType::u32:
      return attach<op, uint32_t>(impl);
    default:
      return;
  }
}

struct MaxOp {
  template <class T>
  __device__ __forceinline__ T operator()(const T& a, const T& b) const {
    return a < b ? b : a;
  }
};

// The identity of max, as on the CPU: -inf for floats, the lowest value for integers.
template <class T>
T max_identity() {
  if constexpr (cuda::std::numeric_limits<T>::has_infinity) {
    return -cuda::std::numeric_limits<T>::infinity();
  } else {
    return cuda::std::numeric_limits<T>::lowest();
  }
}

// One CUB call: with workspace == nullptr it only reports the bytes it needs.
template <ReduceOp op, class T>
cudaError_t cub_reduce(const KernelArgs& a, void* workspace, std::size_t& bytes, cudaStream_t s) {
  const T* in = static_cast<const T*>(a.arrays[0].data);
  T* out = static_cast<T*>(a.arrays[1].data);
  const auto n = a.arrays[0].numel;
  if constexpr (op == ReduceOp::sum) {
    return cub::DeviceReduce::Sum(workspace, bytes, in, out, n, s);
  } else {
    return cub::DeviceReduce::Reduce(workspace, bytes, in, out, n, MaxOp{}, max_identity<T>(), s);
  }
}

template <ReduceOp op, class T>
std::size_t reduce_workspace(const KernelArgs& a) {
  std::size_t bytes = 0;
  cub_reduce<op, T>(a, nullptr, bytes, nullptr);
  return bytes;
}

template <ReduceOp op, class T>
void reduce_capture(const KernelArgs& a, void* workspace, void* stream) {
  std::size_t bytes = reduce_workspace<op, T>(a);
  cudaError_t err = cub_reduce<op, T>(a, workspace, bytes, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess)
    throw CudaError(std::string("cub::DeviceReduce failed: ") + cudaGetErrorString(err));
}

template <ReduceOp op, class T>
void attach_reduce_t(KernelImpl& impl) {
  impl.cuda_capture = &reduce_capture<op, T>;
  impl.cuda_workspace = &reduce_workspace<op, T>;
}

template <ReduceOp op>
void attach_reduce_op(KernelImpl& impl, DType d) {
  switch (d) {
    case DType::f64:
      return attach_reduce_t<op, double>(impl);
    case DType::f32:
      return attach_reduce_t<op, float>(impl);
    case DType::i64:
      return attach_reduce_t<op, int64_t>(impl);
    case DType::i32:
      return attach_reduce_t<op, int32_t>(impl);
    default:
      return;
  }
}

}  // namespace

void attach_cuda_elementwise(KernelImpl& impl, EwOp op, DType dtype) {
  switch (op) {
    case EwOp::fill:
      return attach_op<EwOp::fill>(impl, dtype);
    case EwOp::copy:
      return attach_op<EwOp::copy>(impl, dtype);
    case EwOp::scale:
      return attach_op<EwOp::scale>(impl, dtype);
    case EwOp::axpy:
      return attach_op<EwOp::axpy>(impl, dtype);
    case EwOp::add:
      return attach_op<EwOp::add>(impl, dtype);
    case EwOp::mul:
      return attach_op<EwOp::mul>(impl, dtype);
    case EwOp::where:
      return attach_op<EwOp::where>(impl, dtype);
    case EwOp::broadcast:
      return attach_op<EwOp::broadcast>(impl, dtype);
    case EwOp::equal_mask:
      return attach_op<EwOp::equal_mask>(impl, dtype);
    case EwOp::mul_div:
      return attach_op<EwOp::mul_div>(impl, dtype);
  }
}

void attach_cuda_reduce(KernelImpl& impl, ReduceOp op, DType dtype) {
  if (op == ReduceOp::sum) {
    attach_reduce_op<ReduceOp::sum>(impl, dtype);
  } else {
    attach_reduce_op<ReduceOp::max>(impl, dtype);
  }
}

}  // namespace eagle::detail
