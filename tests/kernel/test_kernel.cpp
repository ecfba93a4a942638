// Tests of kernels as values: definitions, the argument block, scalars and user-defined kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "eagle/eagle.hpp"
#include "kernel_check.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using test::expect_exact;
using test::expect_matches;
using test::expect_throw_with;
using test::from_doubles;
using test::host;
using test::indexed;

constexpr DType kElementwiseDTypes[] = {DType::f64,  DType::f32, DType::f16,
                                        DType::bf16, DType::i64, DType::i32};
constexpr DType kReduceDTypes[] = {DType::f64, DType::f32, DType::i64, DType::i32};

class UserKernelOnDevice : public test::KernelCheck {};
EAGLE_ON_EVERY_DEVICE(UserKernelOnDevice);

// ---------------------------------------------------------------------------------------------
// A user-defined kernel

void square_plus_one_cpu(const KernelArgs& a, const ThreadTeam& team) {
  const float* x = static_cast<const float*>(a.arrays[0].data);
  float* out = static_cast<float*>(a.arrays[1].data);
  team.parallel_for(a.arrays[0].numel, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = x[i] * x[i] + 1.0f;
  });
}

Kernel square_plus_one() {
  KernelDef def;
  def.name = "square_plus_one";
  def.arrays = {{"x", Access::read}, {"out", Access::write}};
  def.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>&) {
    if (in[0].dtype != DType::f32) {
      std::string what = "kernel square_plus_one: argument 'x' must be f32, got ";
      what += dtype_name(in[0].dtype);
      throw InvalidArgument(what);
    }
    return std::vector<ArrayMeta>{in[0]};
  };
  def.select = [](const std::vector<DType>&) {
    KernelImpl impl;
    impl.cpu = &square_plus_one_cpu;
    return impl;
  };
  return Kernel(std::move(def));
}

TEST_P(UserKernelOnDevice, UserDefinedKernel) {
  const Kernel k = square_plus_one();
  EXPECT_EQ(k.name(), "square_plus_one");
  EXPECT_EQ(k.num_inputs(), 1);
  EXPECT_EQ(k.num_outputs(), 1);
  const Array x = test::random_array({100003}, DType::f32, device());
  if (device().is_cuda()) {
    // It has no CUDA implementation: a typed decline, not a crash.
    expect_throw_with<NotSupported>([&] { launch(k, {x}, {}, stream(), team_); },
                                    {"square_plus_one", "CUDA"});
    return;
  }
  const std::vector<double> hx = host(x);
  std::vector<double> want(hx.size());
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = hx[i] * hx[i] + 1.0;
  check(k, {x}, {}, {100003}, DType::f32, want);
  expect_throw_with<InvalidArgument>(
      [&] { launch(k, {test::random_array({5}, DType::f64, device())}, {}, stream(), team_); },
      {"'x'", "must be f32"});
}

// Records what a kernel receives, to check how eager calls pack the argument block.
struct SeenArgs {
  std::vector<ArrayArg> arrays;
  std::vector<ScalarArg> scalars;
  int num_arrays = 0;
  int num_scalars = 0;
};
struct Seen {
  SeenArgs args;
  std::vector<DType> selected;
  std::vector<std::vector<ArrayMeta>> inferred_inputs;
  std::vector<std::vector<ScalarArg>> inferred_scalars;
  int calls = 0;
};
Seen& seen() {
  static Seen s;
  return s;
}

void record_cpu(const KernelArgs& a, const ThreadTeam&) {
  // A copy: the block lives only as long as the call.
  seen().args = {std::vector<ArrayArg>(a.arrays, a.arrays + a.num_arrays),
                 std::vector<ScalarArg>(a.scalars, a.scalars + a.num_scalars), a.num_arrays,
                 a.num_scalars};
  ++seen().calls;
  // b += scale * a; out = a (as i64, the integer scalar added)
  const float* in = static_cast<const float*>(a.arrays[0].data);
  int64_t* out = static_cast<int64_t*>(a.arrays[1].data);
  float* acc = static_cast<float*>(a.arrays[2].data);
  for (int64_t i = 0; i < a.arrays[0].numel; ++i) {
    acc[i] += static_cast<float>(a.scalars[0].f) * in[i];
    out[i] = static_cast<int64_t>(in[i]) + a.scalars[1].i;
  }
}

