// A user's kernel library, loaded at run time by eagle.load_kernels (the Python tests): one typed
// kernel, compiled by nvcc in a CUDA build (so it has a GPU version) and as C++ otherwise.
#include <array>

#include "eagle/kernel/export.hpp"
#include "eagle/kernel/typed.hpp"

namespace {

struct Lerp {
  static constexpr const char* name = "user_lerp";
  static constexpr std::array<const char*, 4> params = {"a", "b", "out", "t"};
  using types = eagle::types<float, double>;
  template <class T>
  EAGLE_HD static void point(int64_t i, eagle::In<T> a, eagle::In<T> b, eagle::Out<T> out,
                             double t) {
    out[i] = a[i] + T(t) * (b[i] - a[i]);
  }
};

const eagle::Kernel& user_lerp() {
  static const eagle::Kernel k = eagle::typed_kernel<Lerp>();
  return k;
}

}  // namespace

EAGLE_EXPORT_KERNELS(user_lerp())
