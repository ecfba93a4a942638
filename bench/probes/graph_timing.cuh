// The probes' one timer (a header of bench/probes, not of eagle).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

// `call` once (a warm-up), then `calls` calls of it captured on `st` into a CUDA graph (a call
// may fork onto other streams and join back), replayed `repeats` + 1 times, the first a warm-up:
// the median replay's time per call, in microseconds.
template <class F>
float graph_us_per_call(cudaStream_t st, int calls, F&& call, int repeats = 5) {
  call();
  cudaStreamSynchronize(st);
  cudaGraph_t graph;
  cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
  for (int i = 0; i < calls; ++i) call();
  cudaStreamEndCapture(st, &graph);
  cudaGraphExec_t exec;
  if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) return -1;
  cudaEvent_t a, b;
  cudaEventCreate(&a), cudaEventCreate(&b);
  std::vector<float> t;
  for (int r = 0; r <= repeats; ++r) {
    cudaEventRecord(a, st);
    cudaGraphLaunch(exec, st);
    cudaEventRecord(b, st);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    if (r) t.push_back(ms * 1e3f / calls);
  }
  cudaEventDestroy(a), cudaEventDestroy(b);
  cudaGraphExecDestroy(exec), cudaGraphDestroy(graph);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
