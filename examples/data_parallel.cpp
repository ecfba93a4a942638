// Data parallelism: each rank trains on its own data, and the gradients are averaged across ranks
// inside the step graph, so every rank's weights stay the same. On the CPU the ranks are threads
// of one in-process group; on GPUs the same kernels run NCCL (shown when two GPUs and NCCL are
// here).
// Shows: comm::cpu_group, comm::all_reduce recorded in a step graph, comm::nccl from an NcclId.
// Pitfalls: every rank must record the same collectives in the same order (a CPU group names a
// mismatch on every rank; NCCL hangs); a rank's collectives must not run in concurrent fork
// branches; the ranks must launch their graphs the same number of times.
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "eagle/eagle.hpp"

using namespace eagle;

bool cpu_group_training() {
  const std::vector<std::vector<float>> xs = {{1, 2, 3}, {2, 1, 0.5f}};  // each rank's data
  std::vector<Array> weights;
  // [readme:cpu_group]
  std::vector<comm::Communicator> group = comm::cpu_group(2);  // ranks 0 and 1, one per thread
  auto rank_main = [&](int rank) {
    const comm::Communicator& c = group[rank];
    Array w = Array::from(std::vector<float>{0, 0, 0}, {3}, c.device());  // this rank's copy
    Array x = Array::from(xs[rank], {3}, c.device());                     // this rank's data
    Graph step = Graph::record(
        [&](Recorder& r) {
          Value wv = r.external(w, "w");
          Value xv = r.param("x", x);
          Value err = r.call(kernels::axpy(), {xv, r.call(kernels::mul(), {wv, xv}), -2.0});
          Value loss = r.call(kernels::sum(), {r.call(kernels::mul(), {err, err})});
          Value dw = diff::gradients(r, {loss}, {wv})[0];
          dw = r.call(comm::all_reduce(c, comm::ReduceOp::avg), {dw});  // the ranks' mean
          r.call(kernels::axpy(), {dw, wv, -0.05}, buffer(wv));
        },
        RecordOptions{.record = true});
    step.build(c.device());
    step(100);  // 100 steps; each meets the other rank at its all_reduce
    weights[rank] = w;
  };
  weights.resize(2);
  std::thread rank0(rank_main, 0), rank1(rank_main, 1);
  rank0.join();
  rank1.join();
  // [/readme]
  const std::vector<float> w0 = weights[0].to_vector<float>(), w1 = weights[1].to_vector<float>();
  bool ok = std::memcmp(w0.data(), w1.data(), w0.size() * sizeof(float)) == 0;  // same bits
  for (float v : w0) ok = ok && v > 1.99f && v < 2.01f;  // w x fits 2 x on both ranks' data
  std::printf("cpu group: w = [%.4f, %.4f, %.4f] on both ranks: %s\n", w0[0], w0[1], w0[2],
              ok ? "ok" : "WRONG");
  return ok;
}

// One process, one thread per GPU. Across processes or machines, rank 0 makes the id and the
// caller sends its 128 bytes to the others (torch.distributed's store, MPI_Bcast, a file).
bool nccl_all_reduce() {
  std::vector<float> got(2);
  // [readme:nccl]
  const comm::NcclId id = comm::nccl_unique_id();  // on rank 0, then sent to every rank
  auto rank_main = [&](int rank) {
    comm::Communicator c = comm::nccl(id, rank, 2, Device::cuda(rank));  // blocks until all join
    Array x = Array::from(std::vector<float>{1.0f + rank}, {1}, c.device());
    Stream stream(c.device());
    Array sum = launch(comm::all_reduce(c), {x}, {}, stream, ThreadTeam::serial())[0];
    got[rank] = sum.to_vector<float>()[0];  // 3 on both ranks
  };
  // [/readme]
  std::thread rank0(rank_main, 0), rank1(rank_main, 1);
  rank0.join();
  rank1.join();
  const bool ok = got[0] == 3 && got[1] == 3;
  std::printf("nccl: all_reduce gave %g and %g: %s\n", got[0], got[1], ok ? "ok" : "WRONG");
  return ok;
}

int main() {
  if (!cpu_group_training()) return 1;
  if (cuda_device_count() >= 2 && comm::nccl_available()) {
    setenv("NCCL_NVLS_ENABLE", "0", 0);  // NVLink multicast off
    if (!nccl_all_reduce()) return 1;
  } else {
    std::printf("nccl: not run (%s)\n",
                cuda_device_count() < 2 ? "fewer than 2 GPUs" : comm::nccl_status().c_str());
  }
  return 0;
}
