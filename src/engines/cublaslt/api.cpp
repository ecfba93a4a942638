#include "engines/cublaslt/api.hpp"

#include <dlfcn.h>

#include "eagle/engines/cublaslt.hpp"
#include "engines/loader/dynamic_library.hpp"

namespace eagle::cublaslt {

#ifdef EAGLE_HAVE_CUDA

std::string Api::name(cublasStatus_t status) const {
  const char* n = status_name ? status_name(status) : nullptr;
  return n ? n : "cuBLAS status " + std::to_string(static_cast<int>(status));
}

namespace {

// Resolves `symbol` into `slot`; false (and the reason) when the library lacks it.
template <class Fn>
bool resolve(const engines::LoadedLibrary& lib, const char* symbol, Fn& slot, Loaded& out) {
  slot = reinterpret_cast<Fn>(lib.symbol(symbol));
  if (slot) return true;
  out.status = "cuBLASLt at " + lib.path + " lacks " + symbol;
  return false;
}

}  // namespace

Loaded load() {
  Loaded out;
  const engines::LoadedLibrary lib =
      engines::open_library({"cuBLASLt",
                             "EAGLE_CUBLASLT_LIBRARY",
                             {"libcublasLt.so.13"},
                             {"nvidia/cublas/lib", "nvidia/cu13/lib"}});
  if (!lib) {
    out.status = lib.reason;
    return out;
  }
  Api& a = out.api;
  if (!resolve(lib, "cublasLtCreate", a.create, out) ||
      !resolve(lib, "cublasLtDestroy", a.destroy, out) ||
      !resolve(lib, "cublasLtGetVersion", a.get_version, out) ||
      !resolve(lib, "cublasLtGetStatusName", a.status_name, out) ||
      !resolve(lib, "cublasLtMatmulDescInit_internal", a.matmul_desc_init, out) ||
      !resolve(lib, "cublasLtMatmulDescSetAttribute", a.matmul_desc_set, out) ||
      !resolve(lib, "cublasLtMatrixLayoutInit_internal", a.layout_init, out) ||
      !resolve(lib, "cublasLtMatrixLayoutSetAttribute", a.layout_set, out) ||
      !resolve(lib, "cublasLtMatmulPreferenceInit_internal", a.preference_init, out) ||
      !resolve(lib, "cublasLtMatmulPreferenceSetAttribute", a.preference_set, out) ||
      !resolve(lib, "cublasLtMatmulAlgoGetHeuristic", a.get_heuristic, out) ||
      !resolve(lib, "cublasLtMatmul", a.matmul, out))
    return out;
  // The file the loader picked (a bare soname says nothing about which copy it was).
  std::string path = lib.path;
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(a.create), &info) != 0 && info.dli_fname)
    path = info.dli_fname;
  out.version = a.get_version();
  const std::string version = std::to_string(out.version / 10000) + "." +
                              std::to_string(out.version / 100 % 100) + "." +
                              std::to_string(out.version % 100);
  // The enums and descriptor sizes come from the header eagle was built with: another major
  // version may have renumbered them.
  if (out.version / 10000 != CUBLAS_VER_MAJOR) {
    out.status = "cuBLASLt " + version + " at " + path + " is not major version " +
                 std::to_string(CUBLAS_VER_MAJOR) + ", the header eagle was built with";
    return out;
  }
  out.ok = true;
  out.status = "cuBLASLt " + version + " loaded from " + path;
  return out;
}

#else

Loaded load() {
  Loaded out;
  out.status = "cuBLASLt not loaded: this build of eagle has no CUDA";
  return out;
}

#endif

const Loaded& process() {
  static const Loaded loaded = load();  // a function-local static: initialized once, thread-safe
  return loaded;
}

}  // namespace eagle::cublaslt

namespace eagle::engines {

std::string cublaslt_status() {
  return cublaslt::process().status;
}

}  // namespace eagle::engines