Kernel recorder() {
  KernelDef def;
  def.name = "recorder";
  // Parameters interleave reads and writes: arguments go in parameter order.
  def.arrays = {{"a", Access::read}, {"out", Access::write}, {"acc", Access::read_write}};
  def.scalars = {{"scale", ScalarKind::real}, {"shift", ScalarKind::integer}};
  def.per_sample = true;
  def.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>& scalars) {
    seen().inferred_inputs.push_back(in);
    seen().inferred_scalars.push_back(scalars);
    return std::vector<ArrayMeta>{{in[0].shape, DType::i64}};
  };
  def.select = [](const std::vector<DType>& dtypes) {
    seen().selected = dtypes;
    KernelImpl impl;
    impl.cpu = &record_cpu;
    return impl;
  };
  return Kernel(std::move(def));
}

TEST(UserKernelTest, ArgumentsFollowTheParameterList) {
  seen() = Seen();
  const Kernel k = recorder();
  EXPECT_EQ(k.num_inputs(), 2);  // a and acc (read-write is passed by the caller)
  EXPECT_EQ(k.num_outputs(), 1);
  const Stream stream(Device::cpu());
  const ThreadTeam team(2);
  const Array a = Array::from(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, Device::cpu());
  const Array acc = Array::from(std::vector<float>{10, 20, 30, 40, 50, 60}, {2, 3}, Device::cpu());
  const auto outs = launch(k, {a, acc}, {Scalar(2), Scalar(7.9)}, stream, team);
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].dtype(), DType::i64);
  EXPECT_EQ(outs[0].shape(), (Shape{2, 3}));
  // The read-write argument is updated in place; the output holds a + shift (7.9 -> 7).
  EXPECT_EQ(acc.to_vector<float>(), (std::vector<float>{12, 24, 36, 48, 60, 72}));
  EXPECT_EQ(outs[0].to_vector<int64_t>(), (std::vector<int64_t>{8, 9, 10, 11, 12, 13}));

  const Seen& s = seen();
  EXPECT_EQ(s.calls, 1);
  EXPECT_EQ(s.selected, (std::vector<DType>{DType::f32, DType::i64, DType::f32}));
  ASSERT_EQ(s.inferred_inputs.size(), 1u);
  ASSERT_EQ(s.inferred_inputs[0].size(), 2u);
  EXPECT_EQ(s.inferred_inputs[0][0].shape, (Shape{2, 3}));
  EXPECT_EQ(s.inferred_inputs[0][1].dtype, DType::f32);
  ASSERT_EQ(s.inferred_scalars[0].size(), 2u);
  EXPECT_EQ(s.inferred_scalars[0][0].f, 2.0);  // an integer given for a real parameter
  EXPECT_EQ(s.inferred_scalars[0][1].i, 7);    // a real given for an integer parameter
  EXPECT_EQ(s.args.num_arrays, 3);
  EXPECT_EQ(s.args.num_scalars, 2);
  EXPECT_EQ(s.args.arrays[0].data, a.data());
  EXPECT_EQ(s.args.arrays[1].data, outs[0].data());
  EXPECT_EQ(s.args.arrays[2].data, acc.data());
  EXPECT_EQ(s.args.arrays[1].dtype, static_cast<int32_t>(DType::i64));
  EXPECT_EQ(s.args.arrays[2].numel, 6);
  EXPECT_EQ(s.args.arrays[2].ndim, 2);
  EXPECT_EQ(s.args.arrays[2].dims[0], 2);
  EXPECT_EQ(s.args.arrays[2].dims[1], 3);
  EXPECT_EQ(s.args.scalars[0].f, 2.0);
  EXPECT_EQ(s.args.scalars[1].i, 7);

  // launch_into: the caller's output, and inputs still in parameter order.
  const Array out = Array::empty({2, 3}, DType::i64, Device::cpu());
  launch_into(k, {a, acc}, {0.5, int64_t{-1}}, {out}, stream, team);
  EXPECT_EQ(seen().args.arrays[1].data, out.data());
  EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(acc.to_vector<float>(), (std::vector<float>{12.5, 25, 37.5, 50, 62.5, 75}));
}

