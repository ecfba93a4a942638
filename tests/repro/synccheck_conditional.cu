// A reproducer outside eagle for compute-sanitizer synccheck inside CUDA conditional nodes. It
// runs CUB's DeviceReduce::Sum (and a hand-written block reduction) eagerly, in a plain graph, and
// in the body of a WHILE and of an IF conditional node, built with the graph API alone. Run it
// under `compute-sanitizer --tool synccheck ./eagle_repro_synccheck MODE` for each MODE; it exits
// 0 when every result is right. Modes: eager, graph, while, if, while_handwritten,
// graph_handwritten.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cub/device/device_reduce.cuh>
#include <vector>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s failed: %s at line %d\n", #call, cudaGetErrorString(e_), __LINE__); \
      std::exit(2);                                                                                \
    }                                                                                              \
  } while (0)

namespace {

constexpr int kN = 4096;
constexpr int kTurns = 3;

__global__ void countdown(unsigned* remaining, cudaGraphConditionalHandle h) {
  const unsigned r = *remaining - 1;
  *remaining = r;
  cudaGraphSetConditional(h, r > 0 ? 1u : 0u);
}

__global__ void set_true(cudaGraphConditionalHandle h) {
  cudaGraphSetConditional(h, 1u);
}

// Each block sums 256 values with a shared-memory tree (barriers every step), then one atomic.
__global__ void block_sum(const double* x, double* out, int n) {
  __shared__ double s[256];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.0;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, s[0]);
}

__global__ void zero(double* out) {
  *out = 0.0;
}

struct Buffers {
  double* x = nullptr;
  double* out = nullptr;
  void* temp = nullptr;
  size_t temp_bytes = 0;
  unsigned* remaining = nullptr;
};

void issue_reduce(const Buffers& b, cudaStream_t s, bool handwritten) {
  if (handwritten) {
    zero<<<1, 1, 0, s>>>(b.out);
    block_sum<<<(kN + 255) / 256, 256, 0, s>>>(b.x, b.out, kN);
  } else {
    size_t bytes = b.temp_bytes;
    CHECK(cub::DeviceReduce::Sum(b.temp, bytes, b.x, b.out, kN, s));
  }
}

// Captures the reduction into `graph` after `deps`; returns the node later nodes depend on.
cudaGraphNode_t capture_reduce_into(cudaGraph_t graph, const Buffers& b, cudaStream_t s,
                                    bool handwritten, const cudaGraphNode_t* deps, size_t ndeps) {
  cudaGraph_t child = nullptr;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  issue_reduce(b, s, handwritten);
  CHECK(cudaStreamEndCapture(s, &child));
  cudaGraphNode_t node = nullptr;
  CHECK(cudaGraphAddChildGraphNode(&node, graph, deps, ndeps, child));
  CHECK(cudaGraphDestroy(child));
  return node;
}

void add_kernel(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t ndeps,
                const void* fn, void** args) {
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(fn);
  p.gridDim = dim3(1);
  p.blockDim = dim3(1);
  p.kernelParams = args;
  CHECK(cudaGraphAddKernelNode(node, graph, deps, ndeps, &p));
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "while";
  const bool handwritten = std::strstr(mode, "handwritten") != nullptr;
  cudaStream_t s = nullptr;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Buffers b;
  std::vector<double> host(kN);
  double want = 0;
  for (int i = 0; i < kN; ++i) want += host[i] = 0.25 + (i % 7) * 0.125;
  CHECK(cudaMalloc(&b.x, kN * sizeof(double)));
  CHECK(cudaMalloc(&b.out, sizeof(double)));
  CHECK(cudaMalloc(&b.remaining, sizeof(unsigned)));
  CHECK(cudaMemcpy(b.x, host.data(), kN * sizeof(double), cudaMemcpyHostToDevice));
  CHECK(cub::DeviceReduce::Sum(nullptr, b.temp_bytes, b.x, b.out, kN, s));
  CHECK(cudaMalloc(&b.temp, b.temp_bytes));

  if (std::strcmp(mode, "eager") == 0) {
    issue_reduce(b, s, false);
  } else {
    cudaGraph_t graph = nullptr;
    CHECK(cudaGraphCreate(&graph, 0));
    if (std::strncmp(mode, "graph", 5) == 0) {
      capture_reduce_into(graph, b, s, handwritten, nullptr, 0);
    } else {
      const bool loop = std::strncmp(mode, "while", 5) == 0;
      const unsigned turns = loop ? kTurns : 1;
      CHECK(cudaMemcpy(b.remaining, &turns, sizeof(unsigned), cudaMemcpyHostToDevice));
      cudaGraphConditionalHandle h{};
      CHECK(cudaGraphConditionalHandleCreate(&h, graph, 0, cudaGraphCondAssignDefault));
      cudaGraphNode_t setter = nullptr;
      void* set_args[] = {&h};
      add_kernel(&setter, graph, nullptr, 0, reinterpret_cast<const void*>(&set_true), set_args);
      cudaGraphNodeParams p{};
      p.type = cudaGraphNodeTypeConditional;
      p.conditional.handle = h;
      p.conditional.type = loop ? cudaGraphCondTypeWhile : cudaGraphCondTypeIf;
      p.conditional.size = 1;
      cudaGraphNode_t cond = nullptr;
      CHECK(cudaGraphAddNode(&cond, graph, &setter, nullptr, 1, &p));
      cudaGraph_t body = p.conditional.phGraph_out[0];
      cudaGraphNode_t reduce = capture_reduce_into(body, b, s, handwritten, nullptr, 0);
      if (loop) {
        cudaGraphNode_t count = nullptr;
        void* count_args[] = {&b.remaining, &h};
        add_kernel(&count, body, &reduce, 1, reinterpret_cast<const void*>(&countdown), count_args);
      }
    }
    cudaGraphExec_t exec = nullptr;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
  }
  CHECK(cudaStreamSynchronize(s));
  double got = 0;
  CHECK(cudaMemcpy(&got, b.out, sizeof(double), cudaMemcpyDeviceToHost));
  const bool ok = got == want;
  std::printf("synccheck repro, mode %s: sum %.6f, expected %.6f: %s\n", mode, got, want,
              ok ? "right" : "WRONG");
  cudaFree(b.x);
  cudaFree(b.out);
  cudaFree(b.temp);
  cudaFree(b.remaining);
  cudaStreamDestroy(s);
  return ok ? 0 : 1;
}
