// A typed way to write a kernel: one definition whose body is a function of one index and typed
// accessors, for the CPU and the GPU alike, side by side.
//
//   struct Axpy {
//     static constexpr const char* name = "axpy";
//     static constexpr std::array<const char*, 4> params = {"x", "y", "out", "alpha"};
//     using types = eagle::types<float, double>;      // the T the body is instantiated for
//     template <class T>
//     EAGLE_HD static void point(int64_t i, eagle::In<T> x, eagle::In<T> y, eagle::Out<T> out,
//                                double alpha) {
//       out[i] = T(alpha) * x[i] + y[i];
//     }
//   };
//   const eagle::Kernel& axpy() { static const eagle::Kernel k = eagle::typed_kernel<Axpy>();
//   return k; }
//   // or, the same: EAGLE_TYPED_KERNEL(axpy, Axpy)
//
// The body's signature is the kernel's parameter list: In<T> is read, Out<T> written, InOut<T>
// read and written (InView/OutView/InOutView take strided arrays: index them with at()), double
// is a real scalar and int64_t an integer one; `params` names them in that order. eagle runs the
// body for every i in [0, extent): over the thread team on the CPU, a grid-stride loop on the GPU.
// The file holding typed_kernel<Def>() must be compiled by nvcc in a CUDA build (a .cu file;
// eagle_kernel_sources() in CMake compiles it as C++ when there is no CUDA): the GPU version exists
// exactly when that file is compiled as CUDA.
//
// Optional members of the definition:
//   static constexpr bool per_sample = ...;  (default true) and reduces (default false)
//   static std::vector<eagle::ArrayMeta> infer(const std::vector<eagle::ArrayMeta>& inputs,
//                                              const std::vector<eagle::ScalarArg>& scalars);
//       default: every output has the first input's shape and its type from the signature
//   static int64_t extent(const eagle::KernelArgs& a);  default: numel of the first written array
//   cpu_point / cuda_point (EAGLE_HD too) instead of point: a body for one side only (the other
//       side then has no implementation, and a graph built there is refused)
//   static constexpr int64_t grain = ...;    CPU indices per task (default 16384)
//   static constexpr unsigned block = ...;   GPU threads per block (default 256)
//   static constexpr bool one_block = ...;   (default false) the GPU runs ONE block of `block`
//       threads, each calling cuda_point(threadIdx.x, ...) once, so the body may use shared
//       memory and synchronise the block (a block-wide scan); the CPU still runs [0, extent)
//   static constexpr bool no_gradient = ...; the outputs carry no gradient (see Derivative)
//   static std::shared_ptr<const eagle::Derivative> derivative();  the rule (KernelDef::
//       derivative), made once with the kernel; a rule that records the kernel itself may, since
//       it calls the kernel only when the reverse pass runs it
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "eagle/core/error.hpp"
#include "eagle/core/hd.hpp"
#include "eagle/kernel/kernel.hpp"
#include "eagle/kernel/thread_team.hpp"

#ifdef __CUDACC__
#include "eagle/kernel/cuda_function.hpp"
#endif

namespace eagle {

template <class... T>
struct types {};

namespace typed_detail {
struct Strided {};
struct Dense {};
}  // namespace typed_detail

// A typed view of one array argument. Dense accessors index the flat, contiguous array with [];
// every accessor indexes by coordinates with at() through the strides.
template <class T, Access A, class Layout>
class Accessor {
 public:
  using element = T;
  static constexpr Access access = A;
  static constexpr bool strided = std::is_same_v<Layout, typed_detail::Strided>;
  using pointer = std::conditional_t<A == Access::read, const T*, T*>;
  using reference = std::conditional_t<A == Access::read, const T&, T&>;

  EAGLE_HD explicit Accessor(const ArrayArg& arg)
      : data_(static_cast<pointer>(arg.data)), arg_(&arg) {}

  EAGLE_HD reference operator[](int64_t i) const {
    static_assert(!strided, "a strided view is indexed with at()");
    return data_[i];
  }
  template <class... I>
  EAGLE_HD reference at(I... index) const {
    const int64_t idx[] = {static_cast<int64_t>(index)...};
    int64_t offset = 0;
    for (std::size_t k = 0; k < sizeof...(I); ++k) offset += idx[k] * arg_->strides[k];
    return data_[offset];
  }
  // Element i in row-major order over the shape, through the strides (element_offset).
  EAGLE_HD reference at_element(int64_t i) const { return data_[element_offset(*arg_, i)]; }
  EAGLE_HD int64_t numel() const { return arg_->numel; }
  EAGLE_HD int64_t dim(int k) const { return arg_->dims[k]; }
  EAGLE_HD int64_t stride(int k) const { return arg_->strides[k]; }
  EAGLE_HD int ndim() const { return arg_->ndim; }
  EAGLE_HD pointer data() const { return data_; }

