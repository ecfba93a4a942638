#include "engines/cudnn/loader.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "engines/loader/dynamic_library.hpp"

// cudnn-frontend (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING) resolves every cuDNN call through this
// handle; it declares it and leaves the one definition to the program.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}

namespace eagle::cudnn {

namespace {

// cuDNN 9 is what cudnn-frontend 1.32's graph API needs.
constexpr std::size_t kMinVersion = 90000;

// The file behind a handle: a library found on the loader's path was opened by soname, and the
// status should say which file that was.
std::string file_of(const engines::LoadedLibrary& lib) {
  link_map* map = nullptr;
  if (::dlinfo(lib.handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
    return map->l_name;
  return lib.path;
}

// The CUDA runtime cudnn-frontend opens for its CUDA graph and device wrappers. It dlopens
// "libcudart.so.12" then ".13" by soname, which misses a runtime that only a pip package
// (nvidia/cu13/lib, nvidia/cuda_runtime/lib) holds; CUDNN_FRONTEND_CUDART_LIB_NAME, its own
// override, takes the path found here. A value the user set is kept.
std::string point_frontend_at_cudart() {
  static std::once_flag once;
  static std::string note;
  std::call_once(once, [] {
    if (const char* user = std::getenv("CUDNN_FRONTEND_CUDART_LIB_NAME")) {
      note = std::string("CUDA runtime for cudnn-frontend: ") + user +
             " (CUDNN_FRONTEND_CUDART_LIB_NAME)";
      return;
    }
    const engines::LoadedLibrary rt =
        engines::open_library({"CUDA runtime",
                               "EAGLE_CUDART_LIBRARY",
                               {"libcudart.so.13", "libcudart.so.12"},
                               {"nvidia/cu13/lib", "nvidia/cuda_runtime/lib"}});
    if (!rt) {
      note = "no CUDA runtime for cudnn-frontend's graph calls (" + rt.reason + ")";
      return;
    }
    // Kept open: a full path, so the frontend's dlopen returns this same copy.
    const std::string path = file_of(rt);
    setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", path.c_str(), 0);
    note = "CUDA runtime for cudnn-frontend: " + path;
  });
  return note;
}

std::unique_ptr<CudnnLibrary> load() {
  auto out = std::make_unique<CudnnLibrary>();
  const engines::LoadedLibrary lib = engines::open_library(
      {"cuDNN", "EAGLE_CUDNN_LIBRARY", {"libcudnn.so.9"}, {"nvidia/cudnn/lib"}});
  if (!lib) {
    out->status = lib.reason;
    return out;
  }
  auto get_version = reinterpret_cast<std::size_t (*)()>(lib.symbol("cudnnGetVersion"));
  out->api.create = reinterpret_cast<int (*)(void**)>(lib.symbol("cudnnCreate"));
  out->api.destroy = reinterpret_cast<int (*)(void*)>(lib.symbol("cudnnDestroy"));
  out->api.set_stream = reinterpret_cast<int (*)(void*, void*)>(lib.symbol("cudnnSetStream"));
  out->api.error_string = reinterpret_cast<const char* (*)(int)>(lib.symbol("cudnnGetErrorString"));
  if (!get_version || !out->api.create || !out->api.destroy || !out->api.set_stream ||
      !out->api.error_string) {
    out->status = "cuDNN not used: " + lib.path + " lacks cuDNN's entry points";
    return out;
  }
  out->version = get_version();
  if (out->version < kMinVersion) {
    out->status = "cuDNN not used: " + lib.path + " is cuDNN " + version_string(out->version) +
                  "; the backend needs cuDNN 9";
    return out;
  }
  cudnn_frontend::cudnn_dlhandle = lib.handle;
  out->loaded = true;
  out->status = "cuDNN " + version_string(out->version) + " loaded from " + file_of(lib) + "; " +
                point_frontend_at_cudart();
  return out;
}

}  // namespace

std::string version_string(std::size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

const CudnnLibrary& cudnn_library() {
  static std::mutex mutex;
  // Never freed: plans and handles made from an answer may outlive any caller.
  static auto& by_setting = *new std::map<std::string, std::unique_ptr<CudnnLibrary>>();
  const char* v = std::getenv("EAGLE_CUDNN_LIBRARY");
  const std::string key = v ? std::string("=") + v : std::string();
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<CudnnLibrary>& slot = by_setting[key];
  if (!slot) slot = load();
  return *slot;
}

}  // namespace eagle::cudnn