TEST(UserKernelTest, SelectMayDecline) {
  KernelDef def;
  def.name = "picky";
  def.arrays = {{"x", Access::read}, {"out", Access::write}};
  def.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>&) {
    return std::vector<ArrayMeta>{in[0]};
  };
  def.select = [](const std::vector<DType>& d) -> KernelImpl {
    std::string what = "kernel picky: dtype ";
    what += dtype_name(d[0]);
    throw NotSupported(what);
  };
  const Kernel k(std::move(def));
  const Stream stream(Device::cpu());
  const ThreadTeam team(1);
  expect_throw_with<NotSupported>(
      [&] { launch(k, {Array::empty({3}, DType::bf16, Device::cpu())}, {}, stream, team); },
      {"picky", "bf16"});
}

// ---------------------------------------------------------------------------------------------
// Kernel definitions

KernelDef valid_def() {
  KernelDef def;
  def.name = "k";
  def.arrays = {{"x", Access::read}, {"out", Access::write}};
  def.scalars = {{"alpha"}};
  def.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>&) {
    return std::vector<ArrayMeta>{in[0]};
  };
  def.select = [](const std::vector<DType>&) { return KernelImpl{}; };
  return def;
}

TEST(KernelDefTest, ValidDefinition) {
  const Kernel k(valid_def());
  EXPECT_EQ(k.name(), "k");
  EXPECT_EQ(k.def().arrays.size(), 2u);
  EXPECT_EQ(k.def().scalars[0].kind, ScalarKind::real);
  EXPECT_EQ(k.num_inputs(), 1);
  EXPECT_EQ(k.num_outputs(), 1);
  const Kernel copy = k;
  EXPECT_TRUE(copy == k);
  EXPECT_FALSE(Kernel(valid_def()) == k);  // equality is identity of the definition
}

// The argument block is sized per kernel: no limit on arrays or scalars.
TEST(KernelDefTest, AnyArity) {
  KernelDef def = valid_def();
  def.arrays.clear();
  for (int i = 0; i < 40; ++i)
    def.arrays.push_back({indexed("a", i), i % 2 ? Access::write : Access::read_write});
  def.scalars.clear();
  for (int i = 0; i < 12; ++i) def.scalars.push_back({indexed("s", i)});
  const Kernel k(def);
  EXPECT_EQ(k.num_inputs(), 20);
  EXPECT_EQ(k.num_outputs(), 20);
}