 private:
  pointer data_;
  const ArrayArg* arg_;
};

template <class T>
using In = Accessor<T, Access::read, typed_detail::Dense>;
template <class T>
using Out = Accessor<T, Access::write, typed_detail::Dense>;
template <class T>
using InOut = Accessor<T, Access::read_write, typed_detail::Dense>;
template <class T>
using InView = Accessor<T, Access::read, typed_detail::Strided>;
template <class T>
using OutView = Accessor<T, Access::write, typed_detail::Strided>;
template <class T>
using InOutView = Accessor<T, Access::read_write, typed_detail::Strided>;

namespace typed_detail {

template <class P>
struct is_accessor : std::false_type {};
template <class T, Access A, class L>
struct is_accessor<Accessor<T, A, L>> : std::true_type {};
template <class P>
inline constexpr bool is_accessor_v = is_accessor<std::remove_cvref_t<P>>::value;
template <class P>
inline constexpr bool is_scalar_v = std::is_same_v<std::remove_cvref_t<P>, double> ||
                                    std::is_same_v<std::remove_cvref_t<P>, int64_t>;

// The parameters of a body `void (int64_t, P...)`.
template <class F>
struct signature;
template <class... P>
struct signature<void (*)(int64_t, P...)> {
  using params = std::tuple<std::remove_cvref_t<P>...>;
};

template <class Tuple, std::size_t K, bool Arrays>
constexpr int count_before() {
  int n = 0;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((n += (I < K && (Arrays ? is_accessor_v<std::tuple_element_t<I, Tuple>>
                             : is_scalar_v<std::tuple_element_t<I, Tuple>>))
               ? 1
               : 0),
     ...);
  }
  (std::make_index_sequence<std::tuple_size_v<Tuple>>());
  return n;
}
template <class Tuple>
constexpr int count_arrays() {
  return count_before<Tuple, std::tuple_size_v<Tuple>, true>();
}
template <class Tuple>
constexpr int count_scalars() {
  return count_before<Tuple, std::tuple_size_v<Tuple>, false>();
}

template <class Tuple, std::size_t K, class Args>
EAGLE_HD std::tuple_element_t<K, Tuple> param_at(const Args& a) {
  using P = std::tuple_element_t<K, Tuple>;
  if constexpr (is_accessor_v<P>) {
    return P(a.arrays[count_before<Tuple, K, true>()]);
  } else if constexpr (std::is_same_v<P, double>) {
    return a.scalars[count_before<Tuple, K, false>()].f;
  } else {
    return a.scalars[count_before<Tuple, K, false>()].i;
  }
}

// Which body each side runs: cpu_point / cuda_point where given, else point. Every body is an
// EAGLE_HD function, so any of them gives the signature.
// (Traits rather than requires-expressions: nvcc 13 answers false for `&Def::template f<T>`
// inside one.)
template <class Def, class T, class = void>
inline constexpr bool has_point = false;
template <class Def, class T>
inline constexpr bool has_point<Def, T, std::void_t<decltype(&Def::template point<T>)>> = true;
template <class Def, class T, class = void>
inline constexpr bool has_cpu_point = false;
template <class Def, class T>
inline constexpr bool has_cpu_point<Def, T, std::void_t<decltype(&Def::template cpu_point<T>)>> =
    true;
template <class Def, class T, class = void>
inline constexpr bool has_cuda_point = false;
template <class Def, class T>
inline constexpr bool has_cuda_point<Def, T, std::void_t<decltype(&Def::template cuda_point<T>)>> =
    true;
template <class Def, class T>
inline constexpr bool has_cpu = has_point<Def, T> || has_cpu_point<Def, T>;
template <class Def, class T>
inline constexpr bool has_cuda = has_point<Def, T> || has_cuda_point<Def, T>;

template <class Def, class T>
constexpr auto some_body() {
  if constexpr (has_point<Def, T>) {
    return &Def::template point<T>;
  } else if constexpr (has_cpu_point<Def, T>) {
    return &Def::template cpu_point<T>;
  } else {
    static_assert(has_cuda_point<Def, T>, "a typed kernel needs point, cpu_point or cuda_point");
    return &Def::template cuda_point<T>;
  }
}
template <class Def, class T>
using params_of = typename signature<decltype(some_body<Def, T>())>::params;

enum class Side { cpu, cuda };

template <class Def, class T, Side side, class Args, std::size_t... K>
EAGLE_HD void call_at(int64_t i, const Args& a, std::index_sequence<K...>) {
  using Ps = params_of<Def, T>;
  if constexpr (side == Side::cpu && has_cpu_point<Def, T>) {
    Def::template cpu_point<T>(i, param_at<Ps, K>(a)...);
  } else if constexpr (side == Side::cuda && has_cuda_point<Def, T>) {
    Def::template cuda_point<T>(i, param_at<Ps, K>(a)...);
  } else {
    Def::template point<T>(i, param_at<Ps, K>(a)...);
  }
}

template <class Def, class T, class Args>
EAGLE_HD int64_t extent_of(const Args& a) {
  if constexpr (requires { Def::extent(a); }) {
    return Def::extent(a);
  } else {
    // The first written array (the first array when none is written).
    using Ps = params_of<Def, T>;
    int64_t n = a.arrays[0].numel;
    bool found = false;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            using P = std::tuple_element_t<I, Ps>;
            if constexpr (is_accessor_v<P>) {
              if (!found && P::access != Access::read) {
                n = a.arrays[count_before<Ps, I, true>()].numel;
                found = true;
              }
            }
          }(),
          ...);
    }
    (std::make_index_sequence<std::tuple_size_v<Ps>>());
    return n;
  }
}

