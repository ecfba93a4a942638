#include "engines/cudnn/handle.hpp"

#include <atomic>

#include "eagle/core/error.hpp"
#include "engines/cudnn/loader.hpp"
#include "util/cuda_check.hpp"

namespace eagle::cudnn {

namespace {

// The cudnnDestroy of the library that created handles: a later answer of cudnn_library() may
// be for another EAGLE_CUDNN_LIBRARY setting (one that hides cuDNN).
std::atomic<int (*)(void*)> g_destroy{nullptr};

void* create(Device device, void* stream) {
  const CudnnLibrary& lib = cudnn_library();
  if (!lib.loaded) throw NotSupported("cudnn handle: " + lib.status);
  if (!device.is_cuda()) throw InvalidArgument("cudnn handle: " + device.str() + " is no GPU");
  void* h = nullptr;
#ifdef EAGLE_HAVE_CUDA
  // cudnnCreate binds the handle to the calling thread's current device.
  detail::DeviceGuard guard(device.ordinal());
  g_destroy.store(lib.api.destroy);
  const int st = lib.api.create(&h);
  if (st != 0) throw CudaError("cudnnCreate on " + device.str() + " failed: " + status_string(st));
  const int ss = lib.api.set_stream(h, stream);
  if (ss != 0) {
    lib.api.destroy(h);
    throw CudaError("cudnnSetStream failed: " + status_string(ss));
  }
#else
  (void)stream;
  throw NotSupported("cudnn handle: this build of eagle has no CUDA");
#endif
  return h;
}

void set_stream(void* handle, void* stream) {
  const int ss = cudnn_library().api.set_stream(handle, stream);
  if (ss != 0) throw CudaError("cudnnSetStream failed: " + status_string(ss));
}

void destroy(void* handle) noexcept {
  if (int (*destroy_fn)(void*) = g_destroy.load(); handle && destroy_fn) destroy_fn(handle);
}

}  // namespace

const Library& handle_library() {
  static const Library library{"cudnn", &create, &destroy, &set_stream};
  return library;
}

std::string status_string(int status) {
  const CudnnLibrary& lib = cudnn_library();
  const char* s = lib.api.error_string ? lib.api.error_string(status) : nullptr;
  return s ? std::string(s) : "cuDNN status " + std::to_string(status);
}

}  // namespace eagle::cudnn