TEST(KernelDefTest, ValidationErrors) {
  KernelDef def = valid_def();
  def.name = "";
  expect_throw_with<InvalidArgument>([&] { Kernel k(def); }, {"name must not be empty"});

  def = valid_def();
  def.arrays.clear();
  expect_throw_with<InvalidArgument>([&] { Kernel k(def); },
                                     {"Kernel 'k'", "at least one array parameter"});

  def = valid_def();
  def.arrays = {{"", Access::read}};
  expect_throw_with<InvalidArgument>([&] { Kernel k(def); }, {"Kernel 'k'", "no name"});

  def = valid_def();
  def.no_gradient = true;
  def.derivative = std::make_shared<Derivative>();
  expect_throw_with<InvalidArgument>([&] { Kernel k(def); }, {"no_gradient", "derivative"});

  def = valid_def();
  def.arrays = {{"x", Access::read}, {"x", Access::write}};
  expect_throw_with<InvalidArgument>([&] { Kernel k(def); }, {"'x'", "used twice"});

  def = valid_def();
  def.scalars = {{"out"}};
  expect_throw_with<InvalidArgument>([&] { Kernel k(def); }, {"'out'", "used twice"});

  def = valid_def();
  def.scalars = {{"alpha"}, {"alpha", ScalarKind::integer}};
  expect_throw_with<InvalidArgument>([&] { Kernel k(def); }, {"'alpha'", "used twice"});

  def = valid_def();
  def.infer = nullptr;
  expect_throw_with<InvalidArgument>([&] { Kernel k(def); }, {"Kernel 'k'", "infer"});

  def = valid_def();
  def.select = nullptr;
  expect_throw_with<InvalidArgument>([&] { Kernel k(def); }, {"Kernel 'k'", "select"});
}

// What a user's shape rule returns is checked before anything uses it.
TEST(KernelDefTest, InferResultIsChecked) {
  KernelDef def = valid_def();
  def.infer = [](const std::vector<ArrayMeta>&, const std::vector<ScalarArg>&) {
    return std::vector<ArrayMeta>{};  // too few outputs: used to be read out of bounds
  };
  const Kernel few(def);
  const Array x = Array::empty({4}, DType::f32, Device::cpu());
  const Stream stream(Device::cpu());
  const ThreadTeam team(1);
  expect_throw_with<InvalidArgument>([&] { launch(few, {x}, {1.0}, stream, team); },
                                     {"kernel k", "infer", "returned 0 outputs", "1 write-only"});
  expect_throw_with<InvalidArgument>(
      [&] {
        few.infer({{{4}, DType::f32}}, {{.f = 1.0}});
      },
      {"returned 0 outputs"});

  def.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>&) {
    return std::vector<ArrayMeta>{in[0], in[0]};
  };
  expect_throw_with<InvalidArgument>([&] { launch(Kernel(def), {x}, {1.0}, stream, team); },
                                     {"returned 2 outputs"});

  def.infer = [](const std::vector<ArrayMeta>&, const std::vector<ScalarArg>&) {
    return std::vector<ArrayMeta>{{{4, -2}, DType::f32}};
  };
  expect_throw_with<InvalidArgument>([&] { launch(Kernel(def), {x}, {1.0}, stream, team); },
                                     {"output 'out'", "negative size"});

  def.infer = [](const std::vector<ArrayMeta>&, const std::vector<ScalarArg>&) {
    return std::vector<ArrayMeta>{{{int64_t{1} << 40, int64_t{1} << 40}, DType::f32}};
  };
  expect_throw_with<InvalidArgument>([&] { launch(Kernel(def), {x}, {1.0}, stream, team); },
                                     {"output 'out'", "fit"});
}

TEST(KernelDefTest, StandardKernels) {
  struct Expect {
    const Kernel& k;
    const char* name;
    int inputs, outputs;
    std::size_t scalars;
    bool per_sample, reduces;
  };
  const Expect all[] = {
      {kernels::fill(), "fill", 0, 1, 1, true, false},
      {kernels::copy(), "copy", 1, 1, 0, true, false},
      {kernels::scale(), "scale", 1, 1, 1, true, false},
      {kernels::axpy(), "axpy", 2, 1, 1, true, false},
      {kernels::add(), "add", 2, 1, 0, true, false},
      {kernels::mul(), "mul", 2, 1, 0, true, false},
      {kernels::where(), "where", 3, 1, 0, true, false},
      {kernels::sum(), "sum", 1, 1, 0, false, true},
      {kernels::max(), "max", 1, 1, 0, false, true},
  };
  std::set<std::string> names;
  for (const Expect& e : all) {
    SCOPED_TRACE(e.name);
    EXPECT_EQ(e.k.name(), e.name);
    EXPECT_EQ(e.k.num_inputs(), e.inputs);
    EXPECT_EQ(e.k.num_outputs(), e.outputs);
    EXPECT_EQ(e.k.def().scalars.size(), e.scalars);
    EXPECT_EQ(e.k.def().per_sample, e.per_sample);
    EXPECT_EQ(e.k.def().reduces, e.reduces);
    EXPECT_TRUE(e.k == e.k);
    names.insert(e.k.name());
  }
  EXPECT_EQ(names.size(), 9u);
  EXPECT_TRUE(kernels::add() == kernels::add());  // one definition per kernel
  EXPECT_FALSE(kernels::add() == kernels::mul());
  EXPECT_EQ(kernels::where().def().arrays[0].name, "cond");
  EXPECT_EQ(kernels::axpy().def().scalars[0].name, "alpha");
}

