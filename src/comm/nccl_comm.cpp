// NCCL communicators: one rank's ncclComm_t on one GPU, and each collective issued on the
// node's stream (ctx.stream), so a CUDA graph stream-captures it like any library call.
#include <cstring>
#include <string>
#include <vector>

#include "comm/backend.hpp"
#include "comm/nccl_library.hpp"
#include "eagle/comm/communicator.hpp"
#include "util/cuda_check.hpp"

namespace eagle::comm {

namespace {

using detail::NcclLibrary;

const NcclLibrary& loaded_nccl(const char* who) {
  const NcclLibrary& lib = detail::nccl_library();
  if (!lib.loaded) throw NotSupported(std::string(who) + ": " + lib.status);
  return lib;
}

#ifdef EAGLE_HAVE_CUDA

using detail::Collective;
using detail::CollectiveCall;

// The NCCL dtype of a reduction, or (for data movement) bytes.
int nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::f64:
      return detail::kNcclFloat64;
    case DType::f32:
      return detail::kNcclFloat32;
    case DType::f16:
      return detail::kNcclFloat16;
    case DType::bf16:
      return detail::kNcclBfloat16;
    case DType::i64:
      return detail::kNcclInt64;
    case DType::i32:
      return detail::kNcclInt32;
    default:
      return -1;
  }
}

int nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return detail::kNcclSum;
    case ReduceOp::avg:
      return detail::kNcclAvg;
    case ReduceOp::max:
      return detail::kNcclMax;
    case ReduceOp::min:
      return detail::kNcclMin;
  }
  return detail::kNcclSum;
}

class NcclComm final : public detail::CommImpl {
 public:
  NcclComm(const NcclLibrary& lib, void* comm, int rank, int size, Device device)
      : CommImpl(rank, size, device), lib_(lib), comm_(comm) {}
  ~NcclComm() override {
    eagle::detail::DeviceGuard guard(device().ordinal());
    lib_.api.comm_destroy(comm_);  // nothing to report from a destructor
  }

  const char* kind() const override { return "nccl"; }

  void run(const CollectiveCall& call, const CallContext& ctx) const override {
    const auto& api = lib_.api;
    int result = 0;
    const char* what = "";
    const int dtype = nccl_dtype(call.dtype);
    // Data movement sends bytes: any dtype goes.
    const std::size_t bytes = static_cast<std::size_t>(call.x_count) * itemsize(call.dtype);
    switch (call.kind) {
      case Collective::all_reduce:
        what = "ncclAllReduce";
        result = api.all_reduce(call.x, call.out, static_cast<std::size_t>(call.x_count), dtype,
                                nccl_op(call.op), comm_, ctx.stream);
        break;
      case Collective::reduce_scatter:
        what = "ncclReduceScatter";
        result = api.reduce_scatter(call.x, call.out, static_cast<std::size_t>(call.out_count),
                                    dtype, nccl_op(call.op), comm_, ctx.stream);
        break;
      case Collective::all_gather:
        what = "ncclAllGather";
        result = api.all_gather(call.x, call.out, bytes, detail::kNcclUint8, comm_, ctx.stream);
        break;
      case Collective::broadcast:
        what = "ncclBroadcast";
        result = api.broadcast(call.x, call.out, bytes, detail::kNcclUint8, call.root, comm_,
                               ctx.stream);
        break;
    }
    if (result != 0) throw CudaError(detail::nccl_error(lib_, what, result));
  }

  // Captured straight into `graph` (which the executor keeps) on a side stream of the device.
  bool populate_cuda_graph(const CollectiveCall& call, const CallContext& ctx,
                           void* graph) const override {
    eagle::detail::DeviceGuard guard(device().ordinal());
    cudaStream_t side = nullptr;
    EAGLE_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    cudaGraph_t captured = nullptr;
    try {
      EAGLE_CUDA_CHECK(cudaStreamBeginCaptureToGraph(side, static_cast<cudaGraph_t>(graph), nullptr,
                                                     nullptr, 0, cudaStreamCaptureModeThreadLocal));
      CallContext on_side = ctx;
      on_side.stream = side;
      try {
        run(call, on_side);
      } catch (...) {
        cudaStreamEndCapture(side, &captured);
        throw;
      }
      EAGLE_CUDA_CHECK(cudaStreamEndCapture(side, &captured));
    } catch (...) {
      cudaStreamDestroy(side);
      throw;
    }
    cudaStreamDestroy(side);
    return true;
  }

 private:
  const NcclLibrary& lib_;
  void* comm_;
};

