// A typed kernel in a consumer project, added with the installed eagle_kernel_sources().
#include <array>

#include "eagle/kernel/typed.hpp"

namespace {

struct AddOne {
  static constexpr const char* name = "add_one";
  static constexpr std::array<const char*, 2> params = {"x", "out"};
  using types = eagle::types<float>;
  template <class T>
  EAGLE_HD static void point(int64_t i, eagle::In<T> x, eagle::Out<T> out) {
    out[i] = x[i] + T(1);
  }
};

}  // namespace

const eagle::Kernel& add_one() {
  static const eagle::Kernel k = eagle::typed_kernel<AddOne>();
  return k;
}