TEST(KernelDefTest, StandardKernelsHaveACudaImplementationInCudaBuilds) {
  for (DType d : kElementwiseDTypes) {
    const KernelImpl impl = kernels::add().def().select({d, d, d});
    EXPECT_NE(impl.cpu, nullptr);
#ifdef EAGLE_HAVE_CUDA
    EXPECT_TRUE(impl.has_cuda()) << dtype_name(d);
    EXPECT_NE(impl.cuda_shape, nullptr);
    // The CUDA function takes the kernel's own argument block.
    EXPECT_EQ(impl.cuda_function.arrays, 3);
    EXPECT_EQ(impl.cuda_function.scalars, 0);
#else
    EXPECT_FALSE(impl.has_cuda());
#endif
  }
  for (DType d : kReduceDTypes) {
    const KernelImpl impl = kernels::sum().def().select({d, d});
    EXPECT_NE(impl.cpu, nullptr);
#ifdef EAGLE_HAVE_CUDA
    EXPECT_NE(impl.cuda_capture, nullptr) << dtype_name(d);
    EXPECT_NE(impl.cuda_workspace, nullptr);
#else
    EXPECT_FALSE(impl.has_cuda());
#endif
  }
}

TEST(KernelDefTest, AccessNames) {
  EXPECT_EQ(access_name(Access::read), "read");
  EXPECT_EQ(access_name(Access::write), "write");
  EXPECT_EQ(access_name(Access::read_write), "read-write");
  EXPECT_TRUE(reads(Access::read));
  EXPECT_FALSE(writes(Access::read));
  EXPECT_FALSE(reads(Access::write));
  EXPECT_TRUE(writes(Access::write));
  EXPECT_TRUE(reads(Access::read_write));
  EXPECT_TRUE(writes(Access::read_write));
}

// ---------------------------------------------------------------------------------------------
// Scalars and the argument block

TEST(ScalarTest, Conversions) {
  EXPECT_FALSE(Scalar(2.5).is_integer());
  EXPECT_FALSE(Scalar(2.5f).is_integer());
  EXPECT_TRUE(Scalar(3).is_integer());
  EXPECT_TRUE(Scalar(int64_t{1} << 40).is_integer());
  EXPECT_EQ(Scalar(2.5).as(ScalarKind::real).f, 2.5);
  EXPECT_EQ(Scalar(2.75).as(ScalarKind::integer).i, 2);
  EXPECT_EQ(Scalar(-2.75).as(ScalarKind::integer).i, -2);
  EXPECT_EQ(Scalar(3).as(ScalarKind::real).f, 3.0);
  EXPECT_EQ(Scalar(3).as(ScalarKind::integer).i, 3);
  EXPECT_EQ(Scalar(int64_t{1} << 40).as(ScalarKind::integer).i, int64_t{1} << 40);
  // 2^53 + 1 is exact as an integer scalar, which a double could not hold.
  EXPECT_EQ(Scalar((int64_t{1} << 53) + 1).as(ScalarKind::integer).i, (int64_t{1} << 53) + 1);
}

}  // namespace
}  // namespace eagle
