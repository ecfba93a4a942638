// The heat step as a typed kernel: one body for every grid point, run over the thread team on
// the CPU and as a grid-stride loop on the GPU.
#include "demo_kernels.hpp"

#include <array>

#include "eagle/kernel/typed.hpp"

namespace eagle::demo {

namespace {

struct HeatStep {
  static constexpr const char* name = "heat_step";
  static constexpr std::array<const char*, 3> params = {"u", "out", "alpha"};
  using types = eagle::types<float, double>;
  static constexpr bool per_sample = false;  // reads its neighbours

  static std::vector<ArrayMeta> infer(const std::vector<ArrayMeta>& in,
                                      const std::vector<ScalarArg>& s) {
    if (in[0].shape.size() != 2)
      throw InvalidArgument("kernel heat_step: argument 'u' must be 2-D, got " +
                            shape_str(in[0].shape));
    if (!(s[0].f > 0 && s[0].f <= 0.25))
      throw InvalidArgument("kernel heat_step: scalar 'alpha' must be in (0, 0.25] for stability");
    return {in[0]};
  }

  template <class T>
  EAGLE_HD static void point(int64_t i, In<T> u, Out<T> out, double alpha) {
    const int64_t rows = u.dim(0), cols = u.dim(1), r = i / cols, c = i % cols;
    if (r == 0 || c == 0 || r == rows - 1 || c == cols - 1) {
      out[i] = u[i];
      return;
    }
    out[i] = u[i] + T(alpha) * (u[i - cols] + u[i + cols] + u[i - 1] + u[i + 1] - T(4) * u[i]);
  }
};

}  // namespace

const Kernel& heat_step() {
  static const Kernel k = typed_kernel<HeatStep>();
  return k;
}

}  // namespace eagle::demo
