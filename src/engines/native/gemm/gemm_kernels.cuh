// The CUTLASS types behind gemm_epilogue.hpp: one GEMM per (element type, b's layout, epilogue),
// each instantiated in its own *_sm90.cu file (they compile slowly; apart, they build in
// parallel) through EAGLE_EPILOGUE_GEMM_INSTANCE.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "engines/native/gemm/gemm_epilogue.hpp"

namespace eagle::native::gemm {

// gelu(z) = z Phi(z) in f32, as the native pointwise kernels evaluate it (pointwise_math.cuh).
template <class T>
struct GeluErf;
template <int N>
struct GeluErf<cutlass::Array<float, N>> {
  CUTLASS_DEVICE cutlass::Array<float, N> operator()(const cutlass::Array<float, N>& z) const {
    cutlass::Array<float, N> y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = 0.5f * z[i] * (1.0f + erff(z[i] * 0.70710678118654752f));
    return y;
  }
};
template <>
struct GeluErf<float> {
  CUTLASS_HOST_DEVICE float operator()(float z) const {
    return 0.5f * z * (1.0f + erff(z * 0.70710678118654752f));
  }
};

// gelu_backward(d, z) = d (Phi(z) + z phi(z)) in f32, as pointwise_math.cuh.
template <class T>
struct GeluErfBackward;
template <int N>
struct GeluErfBackward<cutlass::Array<float, N>> {
  CUTLASS_DEVICE cutlass::Array<float, N> operator()(const cutlass::Array<float, N>& d,
                                                     const cutlass::Array<float, N>& z) const {
    cutlass::Array<float, N> y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i)
      y[i] = d[i] * (0.5f * (1.0f + erff(z[i] * 0.70710678118654752f)) +
                     z[i] * 0.3989422804014327f * expf(-0.5f * z[i] * z[i]));
    return y;
  }
};
template <>
struct GeluErfBackward<float> {
  CUTLASS_HOST_DEVICE float operator()(float d, float z) const {
    return d * (0.5f * (1.0f + erff(z * 0.70710678118654752f)) +
                z * 0.3989422804014327f * expf(-0.5f * z * z));
  }
};

// native_gemm's configuration: a warp-specialized cooperative mainloop (two consumer warpgroups
// of 64 rows each) over 128 x 128 output tiles in 64-deep K steps, no cluster. The dim-512 MLP's
// [4096, 512] products are 128 tiles: one wave on 132 SMs. (bench/probes/gemm_config_probe.cu
// sets others beside it.)
struct Cooperative128 {
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
};

// A configuration's epilogue subtile: its `EpilogueTile` when it names one, else CUTLASS's choice.
template <class Config, class = void>
struct EpilogueTileOf {
  using type = cutlass::epilogue::collective::EpilogueTileAuto;
};
template <class Config>
struct EpilogueTileOf<Config, std::void_t<typename Config::EpilogueTile>> {
  using type = typename Config::EpilogueTile;
};

