// The strided-view kernels (eagle/kernel/views.hpp), typed: one body for the CPU and the GPU.
#include <array>
#include <string>
#include <vector>

#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "eagle/kernel/typed.hpp"
#include "eagle/kernel/views.hpp"

namespace eagle::kernels {

namespace {

// The second array must have the first's shape and dtype.
void check_same(const std::vector<ArrayMeta>& in, const char* kernel, const char* first,
                const char* second) {
  if (in[1].shape != in[0].shape || in[1].dtype != in[0].dtype)
    throw InvalidArgument(std::string(kernel) + ": argument '" + second + "' is " +
                          std::string(dtype_name(in[1].dtype)) + shape_str(in[1].shape) +
                          "; it must have '" + first + "''s shape and dtype " +
                          std::string(dtype_name(in[0].dtype)) + shape_str(in[0].shape));
}

// The inference of a kernel taking (view, c): no outputs, c of view's shape and dtype.
std::vector<ArrayMeta> view_and_c(const std::vector<ArrayMeta>& in, const char* kernel) {
  check_same(in, kernel, "view", "c");
  return {};
}

struct GatherView {
  static constexpr const char* name = "gather_view";
  static constexpr std::array<const char*, 2> params = {"x", "out"};
  using types = eagle::types<float, double, half, bfloat16>;
  static constexpr bool per_sample = false;
  template <class T>
  EAGLE_HD static void point(int64_t i, InView<T> x, Out<T> out) {
    out[i] = x.at_element(i);
  }
};

struct AddToView {
  static constexpr const char* name = "add_to_view";
  static constexpr std::array<const char*, 2> params = {"view", "c"};
  using types = eagle::types<float, double>;
  static constexpr bool per_sample = false;
  static std::vector<ArrayMeta> infer(const std::vector<ArrayMeta>& in,
                                      const std::vector<ScalarArg>&) {
    return view_and_c(in, name);
  }
  template <class T>
  EAGLE_HD static void point(int64_t i, InOutView<T> view, In<T> c) {
    view.at_element(i) += c[i];
  }
};

struct ScatterView {
  static constexpr const char* name = "scatter_view";
  static constexpr std::array<const char*, 2> params = {"view", "c"};
  using types = eagle::types<float, double, half, bfloat16>;
  static constexpr bool per_sample = false;
  static std::vector<ArrayMeta> infer(const std::vector<ArrayMeta>& in,
                                      const std::vector<ScalarArg>&) {
    return view_and_c(in, name);
  }
  template <class T>
  EAGLE_HD static void point(int64_t i, InOutView<T> view, In<T> c) {
    view.at_element(i) = c[i];  // a copy: 16-bit types move as plain bits
  }
};

struct ZeroView {
  static constexpr const char* name = "zero_view";
  static constexpr std::array<const char*, 1> params = {"view"};
  using types = eagle::types<float, double, half, bfloat16>;
  static constexpr bool per_sample = false;
  static std::vector<ArrayMeta> infer(const std::vector<ArrayMeta>&,
                                      const std::vector<ScalarArg>&) {
    return {};
  }
  template <class T>
  EAGLE_HD static void point(int64_t i, InOutView<T> view) {
    view.at_element(i) = T{};  // +0 (16-bit types are plain bits here)
  }
};

}  // namespace

EAGLE_TYPED_KERNEL(gather_view, GatherView)
EAGLE_TYPED_KERNEL(add_to_view, AddToView)
EAGLE_TYPED_KERNEL(scatter_view, ScatterView)
EAGLE_TYPED_KERNEL(zero_view, ZeroView)

}  // namespace eagle::kernels
