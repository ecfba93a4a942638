// Communicators: who takes part in a collective (this rank, how many ranks, which device), made
// explicitly and passed to each collective (eagle/comm/collectives.hpp); nothing is ambient.
// Two kinds: an in-process CPU group (ranks are threads sharing memory), and NCCL on GPUs, whose
// bootstrap is NCCL's own: the caller hands eagle an NcclId obtained however it likes.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "eagle/core/device.hpp"
#include "eagle/core/error.hpp"

namespace eagle::comm {

namespace detail {
class CommImpl;
}

// A rank waited longer than the group's timeout for the others to reach the same collective
// (one never came, or the ranks called different numbers of collectives). The group is broken
// afterwards: every later collective of every rank throws this too, naming the first cause.
class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& what) : Error(what) {}
};

// One rank's handle on a group. Copies share the rank; the group lives while any rank's handle
// (or a kernel made from one) does, and is destroyed with the last (an NCCL communicator by
// ncclCommDestroy). Collectives of one group must be called by every rank in the same order
// (never from concurrent fork branches of one rank), as with NCCL.
class Communicator {
 public:
  Communicator() = default;
  int rank() const;
  int size() const;
  Device device() const;         // the CPU for a CPU group, the rank's GPU for NCCL
  std::string kind() const;      // "cpu-group" or "nccl"
  std::string describe() const;  // "rank 1 of 4 (cpu-group on cpu)"
  bool defined() const { return impl_ != nullptr; }

  // Internal: the backend behind the handle (src/comm/).
  explicit Communicator(std::shared_ptr<detail::CommImpl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<detail::CommImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<detail::CommImpl> impl_;
};

struct CpuGroupOptions {
  // How long a rank waits at a collective for the other ranks before it throws TimeoutError.
  std::chrono::milliseconds timeout{60000};
};

// An in-process group of `ranks` (>= 1) ranks: element r is rank r's communicator. Each rank is
// meant to be driven by its own thread (its eager launches or its graph's launches); a collective
// blocks until every rank reached it. Reductions add ranks in order 0, 1, ..., ranks - 1, so every
// rank gets bitwise the same result, run after run. Throws InvalidArgument for ranks < 1 or a
// timeout that is not positive.
std::vector<Communicator> cpu_group(int ranks, const CpuGroupOptions& options = {});

// NCCL's ncclUniqueId: 128 opaque bytes made by one rank (nccl_unique_id) and sent to the
// others by whatever the caller has (torch.distributed's store, MPI_Bcast, a shared file).
struct NcclId {
  std::array<char, 128> bytes{};
};

// Whether NCCL was loaded, from where and which version, or why not. NCCL is opened at run
// time, never linked: EAGLE_NCCL_LIBRARY (a file or folder) when set, else libnccl.so.2 on the
// loader's path (LD_LIBRARY_PATH), the CUDA toolkit, and the pip package nvidia-nccl-cu13
// (site-packages/nvidia/nccl/lib). Never throws.
std::string nccl_status();
bool nccl_available();

// ncclGetUniqueId: a fresh id for a new group. Throws NotSupported when NCCL is not loaded.
NcclId nccl_unique_id();

// Rank `rank` of `ranks` of the NCCL group `id`, on GPU `device` (ncclCommInitRank, which blocks
// until every rank joined: call it for each rank from its own thread or process). Throws
// InvalidArgument for a rank outside [0, ranks) or a device that is not a GPU; NotSupported when
// eagle was built without CUDA or NCCL is not loaded; CudaError when NCCL fails.
// Set NCCL_NVLS_ENABLE=0 in the environment before the first communicator (NVLink multicast off).
Communicator nccl(const NcclId& id, int rank, int ranks, Device device);

// One process driving several GPUs: a communicator per device, rank i on devices[i], made in one
// call (ncclGroupStart, one ncclCommInitRank per device, ncclGroupEnd). Throws as nccl() does.
std::vector<Communicator> nccl_group(const std::vector<Device>& devices);

}  // namespace eagle::comm