template <class Def>
constexpr int64_t grain() {
  if constexpr (requires { Def::grain; }) {
    return Def::grain;
  } else {
    return 16384;
  }
}
template <class Def>
constexpr bool one_block() {
  if constexpr (requires { Def::one_block; }) {
    return Def::one_block;
  } else {
    return false;
  }
}
template <class Def>
constexpr unsigned block() {
  if constexpr (requires { Def::block; }) {
    return Def::block;
  } else {
    return 256;
  }
}

template <class Def, class T>
void cpu_entry(const KernelArgs& a, const ThreadTeam& team) {
  constexpr auto seq = std::make_index_sequence<std::tuple_size_v<params_of<Def, T>>>();
  team.parallel_for(extent_of<Def, T>(a), grain<Def>(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) call_at<Def, T, Side::cpu>(i, a, seq);
  });
}

#ifdef __CUDACC__
template <class Def, class T>
__global__ void cuda_entry(const __grid_constant__ KernelArgsN<count_arrays<params_of<Def, T>>(),
                                                               count_scalars<params_of<Def, T>>()>
                               a) {
  constexpr auto seq = std::make_index_sequence<std::tuple_size_v<params_of<Def, T>>>();
  if constexpr (one_block<Def>()) {
    call_at<Def, T, Side::cuda>(threadIdx.x, a, seq);
    return;
  }
  const int64_t n = extent_of<Def, T>(a);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    call_at<Def, T, Side::cuda>(i, a, seq);
}

template <class Def, class T>
CudaLaunchShape cuda_shape(const KernelArgs& a, const DeviceProperties& device) {
  const int64_t n = extent_of<Def, T>(a);
  const int64_t wanted = (n + block<Def>() - 1) / block<Def>();
  // Enough blocks to fill the device several times over; the loop strides over the rest.
  const int64_t cap =
      static_cast<int64_t>(device.multiprocessors > 0 ? device.multiprocessors : 1) * 16;
  CudaLaunchShape s;
  s.grid[0] =
      one_block<Def>() ? 1u : static_cast<unsigned>(wanted < 1 ? 1 : (wanted < cap ? wanted : cap));
  s.block[0] = block<Def>();
  return s;
}
#endif

template <class T>
constexpr DType dtype_of_element() {
  return dtype_of<T>;
}

// The dtype of every array parameter, in order, for one T.
template <class Ps>
std::vector<DType> array_dtypes() {
  std::vector<DType> out;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          using P = std::tuple_element_t<I, Ps>;
          if constexpr (is_accessor_v<P>) out.push_back(dtype_of_element<typename P::element>());
        }(),
        ...);
  }
  (std::make_index_sequence<std::tuple_size_v<Ps>>());
  return out;
}

template <class Def, class T>
KernelImpl impl_for() {
  KernelImpl impl;
  if constexpr (has_cpu<Def, T>) impl.cpu = &cpu_entry<Def, T>;
#ifdef __CUDACC__
  if constexpr (has_cuda<Def, T>) {
    impl.cuda_function = cuda_function(&cuda_entry<Def, T>);
    impl.cuda_shape = &cuda_shape<Def, T>;
  }
#endif
  return impl;
}

template <class Def, class... T>
std::tuple<T...> types_tuple_of(types<T...>);

}  // namespace typed_detail

