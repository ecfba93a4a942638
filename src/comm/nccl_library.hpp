// Internal: NCCL opened at run time (never linked), and the handful of entry points eagle calls.
// The types are declared here with NCCL's values (nccl.h, NCCL 2.x): an ncclUniqueId is 128
// bytes passed by value, a communicator and a stream are pointers, enums are ints.
#pragma once

#include <cstddef>
#include <string>

namespace eagle::comm::detail {

struct NcclUniqueIdBytes {
  char internal[128];
};

// ncclDataType_t and ncclRedOp_t values.
enum NcclDataType : int {
  kNcclUint8 = 1,
  kNcclInt32 = 2,
  kNcclInt64 = 4,
  kNcclFloat16 = 6,
  kNcclFloat32 = 7,
  kNcclFloat64 = 8,
  kNcclBfloat16 = 9,
};
enum NcclRedOp : int { kNcclSum = 0, kNcclMax = 2, kNcclMin = 3, kNcclAvg = 4 };

struct NcclApi {
  int (*get_version)(int* version) = nullptr;
  int (*get_unique_id)(NcclUniqueIdBytes* id) = nullptr;
  int (*comm_init_rank)(void** comm, int nranks, NcclUniqueIdBytes id, int rank) = nullptr;
  int (*comm_destroy)(void* comm) = nullptr;
  int (*all_reduce)(const void* send, void* recv, std::size_t count, int dtype, int op, void* comm,
                    void* stream) = nullptr;
  int (*reduce_scatter)(const void* send, void* recv, std::size_t recv_count, int dtype, int op,
                        void* comm, void* stream) = nullptr;
  int (*all_gather)(const void* send, void* recv, std::size_t send_count, int dtype, void* comm,
                    void* stream) = nullptr;
  int (*broadcast)(const void* send, void* recv, std::size_t count, int dtype, int root, void* comm,
                   void* stream) = nullptr;
  int (*group_start)() = nullptr;
  int (*group_end)() = nullptr;
  const char* (*error_string)(int result) = nullptr;
};

struct NcclLibrary {
  bool loaded = false;
  int version = 0;     // ncclGetVersion(): major * 10000 + minor * 100 + patch (NCCL >= 2.9)
  std::string status;  // loaded from where and which version, or why not
  NcclApi api;
};

// The library as EAGLE_NCCL_LIBRARY now asks (unset: the usual search, see
// engines/loader/dynamic_library.hpp), memoized per value of that variable; never throws.
const NcclLibrary& nccl_library();

// "NCCL's ncclAllReduce failed: <its error string>".
std::string nccl_error(const NcclLibrary& lib, const char* what, int result);

}  // namespace eagle::comm::detail
