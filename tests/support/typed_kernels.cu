#include "typed_kernels.hpp"

#include <array>

#include "eagle/kernel/typed.hpp"

namespace eagle::test {

namespace {

struct Axpy {
  static constexpr const char* name = "typed_axpy";
  static constexpr std::array<const char*, 4> params = {"x", "y", "out", "alpha"};
  using types = eagle::types<float, double>;
  template <class T>
  EAGLE_HD static void point(int64_t i, In<T> x, In<T> y, Out<T> out, double alpha) {
    out[i] = T(alpha) * x[i] + y[i];
  }
};

struct WeightedSum11 {
  static constexpr const char* name = "typed_weighted_sum11";
  static constexpr std::array<const char*, 15> params = {"a0",  "a1",  "a2",    "a3",   "a4",
                                                         "a5",  "a6",  "a7",    "a8",   "a9",
                                                         "a10", "out", "alpha", "beta", "shift"};
  using types = eagle::types<float, double>;
  template <class T>
  EAGLE_HD static void point(int64_t i, In<T> a0, In<T> a1, In<T> a2, In<T> a3, In<T> a4, In<T> a5,
                             In<T> a6, In<T> a7, In<T> a8, In<T> a9, In<T> a10, Out<T> out,
                             double alpha, double beta, int64_t shift) {
    out[i] = a0[i] + T(2) * a1[i] + T(3) * a2[i] + T(4) * a3[i] + T(5) * a4[i] + T(6) * a5[i] +
             T(7) * a6[i] + T(8) * a7[i] + T(9) * a8[i] + T(10) * a9[i] + T(11) * a10[i] +
             T(alpha * beta) + T(shift);
  }
};

struct Shift {
  static constexpr const char* name = "typed_shift";
  static constexpr std::array<const char*, 3> params = {"x", "out", "shift"};
  using types = eagle::types<int64_t, int32_t>;
  template <class T>
  EAGLE_HD static void point(int64_t i, In<T> x, Out<T> out, int64_t shift) {
    out[i] = static_cast<T>(x[i] + shift);
  }
};

struct StridedCopy {
  static constexpr const char* name = "typed_strided_copy";
  static constexpr std::array<const char*, 2> params = {"x", "out"};
  using types = eagle::types<float>;
  template <class T>
  EAGLE_HD static void point(int64_t i, InView<T> x, Out<T> out) {
    const int64_t cols = x.dim(1);
    out[i] = x.at(i / cols, i % cols);
  }
};

struct StridedScale {
  static constexpr const char* name = "typed_strided_scale";
  static constexpr std::array<const char*, 2> params = {"x", "alpha"};
  using types = eagle::types<float>;
  static constexpr bool per_sample = true;
  template <class T>
  EAGLE_HD static void point(int64_t i, InOutView<T> x, double alpha) {
    const int64_t cols = x.dim(1);
    x.at(i / cols, i % cols) *= T(alpha);
  }
};

struct Countdown {
  static constexpr const char* name = "typed_countdown";
  static constexpr std::array<const char*, 2> params = {"remaining", "going"};
  using types = eagle::types<uint32_t>;
  template <class T>
  EAGLE_HD static void point(int64_t i, InOut<T> remaining, Out<T> going) {
    if (remaining[i] > 0) remaining[i] -= 1;
    going[i] = remaining[i] > 0 ? 1u : 0u;
  }
};

struct CudaOnly {
  static constexpr const char* name = "typed_cuda_only";
  static constexpr std::array<const char*, 2> params = {"x", "out"};
  using types = eagle::types<float>;
  template <class T>
  EAGLE_HD static void cuda_point(int64_t i, In<T> x, Out<T> out) {
    out[i] = T(2) * x[i];
  }
};

struct CpuOnly {
  static constexpr const char* name = "typed_cpu_only";
  static constexpr std::array<const char*, 2> params = {"x", "out"};
  using types = eagle::types<float>;
  template <class T>
  EAGLE_HD static void cpu_point(int64_t i, In<T> x, Out<T> out) {
    out[i] = T(3) * x[i];
  }
};

}  // namespace

EAGLE_TYPED_KERNEL(typed_axpy, Axpy)
EAGLE_TYPED_KERNEL(typed_weighted_sum11, WeightedSum11)
EAGLE_TYPED_KERNEL(typed_shift, Shift)
EAGLE_TYPED_KERNEL(typed_strided_copy, StridedCopy)
EAGLE_TYPED_KERNEL(typed_countdown, Countdown)
EAGLE_TYPED_KERNEL(typed_strided_scale, StridedScale)
EAGLE_TYPED_KERNEL(typed_cuda_only, CudaOnly)
EAGLE_TYPED_KERNEL(typed_cpu_only, CpuOnly)

}  // namespace eagle::test
