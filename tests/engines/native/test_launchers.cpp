// Every kernel a plan can pick exists in a CUDA build (the launch tables of
// src/engines/native/*_kernels.cu), and dtypes without kernels have none. Checked on the CPU:
// choosing a launcher launches nothing.
#include <gtest/gtest.h>

#include "eagle/eagle.hpp"

#include "engines/native/embedding_bwd_kernels.hpp"
#include "engines/native/embedding_kernels.hpp"
#include "engines/native/fused_kernels.hpp"
#include "engines/native/loss_kernels.hpp"
#include "engines/native/norm_bwd_kernels.hpp"
#include "engines/native/norm_kernels.hpp"
#include "engines/native/reduction_kernels.hpp"
#include "engines/native/softmax_kernels.hpp"

namespace eagle::native {
namespace {

#ifdef EAGLE_HAVE_CUDA
constexpr bool kCuda = true;
#else
constexpr bool kCuda = false;
#endif

std::vector<RowGeometry> geometries(DType d) {
  std::vector<RowGeometry> out;
  for (int vec : {1, static_cast<int>(16 / itemsize(d))})
    for (bool cached : {true, false}) {
      RowGeometry g;
      g.vec = vec;
      g.cached = cached;
      out.push_back(g);
    }
  return out;
}

TEST(NativeLaunchers, EveryPathOfEveryFloatDtypeHasAKernel) {
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(d));
    for (const RowGeometry& g : geometries(d)) {
      SCOPED_TRACE("vec " + std::to_string(g.vec) + (g.cached ? " cached" : " streaming"));
      EXPECT_EQ(softmax_launcher(d, g) != nullptr, kCuda);
      EXPECT_EQ(split_softmax_launcher(d, g) != nullptr, kCuda);
      EXPECT_EQ(softmax_bwd_launcher(d, g) != nullptr, kCuda);
      EXPECT_EQ(split_softmax_bwd_launcher(d, g) != nullptr, kCuda);
      EXPECT_EQ(norm_launcher(d, g) != nullptr, kCuda);
      for (bool params : {false, true})
        EXPECT_EQ(norm_bwd_launcher(d, g, params) != nullptr, kCuda);
      EXPECT_EQ(row_reduce_launcher(d, g) != nullptr, kCuda);
      for (DType id : {DType::i32, DType::i64}) {
        EXPECT_EQ(cross_entropy_launcher(d, id, g) != nullptr, kCuda);
        EXPECT_EQ(split_cross_entropy_launcher(d, id, g) != nullptr, kCuda);
        EXPECT_EQ(cross_entropy_bwd_launcher(d, id, g) != nullptr, kCuda);
        EXPECT_EQ(embedding_bwd_launcher(d, id, g) != nullptr, kCuda);
      }
    }
    EXPECT_EQ(strided_reduce_launcher(d) != nullptr, kCuda);
  }
  EXPECT_EQ(fused_launcher() != nullptr, kCuda);  // one kernel for every dtype mix
  for (int unit : {16, 4, 2})
    for (DType id : {DType::i32, DType::i64})
      EXPECT_EQ(embedding_launcher(unit, id) != nullptr, kCuda);
}

TEST(NativeLaunchers, FusedNamesCoverThePointwiseTableButIntegerDtypes) {
  int named = 0;
  for (const op::OpSchema* schema : op::all_ops()) {
    if (schema->kind != op::OpKind::pointwise) continue;
    uint8_t code;
    EXPECT_TRUE(fused_op_of(schema->name, code)) << schema->name;
    ++named;
  }
  EXPECT_GT(named, 30);
  FusedType t;
  EXPECT_TRUE(fused_type_of(DType::boolean, t));
  EXPECT_FALSE(fused_type_of(DType::i32, t));
  EXPECT_FALSE(fused_type_of(DType::f64, t));
}

TEST(NativeLaunchers, NoKernelForOtherDtypesOrWidths) {
  RowGeometry g;
  EXPECT_EQ(softmax_launcher(DType::f64, g), nullptr);
  EXPECT_EQ(norm_launcher(DType::i32, g), nullptr);
  EXPECT_EQ(cross_entropy_launcher(DType::f32, DType::u32, g), nullptr);
  EXPECT_EQ(embedding_launcher(8, DType::i64), nullptr);
  g.vec = 2;  // neither 16 bytes nor one element
  EXPECT_EQ(softmax_launcher(DType::f32, g), nullptr);
}

}  // namespace
}  // namespace eagle::native
