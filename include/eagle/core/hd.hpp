// EAGLE_HD marks a function compiled for the host and, under nvcc, for the device too: what
// the CPU and CUDA sides of a kernel share.
#pragma once

#ifndef EAGLE_HD
#ifdef __CUDACC__
#define EAGLE_HD __host__ __device__ __forceinline__
#else
#define EAGLE_HD inline
#endif
#endif