// One Hopper GEMM: TMA loads, `Config`'s mainloop, f32 accumulation, the epilogue `Fusion`
// through TMA stores; y row-major, no source C.
template <class Element, class LayoutA, class LayoutB, class Fusion, class Config = Cooperative128>
struct Sm90Gemm {
  using TileShape = typename Config::TileShape;
  using ClusterShape = typename Config::ClusterShape;
  using KernelSchedule = typename Config::KernelSchedule;
  using EpilogueSchedule = typename Config::EpilogueSchedule;
  using Row = cutlass::layout::RowMajor;
  static constexpr int kAlign = 8;  // elements in 16 bytes
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      typename EpilogueTileOf<Config>::type, float, float, void, Row, kAlign, Element, Row, kAlign,
      EpilogueSchedule, Fusion>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA, kAlign, Element,
      LayoutB, kAlign, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>,
                                                      CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

// Checks `args` against the kernel, sets it up in `workspace` (on `stream`) and launches it.
template <class Gemm>
bool launch_gemm(const typename Gemm::Arguments& args, void* workspace,
                 cudaStream_t stream) noexcept {
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return false;
  if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return false;
  return gemm.run(stream) == cutlass::Status::kSuccess;
}

// The arguments of `Gemm` (an Sm90Gemm over row-major a) for `a`: b column-major or row-major,
// alpha 1 and beta 0, and where the epilogue has them its bias and its aux (z: written or read).
template <class Gemm, bool BColMajor>
typename Gemm::Arguments gemm_arguments(const EpilogueGemmArgs& a, int multiprocessors) {
  using Element = typename Gemm::GemmKernel::ElementA;
  using StrideB = typename Gemm::GemmKernel::StrideB;
  // CUTLASS's B is (N, K): column-major b [K, N] is K-contiguous, row-major b N-contiguous.
  StrideB sb;
  if constexpr (BColMajor)
    sb = cute::make_stride(a.ldb, cute::Int<1>{}, int64_t{0});
  else
    sb = cute::make_stride(cute::Int<1>{}, a.ldb, int64_t{0});
  const auto sd = cute::make_stride(a.ldy, cute::Int<1>{}, int64_t{0});
  typename Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape =
      cute::make_shape(static_cast<int>(a.m), static_cast<int>(a.n), static_cast<int>(a.k), 1);
  args.mainloop = {static_cast<const Element*>(a.a),
                   cute::make_stride(a.lda, cute::Int<1>{}, int64_t{0}),
                   static_cast<const Element*>(a.b), sb};
  args.epilogue.dC = sd;
  args.epilogue.ptr_D = static_cast<Element*>(a.y);
  args.epilogue.dD = sd;
  auto& f = args.epilogue.thread;
  f.alpha = 1.0f;
  f.beta = 0.0f;
  if constexpr (requires { f.bias_ptr; }) f.bias_ptr = static_cast<const Element*>(a.bias);
  if constexpr (requires { f.aux_ptr; }) {
    f.aux_ptr = static_cast<decltype(f.aux_ptr)>(a.aux);
    f.dAux = cute::make_stride(a.ld_aux, cute::Int<1>{}, int64_t{0});
  }
  args.hw_info.device_id = 0;
  args.hw_info.sm_count = multiprocessors;
  return args;
}

// y = gelu(a b + bias) keeping a b + bias, or y = gelu_backward(a b, z) (gemm_epilogue.hpp).
template <class Element, bool BColMajor, Epilogue E, class Config = Cooperative128>
struct EpilogueGemmKernel {
  using Row = cutlass::layout::RowMajor;
  using LayoutB = std::conditional_t<BColMajor, cutlass::layout::ColumnMajor, Row>;
  using Fusion =
      std::conditional_t<E == Epilogue::gelu,
                         cutlass::epilogue::fusion::LinCombPerColBiasEltActAux<
                             Row, GeluErf, Element, float, Element, Element, Element, float>,
                         cutlass::epilogue::fusion::LinCombDeEltAct<
                             Row, GeluErfBackward, Element, float, Element, Element, float>>;
  using Gemm = typename Sm90Gemm<Element, Row, LayoutB, Fusion, Config>::Gemm;

  static typename Gemm::Arguments arguments(const EpilogueGemmArgs& a, int multiprocessors) {
    return gemm_arguments<Gemm, BColMajor>(a, multiprocessors);
  }
};

template <class Element, bool BColMajor, Epilogue E>
bool run_epilogue_gemm(const EpilogueGemmArgs& a, int multiprocessors, void* workspace,
                       cudaStream_t stream) noexcept;
template <class Element, bool BColMajor, Epilogue E>
std::size_t epilogue_gemm_workspace_of(const EpilogueGemmArgs& a) noexcept;

// The body of one instance's file.
#define EAGLE_EPILOGUE_GEMM_INSTANCE(ELEMENT, BCOL, EPILOGUE)                                      \
  template <>                                                                                      \
  bool run_epilogue_gemm<ELEMENT, BCOL, EPILOGUE>(const EpilogueGemmArgs& a, int sms,              \
                                                  void* workspace, cudaStream_t stream) noexcept { \
    using K = EpilogueGemmKernel<ELEMENT, BCOL, EPILOGUE>;                                         \
    return launch_gemm<typename K::Gemm>(K::arguments(a, sms), workspace, stream);                 \
  }                                                                                                \
  template <>                                                                                      \
  std::size_t epilogue_gemm_workspace_of<ELEMENT, BCOL, EPILOGUE>(                                 \
      const EpilogueGemmArgs& a) noexcept {                                                        \
    using K = EpilogueGemmKernel<ELEMENT, BCOL, EPILOGUE>;                                         \
    return K::Gemm::get_workspace_size(K::arguments(a, 1));                                        \
  }

}  // namespace eagle::native::gemm
