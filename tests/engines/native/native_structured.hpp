// What the native structured engines' tests share: the engine ids of the built-in manifest, a
// fixture that skips without a GPU, the shapes and dtypes every engine is run over, and a
// stand-in H100/H200 descriptor for planning declines on a machine without one.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine_sweep.hpp"
#include "test_util.hpp"

namespace eagle::test::native {

inline const plan::Manifest& manifest() {
  return engines::builtin_manifest();
}
inline int64_t engine(const std::string& family, const std::string& name) {
  return sweep::engine_id(manifest(), family, name);
}
inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> d = {DType::f32, DType::f16, DType::bf16};
  return d;
}
// [rows, len]: odd sizes, size 1, rows longer than one block, a row longer than the registers.
inline const std::vector<op::Dims>& row_shapes() {
  static const std::vector<op::Dims> s = {{3, 5}, {1, 1}, {127, 4099}, {2113, 1031}, {7, 131072}};
  return s;
}
inline std::string dims_name(const op::Dims& d) {
  std::string s;
  for (int64_t v : d) s += (s.empty() ? "" : "x") + std::to_string(v);
  return s;
}
inline DeviceProperties hopper() {
  return stand_in_gpu(90);
}

// Skips the calling test unless `engine_id` can run on cuda:0.
#define EAGLE_SKIP_UNLESS_RUNS_HERE(engine_id)                                             \
  do {                                                                                     \
    const std::string eagle_why_ =                                                         \
        ::eagle::test::sweep::unavailable(::eagle::test::native::manifest(), (engine_id)); \
    if (!eagle_why_.empty()) GTEST_SKIP() << eagle_why_;                                   \
  } while (0)

// The parameter of the GPU cases: a dtype and a shape.
struct DtypeShape {
  DType dtype;
  op::Dims dims;
};
inline std::vector<DtypeShape> dtype_shapes(const std::vector<op::Dims>& shapes) {
  std::vector<DtypeShape> out;
  for (DType d : float_dtypes())
    for (const op::Dims& s : shapes) out.push_back({d, s});
  return out;
}
inline std::string dtype_shape_name(const ::testing::TestParamInfo<DtypeShape>& info) {
  return std::string(dtype_name(info.param.dtype)) + "_" + dims_name(info.param.dims);
}
inline void PrintTo(const DtypeShape& p, std::ostream* os) {
  *os << dtype_name(p.dtype) << " [" << dims_name(p.dims) << "]";
}

class NativeGpuCase : public ::testing::TestWithParam<DtypeShape> {};

}  // namespace eagle::test::native
