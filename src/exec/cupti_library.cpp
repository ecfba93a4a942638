#include "exec/cupti_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "engines/loader/dynamic_library.hpp"

namespace eagle::detail {

namespace {

std::string file_of(const engines::LoadedLibrary& lib) {
  link_map* map = nullptr;
  if (::dlinfo(lib.handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
    return map->l_name;
  return lib.path;
}

bool take(const engines::LoadedLibrary& lib, const char* name, void*& slot) {
  slot = lib.symbol(name);
  return slot != nullptr;
}

// 130001 -> "13.0.1"; the versions before 13.0 were a plain counter (v28: CUDA 12.9 Update 1).
std::string version_string(uint32_t v) {
  if (v < 10000) return "API v" + std::to_string(v);
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

std::unique_ptr<CuptiLibrary> load() {
  auto out = std::make_unique<CuptiLibrary>();
  const engines::LoadedLibrary lib = engines::open_library(
      {"CUPTI",
       "EAGLE_CUPTI_LIBRARY",
       {"libcupti.so." + std::to_string(kCuptiMajor)},
       {"nvidia/cu" + std::to_string(kCuptiMajor) + "/lib", "nvidia/cuda_cupti/lib"},
       {"extras/CUPTI/lib64", "extras/CUPTI/lib"}});
  if (!lib) {
    out->status = lib.reason;
    return out;
  }
  out->path = file_of(lib);
  CuptiEntryPoints& a = out->api;
  const bool all = take(lib, "cuptiGetVersion", a.get_version) &&
                   take(lib, "cuptiGetResultString", a.get_result_string) &&
                   take(lib, "cuptiActivityEnable", a.activity_enable) &&
                   take(lib, "cuptiActivityDisable", a.activity_disable) &&
                   take(lib, "cuptiActivityRegisterCallbacks", a.register_callbacks) &&
                   take(lib, "cuptiActivityFlushAll", a.flush_all) &&
                   take(lib, "cuptiActivityGetNextRecord", a.next_record) &&
                   take(lib, "cuptiGetGraphNodeId", a.graph_node_id) &&
                   take(lib, "cuptiGetGraphId", a.graph_id) &&
                   take(lib, "cuptiSubscribe", a.subscribe) &&
                   take(lib, "cuptiUnsubscribe", a.unsubscribe) &&
                   take(lib, "cuptiEnableCallback", a.enable_callback);
  if (!all) {
    out->status = "CUPTI not used: " + out->path + " lacks CUPTI's activity entry points";
    return out;
  }
  take(lib, "cuptiGetGraphExecId", a.graph_exec_id);  // optional
  // cuptiGetVersion needs no device: it only reports the library's API version.
  using GetVersion = int (*)(uint32_t*);
  if (reinterpret_cast<GetVersion>(a.get_version)(&out->version) != 0) {
    out->status = "CUPTI not used: cuptiGetVersion failed in " + out->path;
    return out;
  }
  if (out->version / 10000 != kCuptiMajor) {
    out->status = "CUPTI not used: " + out->path + " is CUPTI " + version_string(out->version) +
                  "; eagle reads the activity records of CUPTI " + std::to_string(kCuptiMajor) +
                  ".x (set EAGLE_CUPTI_LIBRARY to a libcupti.so." + std::to_string(kCuptiMajor) +
                  ")";
    return out;
  }
  out->loaded = true;
  out->status = "CUPTI " + version_string(out->version) + " loaded from " + out->path;
  return out;
}

}  // namespace

const CuptiLibrary& cupti_library() {
  static std::mutex mutex;
  // Never freed: CUPTI's callbacks into eagle may run until the process ends.
  static auto& by_setting = *new std::map<std::string, std::unique_ptr<CuptiLibrary>>();
  const char* v = std::getenv("EAGLE_CUPTI_LIBRARY");
  const std::string key = v ? std::string("=") + v : std::string();
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<CuptiLibrary>& slot = by_setting[key];
  if (!slot) slot = load();
  return *slot;
}

}  // namespace eagle::detail
