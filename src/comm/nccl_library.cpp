#include "comm/nccl_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "engines/loader/dynamic_library.hpp"

namespace eagle::comm::detail {

namespace {

// ncclAvg (NCCL 2.10) is the newest feature eagle uses.
constexpr int kMinVersion = 21000;

std::string file_of(const engines::LoadedLibrary& lib) {
  link_map* map = nullptr;
  if (::dlinfo(lib.handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
    return map->l_name;
  return lib.path;
}

template <class Fn>
bool take(const engines::LoadedLibrary& lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(lib.symbol(name));
  return fn != nullptr;
}

std::string version_string(int v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

std::unique_ptr<NcclLibrary> load() {
  auto out = std::make_unique<NcclLibrary>();
  const engines::LoadedLibrary lib =
      engines::open_library({"NCCL", "EAGLE_NCCL_LIBRARY", {"libnccl.so.2"}, {"nvidia/nccl/lib"}});
  if (!lib) {
    out->status = lib.reason;
    return out;
  }
  NcclApi& a = out->api;
  const bool all =
      take(lib, "ncclGetVersion", a.get_version) && take(lib, "ncclGetUniqueId", a.get_unique_id) &&
      take(lib, "ncclCommInitRank", a.comm_init_rank) &&
      take(lib, "ncclCommDestroy", a.comm_destroy) && take(lib, "ncclAllReduce", a.all_reduce) &&
      take(lib, "ncclReduceScatter", a.reduce_scatter) &&
      take(lib, "ncclAllGather", a.all_gather) && take(lib, "ncclBroadcast", a.broadcast) &&
      take(lib, "ncclGroupStart", a.group_start) && take(lib, "ncclGroupEnd", a.group_end) &&
      take(lib, "ncclGetErrorString", a.error_string);
  if (!all) {
    out->status = "NCCL not used: " + file_of(lib) + " lacks NCCL's entry points";
    return out;
  }
  if (a.get_version(&out->version) != 0 || out->version < kMinVersion) {
    out->status = "NCCL not used: " + file_of(lib) + " is NCCL " + version_string(out->version) +
                  "; eagle needs NCCL 2.10 or newer (ncclAvg)";
    return out;
  }
  out->loaded = true;
  out->status = "NCCL " + version_string(out->version) + " loaded from " + file_of(lib);
  return out;
}

}  // namespace

const NcclLibrary& nccl_library() {
  static std::mutex mutex;
  // Never freed: communicators made from an answer may outlive any caller.
  static auto& by_setting = *new std::map<std::string, std::unique_ptr<NcclLibrary>>();
  const char* v = std::getenv("EAGLE_NCCL_LIBRARY");
  const std::string key = v ? std::string("=") + v : std::string();
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<NcclLibrary>& slot = by_setting[key];
  if (!slot) slot = load();
  return *slot;
}

std::string nccl_error(const NcclLibrary& lib, const char* what, int result) {
  const char* text = lib.api.error_string ? lib.api.error_string(result) : nullptr;
  return std::string("NCCL's ") + what + " failed: " + (text ? text : "error") + " (ncclResult " +
         std::to_string(result) + ")";
}

}  // namespace eagle::comm::detail