void check_rank(const char* who, int rank, int ranks) {
  if (ranks < 1)
    throw InvalidArgument(std::string(who) + ": argument 'ranks' is " + std::to_string(ranks) +
                          "; a group has at least 1 rank");
  if (rank < 0 || rank >= ranks)
    throw InvalidArgument(std::string(who) + ": argument 'rank' is " + std::to_string(rank) +
                          ", outside [0, " + std::to_string(ranks) + ")");
}

void check_gpu(const char* who, Device device) {
  if (!device.is_cuda() || device.ordinal() >= cuda_device_count())
    throw InvalidArgument(std::string(who) + ": argument 'device' is " + device.str() +
                          "; NCCL needs one of this machine's " +
                          std::to_string(cuda_device_count()) + " GPUs");
}

#endif

}  // namespace

std::string nccl_status() {
  return detail::nccl_library().status;
}

bool nccl_available() {
  return detail::nccl_library().loaded;
}

NcclId nccl_unique_id() {
  const NcclLibrary& lib = loaded_nccl("comm::nccl_unique_id");
  detail::NcclUniqueIdBytes raw{};
  if (const int r = lib.api.get_unique_id(&raw); r != 0)
    throw CudaError(detail::nccl_error(lib, "ncclGetUniqueId", r));
  NcclId id;
  static_assert(sizeof(raw.internal) == sizeof(id.bytes));
  std::memcpy(id.bytes.data(), raw.internal, sizeof(raw.internal));
  return id;
}

#ifdef EAGLE_HAVE_CUDA

Communicator nccl(const NcclId& id, int rank, int ranks, Device device) {
  check_rank("comm::nccl", rank, ranks);
  check_gpu("comm::nccl", device);
  const NcclLibrary& lib = loaded_nccl("comm::nccl");
  detail::NcclUniqueIdBytes raw{};
  std::memcpy(raw.internal, id.bytes.data(), sizeof(raw.internal));
  void* comm = nullptr;
  {
    eagle::detail::DeviceGuard guard(device.ordinal());  // NCCL binds the current device
    if (const int r = lib.api.comm_init_rank(&comm, ranks, raw, rank); r != 0)
      throw CudaError(detail::nccl_error(lib, "ncclCommInitRank", r));
  }
  return Communicator(std::make_shared<NcclComm>(lib, comm, rank, ranks, device));
}

std::vector<Communicator> nccl_group(const std::vector<Device>& devices) {
  if (devices.empty())
    throw InvalidArgument("comm::nccl_group: argument 'devices' is empty; give one GPU per rank");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    check_gpu("comm::nccl_group", devices[i]);
    for (std::size_t j = 0; j < i; ++j)
      if (devices[j] == devices[i])
        throw InvalidArgument("comm::nccl_group: argument 'devices' names " + devices[i].str() +
                              " twice; one rank per GPU");
  }
  const NcclLibrary& lib = loaded_nccl("comm::nccl_group");
  const NcclId id = nccl_unique_id();
  detail::NcclUniqueIdBytes raw{};
  std::memcpy(raw.internal, id.bytes.data(), sizeof(raw.internal));
  const int ranks = static_cast<int>(devices.size());
  std::vector<void*> comms(devices.size(), nullptr);
  if (const int r = lib.api.group_start(); r != 0)
    throw CudaError(detail::nccl_error(lib, "ncclGroupStart", r));
  int failed = 0;
  for (int i = 0; i < ranks && failed == 0; ++i) {
    eagle::detail::DeviceGuard guard(devices[static_cast<std::size_t>(i)].ordinal());
    failed = lib.api.comm_init_rank(&comms[static_cast<std::size_t>(i)], ranks, raw, i);
  }
  const int ended = lib.api.group_end();
  if (failed != 0) throw CudaError(detail::nccl_error(lib, "ncclCommInitRank", failed));
  if (ended != 0) throw CudaError(detail::nccl_error(lib, "ncclGroupEnd", ended));
  std::vector<Communicator> out;
  for (int i = 0; i < ranks; ++i)
    out.emplace_back(std::make_shared<NcclComm>(lib, comms[static_cast<std::size_t>(i)], i, ranks,
                                                devices[static_cast<std::size_t>(i)]));
  return out;
}

#else

Communicator nccl(const NcclId&, int, int, Device) {
  throw NotSupported("comm::nccl: eagle was built without CUDA");
}

std::vector<Communicator> nccl_group(const std::vector<Device>&) {
  throw NotSupported("comm::nccl_group: eagle was built without CUDA");
}

#endif

}  // namespace eagle::comm
