// Building a GPU engine's plan needs its kernels, which a build without CUDA does not have: such
// a test skips there (planning and declines are still tested by the others).
#pragma once

#include <gtest/gtest.h>

#ifdef EAGLE_HAVE_CUDA
#define EAGLE_SKIP_WITHOUT_CUDA_BUILD() (void)0
#else
#define EAGLE_SKIP_WITHOUT_CUDA_BUILD() \
  GTEST_SKIP() << "a build without CUDA has no GPU kernels to build plans of"
#endif