// Makes the Kernel of a typed definition (see the top of this file).
template <class Def>
Kernel typed_kernel() {
  using Types = decltype(typed_detail::types_tuple_of<Def>(typename Def::types{}));
  using D = Def;
  using T0 = std::tuple_element_t<0, Types>;
  using Ps = typed_detail::params_of<D, T0>;
  constexpr std::size_t kParams = std::tuple_size_v<Ps>;
  static_assert(std::tuple_size_v<decltype(Def::params)> == kParams,
                "params must name every parameter of the body, in order");
  KernelDef def;
  def.name = Def::name;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          using P = std::tuple_element_t<I, Ps>;
          static_assert(typed_detail::is_accessor_v<P> || typed_detail::is_scalar_v<P>,
                        "a body parameter must be an accessor (In, Out, InOut, ...), double or "
                        "int64_t");
          if constexpr (typed_detail::is_accessor_v<P>) {
            def.arrays.push_back({Def::params[I], P::access, P::strided});
          } else {
            def.scalars.push_back({Def::params[I], std::is_same_v<P, double>
                                                       ? ScalarKind::real
                                                       : ScalarKind::integer});
          }
        }(),
        ...);
  }
  (std::make_index_sequence<kParams>());
  if constexpr (requires { Def::per_sample; }) def.per_sample = Def::per_sample;
  if constexpr (requires { Def::reduces; }) def.reduces = Def::reduces;
  if constexpr (requires { Def::no_gradient; }) def.no_gradient = Def::no_gradient;
  if constexpr (requires { Def::derivative(); }) def.derivative = Def::derivative();
  // The implementations, one per T, keyed by the dtypes of the array parameters.
  struct Entry {
    std::vector<DType> dtypes;
    KernelImpl impl;
  };
  std::vector<Entry> entries;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (entries.push_back(
         {typed_detail::array_dtypes<typed_detail::params_of<D, std::tuple_element_t<I, Types>>>(),
          typed_detail::impl_for<D, std::tuple_element_t<I, Types>>()}),
     ...);
  }
  (std::make_index_sequence<std::tuple_size_v<Types>>());
  const std::string name = Def::name;
  std::vector<std::size_t> input_params;  // array positions of read parameters
  for (std::size_t i = 0; i < def.arrays.size(); ++i)
    if (reads(def.arrays[i].access)) input_params.push_back(i);
  if constexpr (requires(const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>& s) {
                  Def::infer(in, s);
                }) {
    def.infer = &Def::infer;
  } else {
    // Every output has the first input's shape; its dtype is the signature's, for the T whose
    // input dtypes match the call (the caller's buffer gives the shape when there is no input).
    def.infer = [entries, input_params, name](const std::vector<ArrayMeta>& in,
                                              const std::vector<ScalarArg>&) {
      const Entry* match = nullptr;
      for (const Entry& e : entries) {
        bool same = true;
        for (std::size_t k = 0; k < in.size(); ++k)
          same = same && e.dtypes[input_params[k]] == in[k].dtype;
        if (same && !match) match = &e;
      }
      // No T matches: outputs take the first input's dtype, and select() declines by name.
      const Entry& e = match ? *match : entries.front();
      std::vector<ArrayMeta> out;
      std::size_t k = 0;
      for (std::size_t i = 0; i < e.dtypes.size(); ++i) {
        if (k < input_params.size() && input_params[k] == i) {
          if (!in.empty() && in[k].shape != in[0].shape)
            throw InvalidArgument("kernel " + name + ": argument " + std::to_string(k) +
                                  " has shape " + shape_str(in[k].shape) + " but argument 0 has " +
                                  shape_str(in[0].shape) + "; the arguments must have one shape");
          ++k;
          continue;
        }
        out.push_back({in.empty() ? Shape{-1} : in[0].shape,
                       match || in.empty() ? e.dtypes[i] : in[0].dtype});
      }
      return out;
    };
  }
  def.select = [entries, name](const std::vector<DType>& dtypes) {
    for (const Entry& e : entries)
      if (e.dtypes == dtypes) return e.impl;
    std::string served;
    for (const Entry& e : entries) {
      served += served.empty() ? "(" : ", (";
      for (std::size_t i = 0; i < e.dtypes.size(); ++i)
        served += (i ? "," : "") + std::string(dtype_name(e.dtypes[i]));
      served += ")";
    }
    std::string got;
    for (std::size_t i = 0; i < dtypes.size(); ++i)
      got += (i ? "," : "") + std::string(dtype_name(dtypes[i]));
    throw NotSupported("kernel " + name + ": dtypes (" + got + ") are not served (serves " +
                       served + ")");
  };
  return Kernel(std::move(def));
}

}  // namespace eagle

// Defines `const eagle::Kernel& fn()`, the kernel made once from the definition Def.
#define EAGLE_TYPED_KERNEL(fn, Def)                                            \
  const ::eagle::Kernel& fn() {                                                \
    static const ::eagle::Kernel eagle_kernel_ = ::eagle::typed_kernel<Def>(); \
    return eagle_kernel_;                                                      \
  }
