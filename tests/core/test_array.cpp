// Tests of arrays: allocation, views, copies and accounting, on every device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "eagle/eagle.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using test::expect_throw_with;

using test::OnDevice;

constexpr DType kAllDTypes[] = {DType::f64, DType::f32, DType::f16, DType::bf16,   DType::i64,
                                DType::i32, DType::u32, DType::u8,  DType::boolean};

// ---------------------------------------------------------------------------------------------
// Array: creation and copies for every dtype

template <class T>
std::vector<T> sample_values(std::size_t n) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(i);
    if constexpr (std::is_same_v<T, bool>) {
      v[i] = (i % 3) == 1;
    } else if constexpr (std::is_same_v<T, uint8_t>) {
      v[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
    } else if constexpr (std::is_same_v<T, uint32_t>) {
      v[i] = static_cast<uint32_t>(4000000000u - i * 7919u);  // above INT32_MAX
    } else if constexpr (std::is_same_v<T, int64_t>) {
      v[i] = (i % 2 ? -1 : 1) * (int64_t{1} << 40) + static_cast<int64_t>(i);
    } else if constexpr (std::is_same_v<T, int32_t>) {
      v[i] = static_cast<int32_t>(i * 1000) - 5000;
    } else {
      v[i] = T(static_cast<float>((x - 6.0) * 0.25));  // exact in every float format
    }
  }
  return v;
}

template <class T>
double as_double(T v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

template <class T>
bool same_value(T a, T b) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return a.bits == b.bits;
  } else {
    return a == b;
  }
}

template <class T>
void check_from_and_back(Device device) {
  SCOPED_TRACE(std::string(dtype_name(dtype_of<T>)) + " on " + device.str());
  const std::vector<T> values = sample_values<T>(15);
  const Array a = Array::from(values, {3, 5}, device);
  EXPECT_TRUE(a.defined());
  EXPECT_EQ(a.dtype(), dtype_of<T>);
  EXPECT_EQ(a.device(), device);
  EXPECT_EQ(a.shape(), (Shape{3, 5}));
  EXPECT_EQ(a.strides(), (Shape{5, 1}));
  EXPECT_EQ(a.ndim(), 2);
  EXPECT_EQ(a.numel(), 15);
  EXPECT_EQ(a.nbytes(), 15 * sizeof(T));
  EXPECT_EQ(a.byte_offset(), 0);
  EXPECT_TRUE(a.is_contiguous());
  EXPECT_TRUE(a.owning());
  EXPECT_EQ(a.storage()->device(), device);
  EXPECT_EQ(a.storage()->bytes(), a.nbytes());

  const std::vector<T> back = a.template to_vector<T>();
  ASSERT_EQ(back.size(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    EXPECT_TRUE(same_value<T>(back[i], values[i])) << "element " << i;

  const std::vector<double> as_f64 = a.template to_vector<double>();
  for (std::size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(as_f64[i], as_double<T>(values[i])) << i;

  // A copy to the CPU and back to the device keeps the values.
  const Array host = a.to(Device::cpu());
  EXPECT_EQ(host.device(), Device::cpu());
  EXPECT_NE(host.data(), a.data());
  const Array again = host.to(device);
  EXPECT_EQ(again.device(), device);
  const std::vector<T> round = again.template to_vector<T>();
  for (std::size_t i = 0; i < values.size(); ++i)
    EXPECT_TRUE(same_value<T>(round[i], values[i])) << i;
}

class ArrayOnDevice : public OnDevice {};
EAGLE_ON_EVERY_DEVICE(ArrayOnDevice);

TEST_P(ArrayOnDevice, FromAndToVectorForEveryDType) {
  check_from_and_back<double>(device());
  check_from_and_back<float>(device());
  check_from_and_back<half>(device());
  check_from_and_back<bfloat16>(device());
  check_from_and_back<int64_t>(device());
  check_from_and_back<int32_t>(device());
  check_from_and_back<uint32_t>(device());
  check_from_and_back<uint8_t>(device());
  check_from_and_back<bool>(device());
}

TEST_P(ArrayOnDevice, ToVectorConvertsBetweenTypes) {
  const Array a = Array::from(std::vector<float>{1.5f, -2.0f, 3.0f, 0.0f}, {4}, device());
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3, 0}));
  EXPECT_EQ(a.to_vector<bool>(), (std::vector<bool>{true, true, true, false}));
  const auto h = a.to_vector<half>();
  EXPECT_EQ(h[0].bits, 0x3e00);
  EXPECT_EQ(h[1].bits, 0xc000);
  const Array b = Array::from(std::vector<bool>{true, false, true}, {3}, device());
  EXPECT_EQ(b.dtype(), DType::boolean);
  EXPECT_EQ(b.to_vector<double>(), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(b.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));
}

TEST_P(ArrayOnDevice, EmptyForEveryDType) {
  for (DType d : kAllDTypes) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    const std::size_t before = bytes_in_use(device());
    {
      const Array a = Array::empty({7, 3, 2}, d, device());
      EXPECT_EQ(a.dtype(), d);
      EXPECT_EQ(a.device(), device());
      EXPECT_EQ(a.shape(), (Shape{7, 3, 2}));
      EXPECT_EQ(a.strides(), (Shape{6, 2, 1}));
      EXPECT_EQ(a.numel(), 42);
      EXPECT_EQ(a.nbytes(), 42 * itemsize(d));
      EXPECT_TRUE(a.is_contiguous());
      EXPECT_TRUE(a.owning());
      EXPECT_NE(a.data(), nullptr);
      EXPECT_EQ(bytes_in_use(device()), before + a.nbytes());
    }
    EXPECT_EQ(bytes_in_use(device()), before);
  }
}

TEST_P(ArrayOnDevice, ZeroSizedAndScalarArrays) {
  const Array z = Array::empty({4, 0, 3}, DType::f32, device());
  EXPECT_EQ(z.numel(), 0);
  EXPECT_EQ(z.nbytes(), 0u);
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_TRUE(z.to_vector<float>().empty());
  EXPECT_EQ(z.to(Device::cpu()).shape(), (Shape{4, 0, 3}));
  const auto [lo, hi] = z.byte_span();
  EXPECT_EQ(lo, hi);

  const Array s = Array::from(std::vector<double>{2.5}, {}, device());
  EXPECT_EQ(s.ndim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.nbytes(), 8u);
  EXPECT_TRUE(s.strides().empty());
  EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{2.5}));
}

TEST_P(ArrayOnDevice, BytesInUseTracksOwningStorage) {
  const std::size_t before = bytes_in_use(device());
  {
    const Array a = Array::empty({1000, 3}, DType::f64, device());
    EXPECT_EQ(bytes_in_use(device()), before + 24000);
    {
      // Views share the storage: no new bytes.
      const Array s = a.slice(0, 10, 20);
      const Array r = a.reshape({3000});
      const Array w = Array::wrap(a.data(), {3000}, DType::f64, device());
      EXPECT_FALSE(w.owning());
      EXPECT_EQ(bytes_in_use(device()), before + 24000);
      const Array b = Array::empty({5}, DType::u8, device());
      EXPECT_EQ(bytes_in_use(device()), before + 24005);
    }
    EXPECT_EQ(bytes_in_use(device()), before + 24000);
  }
  EXPECT_EQ(bytes_in_use(device()), before);

  // A view keeps the storage (and its accounting) alive after the original is gone.
  Array view;
  {
    const Array a = Array::empty({64}, DType::i32, device());
    view = a.slice(0, 8, 16);
  }
  EXPECT_EQ(bytes_in_use(device()), before + 256);
  view = Array();
  EXPECT_EQ(bytes_in_use(device()), before);
}

TEST_P(ArrayOnDevice, BytesInUseIsPerDevice) {
  const Device other = device().is_cpu() ? Device::cuda(0) : Device::cpu();
  const std::size_t other_before = bytes_in_use(other);
  const std::size_t before = bytes_in_use(device());
  const Array a = Array::empty({4096}, DType::f32, device());
  EXPECT_EQ(bytes_in_use(device()), before + 16384);
  EXPECT_EQ(bytes_in_use(other), other_before);
}

TEST_P(ArrayOnDevice, StorageAllocateAccounting) {
  const std::size_t before = bytes_in_use(device());
  {
    auto s = Storage::allocate(device(), 1000);
    EXPECT_TRUE(s->owning());
    EXPECT_EQ(s->bytes(), 1000u);
    EXPECT_EQ(s->device(), device());
    EXPECT_NE(s->data(), nullptr);
    EXPECT_EQ(bytes_in_use(device()), before + 1000);
  }
  EXPECT_EQ(bytes_in_use(device()), before);
}

TEST_P(ArrayOnDevice, NonContiguousViewCopiedWithToGathers) {
  // A 3x4 row-major matrix and its transpose as a strided view of the same memory.
  std::vector<float> v(12);
  std::iota(v.begin(), v.end(), 0.0f);
  const Array m = Array::from(v, {3, 4}, device());
  const Array t = Array::wrap(m.data(), {4, 3}, DType::f32, device(), {1, 4});
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.strides(), (Shape{1, 4}));
  const std::vector<float> want = {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11};
  for (Device dst : {Device::cpu(), device()}) {
    const Array c = t.to(dst);
    EXPECT_TRUE(c.is_contiguous());
    EXPECT_EQ(c.shape(), (Shape{4, 3}));
    EXPECT_EQ(c.device(), dst);
    EXPECT_EQ(c.to_vector<float>(), want);
  }
  EXPECT_EQ(t.to_vector<float>(), want);

  // Negative strides: the same matrix read backwards in both dimensions.
  const Array r =
      Array::wrap(static_cast<float*>(m.data()) + 11, {3, 4}, DType::f32, device(), {-4, -1});
  EXPECT_FALSE(r.is_contiguous());
  std::vector<float> reversed(v.rbegin(), v.rend());
  EXPECT_EQ(r.to_vector<float>(), reversed);
  EXPECT_EQ(r.to(device()).to_vector<float>(), reversed);
  const auto [lo, hi] = r.byte_span();
  EXPECT_EQ(lo, reinterpret_cast<uintptr_t>(m.data()));
  EXPECT_EQ(hi, reinterpret_cast<uintptr_t>(m.data()) + 48);

  // A column slice (a strided view with an offset), then gathered.
  std::vector<int64_t> w(24);
  std::iota(w.begin(), w.end(), int64_t{100});
  const Array big = Array::from(w, {4, 6}, device());
  const Array cols = big.slice(1, 2, 5);
  EXPECT_FALSE(cols.is_contiguous());
  EXPECT_EQ(cols.to(device()).to_vector<int64_t>(),
            (std::vector<int64_t>{102, 103, 104, 108, 109, 110, 114, 115, 116, 120, 121, 122}));
  // A broadcast-like view (stride 0) repeats one row.
  const Array rep = Array::wrap(big.data(), {3, 6}, DType::i64, device(), {0, 1});
  EXPECT_EQ(rep.to_vector<int64_t>(),
            (std::vector<int64_t>{100, 101, 102, 103, 104, 105, 100, 101, 102, 103, 104, 105, 100,
                                  101, 102, 103, 104, 105}));
}

TEST_P(ArrayOnDevice, CopyFromAcrossDevicesAndWithStream) {
  const Array dst = Array::empty({2, 3}, DType::f32, device());
  const Array src = Array::from(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, Device::cpu());
  dst.copy_from(src);
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  const Stream stream(device());
  const Array src2 = Array::from(std::vector<float>{6, 5, 4, 3, 2, 1}, {2, 3}, device());
  dst.copy_from(src2, &stream);
  stream.synchronize();
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{6, 5, 4, 3, 2, 1}));
  const Array back = Array::empty({2, 3}, DType::f32, Device::cpu());
  back.copy_from(dst, &stream);
  stream.synchronize();
  EXPECT_EQ(back.to_vector<float>(), (std::vector<float>{6, 5, 4, 3, 2, 1}));
  // Copying an empty array is a no-op, not an error.
  Array::empty({0}, DType::f32, device()).copy_from(Array::empty({0}, DType::f32, Device::cpu()));
}

TEST_P(ArrayOnDevice, CopyFromIntoASliceWritesTheParent) {
  const Array a = Array::from(std::vector<int32_t>(12, 0), {4, 3}, device());
  a.slice(0, 1, 3).copy_from(
      Array::from(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3}, Device::cpu()));
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0, 1, 2, 3, 4, 5, 6, 0, 0, 0}));
}

TEST_P(ArrayOnDevice, CopyFromErrors) {
  const Array a = Array::empty({2, 3}, DType::f32, device());
  expect_throw_with<InvalidArgument>(
      [&] {
        a.copy_from(Array::empty({3, 2}, DType::f32, device()));
      },
      {"f32[3,2]", "f32[2,3]"});
  expect_throw_with<InvalidArgument>(
      [&] {
        a.copy_from(Array::empty({2, 3}, DType::f64, device()));
      },
      {"f64[2,3]", "f32[2,3]"});
  expect_throw_with<InvalidArgument>(
      [&] { a.copy_from(Array::empty({6}, DType::f32, Device::cpu())); }, {"f32[6]"});
  // Shape and dtype agree, but one side is a strided view.
  const Array big = Array::empty({3, 4}, DType::f32, device());
  const Array t = Array::wrap(big.data(), {2, 2}, DType::f32, device(), {4, 1});
  ASSERT_FALSE(t.is_contiguous());
  const Array dense = Array::empty({2, 2}, DType::f32, device());
  expect_throw_with<InvalidArgument>([&] { dense.copy_from(t); }, {"contiguous"});
  expect_throw_with<InvalidArgument>([&] { t.copy_from(dense); }, {"contiguous"});
  expect_throw_with<InvalidArgument>([&] { a.slice(1, 0, 2).copy_from(dense); }, {"contiguous"});
}

TEST(ArrayTest, DefaultIsUndefined) {
  const Array a;
  EXPECT_FALSE(a.defined());
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_FALSE(a.owning());
  EXPECT_EQ(a.device(), Device::cpu());
  EXPECT_EQ(a.storage(), nullptr);
}

TEST(ArrayTest, BoolBytesOtherThanZeroOrOneReadAsTrue) {
  std::vector<uint8_t> bytes{0, 1, 2, 255};
  Array a = Array::wrap(bytes.data(), {4}, DType::boolean, Device::cpu());
  EXPECT_EQ(a.to_vector<bool>(), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 1, 1}));
}

TEST(ArrayTest, Describe) {
  EXPECT_EQ(Array::empty({4, 8}, DType::f32, Device::cpu()).describe(), "f32[4,8] on cpu");
  EXPECT_EQ(Array::empty({}, DType::boolean, Device::cpu()).describe(), "bool[] on cpu");
  EXPECT_EQ(shape_str({}), "[]");
  EXPECT_EQ(shape_str({2, 0, 7}), "[2,0,7]");
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (Shape{12, 4, 1}));
  EXPECT_EQ(contiguous_strides({}), Shape{});
  EXPECT_EQ(contiguous_strides({5, 0, 2}), (Shape{0, 2, 1}));
}

TEST(ArrayTest, FromErrors) {
  expect_throw_with<InvalidArgument>(
      [] {
        Array::from(std::vector<float>{1, 2, 3}, {2, 2}, Device::cpu());
      },
      {"[2,2]", "3"});
  expect_throw_with<InvalidArgument>([] { Array::from(std::vector<float>{}, {-1}, Device::cpu()); },
                                     {"negative"});
  expect_throw_with<InvalidArgument>(
      [] {
        Array::empty({2, -3}, DType::f32, Device::cpu());
      },
      {"negative", "dim 1"});
}

TEST(ArrayTest, CudaArrayOnAbsentDeviceThrows) {
  const Device absent = Device::cuda(cuda_device_count());
  const std::size_t before = bytes_in_use(absent);
  expect_throw_with<InvalidArgument>([&] { Array::empty({4}, DType::f32, absent); },
                                     {absent.str(), "not attached"});
  EXPECT_THROW(Array::from(std::vector<float>{1, 2}, {2}, absent), InvalidArgument);
  EXPECT_THROW(Storage::allocate(absent, 16), InvalidArgument);
  EXPECT_THROW(Array::empty({2}, DType::f32, Device::cpu()).to(absent), InvalidArgument);
  EXPECT_EQ(bytes_in_use(absent), before);
}

TEST(ArrayTest, WrapBorrowsCallerMemory) {
  std::vector<float> buf = {1, 2, 3, 4, 5, 6};
  const std::size_t before = bytes_in_use(Device::cpu());
  const Array a = Array::wrap(buf.data(), {2, 3}, DType::f32, Device::cpu());
  EXPECT_EQ(bytes_in_use(Device::cpu()), before);
  EXPECT_FALSE(a.owning());
  EXPECT_FALSE(a.storage()->owning());
  EXPECT_EQ(a.data(), buf.data());
  EXPECT_EQ(a.strides(), (Shape{3, 1}));
  EXPECT_EQ(a.storage()->bytes(), 24u);
  buf[4] = 50;  // writes to the caller's memory are seen through the array
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 50, 6}));
  a.copy_from(Array::from(std::vector<float>{9, 8, 7, 6, 5, 4}, {2, 3}, Device::cpu()));
  EXPECT_EQ(buf, (std::vector<float>{9, 8, 7, 6, 5, 4}));
}

TEST(ArrayTest, WrapKeepAliveLivesUntilTheLastView) {
  auto released = std::make_shared<int>(0);
  std::vector<double> buf(8, 1.0);
  Array slice;
  {
    std::shared_ptr<void> keep(new int(0), [released](void* p) {
      ++*released;
      delete static_cast<int*>(p);
    });
    Array a = Array::wrap(buf.data(), {8}, DType::f64, Device::cpu(), {}, std::move(keep));
    slice = a.slice(0, 2, 4);
    EXPECT_EQ(*released, 0);
  }
  EXPECT_EQ(*released, 0);  // the slice still holds it
  slice = Array();
  EXPECT_EQ(*released, 1);
}

TEST(ArrayTest, WrapErrors) {
  std::vector<float> buf(8);
  expect_throw_with<InvalidArgument>(
      [&] {
        Array::wrap(buf.data(), {2, 4}, DType::f32, Device::cpu(), {4});
      },
      {"strides has 1", "shape has 2"});
  expect_throw_with<InvalidArgument>(
      [&] {
        Array::wrap(buf.data(), {2, -4}, DType::f32, Device::cpu());
      },
      {"negative"});
  expect_throw_with<InvalidArgument>([&] { Array::wrap(nullptr, {2}, DType::f32, Device::cpu()); },
                                     {"null"});
  // Null is fine for an array of no elements.
  const Array z = Array::wrap(nullptr, {0}, DType::f32, Device::cpu());
  EXPECT_EQ(z.numel(), 0);
}

TEST(ArrayTest, SliceOffsetsAndViews) {
  std::vector<int32_t> v(24);
  std::iota(v.begin(), v.end(), 0);
  const Array a = Array::from(v, {4, 6}, Device::cpu());
  const char* base = static_cast<const char*>(a.data());

  const Array rows = a.slice(0, 1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 6}));
  EXPECT_EQ(rows.strides(), (Shape{6, 1}));
  EXPECT_EQ(rows.byte_offset(), 24);
  EXPECT_EQ(rows.data(), base + 24);
  EXPECT_TRUE(rows.is_contiguous());
  EXPECT_EQ(rows.storage(), a.storage());
  EXPECT_EQ(rows.to_vector<int32_t>(), std::vector<int32_t>(v.begin() + 6, v.begin() + 18));

  const Array cols = a.slice(1, 2, 5);
  EXPECT_EQ(cols.shape(), (Shape{4, 3}));
  EXPECT_EQ(cols.strides(), (Shape{6, 1}));
  EXPECT_EQ(cols.byte_offset(), 8);
  EXPECT_FALSE(cols.is_contiguous());
  EXPECT_EQ(cols.to_vector<int32_t>(),
            (std::vector<int32_t>{2, 3, 4, 8, 9, 10, 14, 15, 16, 20, 21, 22}));

  // Slices of slices accumulate offsets.
  const Array inner = rows.slice(1, 1, 4);
  EXPECT_EQ(inner.byte_offset(), 24 + 4);
  EXPECT_EQ(inner.to_vector<int32_t>(), (std::vector<int32_t>{7, 8, 9, 13, 14, 15}));
  const Array one = a.slice(0, 3, 4).slice(1, 5, 6);
  EXPECT_EQ(one.byte_offset(), (3 * 6 + 5) * 4);
  EXPECT_EQ(one.to_vector<int32_t>(), (std::vector<int32_t>{23}));

  // Whole and empty ranges.
  EXPECT_EQ(a.slice(0, 0, 4).to_vector<int32_t>(), v);
  const Array empty = a.slice(0, 2, 2);
  EXPECT_EQ(empty.shape(), (Shape{0, 6}));
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(a.slice(1, 6, 6).numel(), 0);
}

TEST(ArrayTest, SliceErrors) {
  const Array a = Array::empty({4, 6}, DType::f32, Device::cpu());
  expect_throw_with<InvalidArgument>([&] { a.slice(-1, 0, 1); }, {"dim -1", "f32[4,6]"});
  expect_throw_with<InvalidArgument>([&] { a.slice(2, 0, 1); }, {"dim 2"});
  expect_throw_with<InvalidArgument>([&] { a.slice(0, -1, 2); }, {"[-1, 2)", "dim 0"});
  expect_throw_with<InvalidArgument>([&] { a.slice(0, 3, 2); }, {"[3, 2)"});
  expect_throw_with<InvalidArgument>([&] { a.slice(0, 0, 5); }, {"[0, 5)", "[0, 4]"});
  expect_throw_with<InvalidArgument>([&] { a.slice(1, 5, 7); }, {"dim 1"});
  const Array s = Array::from(std::vector<float>{1}, {}, Device::cpu());
  EXPECT_THROW(s.slice(0, 0, 1), InvalidArgument);
}

TEST(ArrayTest, Reshape) {
  std::vector<double> v(24);
  std::iota(v.begin(), v.end(), 0.0);
  const Array a = Array::from(v, {4, 6}, Device::cpu());
  for (const Shape& s : {Shape{24}, Shape{2, 12}, Shape{2, 3, 4}, Shape{1, 24, 1}}) {
    const Array r = a.reshape(s);
    EXPECT_EQ(r.shape(), s);
    EXPECT_EQ(r.strides(), contiguous_strides(s));
    EXPECT_EQ(r.data(), a.data());
    EXPECT_EQ(r.storage(), a.storage());
    EXPECT_EQ(r.to_vector<double>(), v);
  }
  // A contiguous slice reshapes and keeps its offset.
  const Array rows = a.slice(0, 2, 4).reshape({3, 4});
  EXPECT_EQ(rows.byte_offset(), 2 * 6 * 8);
  EXPECT_EQ(rows.to_vector<double>(), std::vector<double>(v.begin() + 12, v.end()));
  // Scalars and empty arrays.
  EXPECT_EQ(Array::from(std::vector<float>{3}, {1}, Device::cpu()).reshape({}).ndim(), 0);
  EXPECT_EQ(Array::empty({0, 5}, DType::f32, Device::cpu()).reshape({5, 0}).numel(), 0);
}

TEST(ArrayTest, ReshapeErrors) {
  const Array a = Array::empty({4, 6}, DType::f32, Device::cpu());
  expect_throw_with<InvalidArgument>([&] { a.reshape({5, 5}); }, {"[5,5]", "25", "24"});
  expect_throw_with<InvalidArgument>([&] { a.reshape({25}); }, {"25"});
  expect_throw_with<InvalidArgument>([&] { a.reshape({-4, -6}); }, {"negative"});
  const Array cols = a.slice(1, 0, 3);
  expect_throw_with<InvalidArgument>([&] { cols.reshape({12}); }, {"contiguous"});
  const Array t = Array::wrap(a.data(), {6, 4}, DType::f32, Device::cpu(), {1, 6});
  expect_throw_with<InvalidArgument>([&] { t.reshape({24}); }, {"contiguous"});
}

TEST(ArrayTest, OnStorage) {
  auto storage = Storage::allocate(Device::cpu(), 64);
  const char* base = static_cast<const char*>(storage->data());
  const Array a = Array::on_storage(storage, {4}, DType::f32, 16);
  EXPECT_EQ(a.data(), base + 16);
  EXPECT_EQ(a.byte_offset(), 16);
  EXPECT_EQ(a.storage(), storage);
  EXPECT_TRUE(a.owning());
  EXPECT_TRUE(a.is_contiguous());
  const Array exact = Array::on_storage(storage, {2, 2}, DType::f64, 32);  // ends at 64
  EXPECT_EQ(exact.data(), base + 32);
  const Array whole = Array::on_storage(storage, {64}, DType::u8);
  EXPECT_EQ(whole.data(), base);
  // Views over the same storage alias.
  a.copy_from(Array::from(std::vector<float>{1, 2, 3, 4}, {4}, Device::cpu()));
  EXPECT_EQ(whole.slice(0, 16, 20).to_vector<uint8_t>(),
            (std::vector<uint8_t>{0x00, 0x00, 0x80, 0x3f}));  // 1.0f, little-endian
  // The view keeps the storage alive.
  std::weak_ptr<Storage> weak = storage;
  storage.reset();
  EXPECT_FALSE(weak.expired());
}

TEST(ArrayTest, OnStorageBoundsErrors) {
  auto storage = Storage::allocate(Device::cpu(), 64);
  expect_throw_with<InvalidArgument>([&] { Array::on_storage(storage, {4}, DType::f32, 52); },
                                     {"16 bytes", "offset 52", "64 bytes"});
  expect_throw_with<InvalidArgument>([&] { Array::on_storage(storage, {17}, DType::f32); },
                                     {"68 bytes"});
  expect_throw_with<InvalidArgument>([&] { Array::on_storage(storage, {1}, DType::u8, -1); },
                                     {"offset -1"});
  expect_throw_with<InvalidArgument>([&] { Array::on_storage(storage, {1}, DType::u8, 64); },
                                     {"offset 64"});
  expect_throw_with<InvalidArgument>([&] { Array::on_storage(nullptr, {1}, DType::u8); }, {"null"});
  expect_throw_with<InvalidArgument>([&] { Array::on_storage(storage, {-2}, DType::u8); },
                                     {"negative"});
  // A zero-byte view at the very end fits.
  EXPECT_EQ(Array::on_storage(storage, {0}, DType::f32, 64).numel(), 0);
}

TEST(ArrayTest, ByteSpan) {
  const Array a = Array::empty({3, 4}, DType::f32, Device::cpu());
  const uintptr_t base = reinterpret_cast<uintptr_t>(a.data());
  EXPECT_EQ(a.byte_span(), std::make_pair(base, base + 48));
  EXPECT_EQ(a.slice(0, 1, 2).byte_span(), std::make_pair(base + 16, base + 32));
  // A column: from its first element to one past its last.
  EXPECT_EQ(a.slice(1, 2, 3).byte_span(), std::make_pair(base + 8, base + 8 + 2 * 16 + 4));
  const Array t = Array::wrap(a.data(), {4, 3}, DType::f32, Device::cpu(), {1, 4});
  EXPECT_EQ(t.byte_span(), std::make_pair(base, base + 48));
  EXPECT_EQ(a.slice(0, 1, 1).byte_span(), std::make_pair(base + 16, base + 16));
  const Array bytes = Array::empty({5}, DType::u8, Device::cpu());
  const uintptr_t b = reinterpret_cast<uintptr_t>(bytes.data());
  EXPECT_EQ(bytes.byte_span(), std::make_pair(b, b + 5));
  EXPECT_EQ(bytes.slice(0, 4, 5).byte_span(), std::make_pair(b + 4, b + 5));
}

TEST(ArrayTest, CpuStorageIsAligned) {
  for (std::size_t n : {1, 3, 17, 1000}) {
    auto s = Storage::allocate(Device::cpu(), n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s->data()) % 64, 0u) << n;
  }
}

TEST(ArrayTest, BorrowErrors) {
  EXPECT_THROW(Storage::borrow(Device::cpu(), nullptr, 8), InvalidArgument);
  auto s = Storage::borrow(Device::cpu(), nullptr, 0);
  EXPECT_FALSE(s->owning());
  EXPECT_EQ(s->bytes(), 0u);
}

// ---------------------------------------------------------------------------------------------
// Hostile shapes: element counts, byte sizes and byte offsets that do not fit in int64 are
// refused before anything is allocated or viewed.

constexpr int64_t kHuge = int64_t{1} << 62;  // countable, but 2^62 f32 take 2^64 bytes

TEST(ArrayTest, EmptyRefusesAByteSizeThatWraps) {
  // 2^62 * 4 bytes wrapped to 0: the array was allocated empty and the next fill overflowed.
  const std::size_t before = bytes_in_use(Device::cpu());
  expect_throw_with<InvalidArgument>(
      [] { Array::empty({kHuge}, DType::f32, Device::cpu()); },
      {"Array::empty", "[4611686018427387904]", "f32", "more than fit in int64"});
  expect_throw_with<InvalidArgument>(
      [] {
        Array::empty({int64_t{1} << 32, int64_t{1} << 32}, DType::u8, Device::cpu());
      },
      {"Array::empty", "[4294967296,4294967296]", "more elements than fit in int64"});
  EXPECT_EQ(bytes_in_use(Device::cpu()), before);
  // A zero dim makes any shape empty: nothing to overflow.
  EXPECT_EQ(Array::empty({kHuge, 0, kHuge}, DType::f64, Device::cpu()).nbytes(), 0u);
}

TEST(ArrayTest, StorageAllocateRefusesMoreThanInt64Bytes) {
  const std::size_t before = bytes_in_use(Device::cpu());
  expect_throw_with<InvalidArgument>(
      [] { Storage::allocate(Device::cpu(), static_cast<std::size_t>(INT64_MAX) + 1); },
      {"Storage::allocate", "9223372036854775808 bytes", "int64"});
  EXPECT_EQ(bytes_in_use(Device::cpu()), before);
}

TEST(ArrayTest, WrapRefusesSpansThatOverflow) {
  std::vector<float> buf(8);
  expect_throw_with<InvalidArgument>(
      [&] { Array::wrap(buf.data(), {kHuge}, DType::f32, Device::cpu()); },
      {"Array::wrap", "[4611686018427387904]", "int64"});
  // Few elements, but strides x itemsize past int64.
  expect_throw_with<InvalidArgument>(
      [&] { Array::wrap(buf.data(), {2}, DType::f32, Device::cpu(), {kHuge}); },
      {"Array::wrap", "strides [4611686018427387904]", "do not fit in int64"});
  expect_throw_with<InvalidArgument>(
      [&] {
        Array::wrap(buf.data(), {2, 2}, DType::f64, Device::cpu(), {INT64_MAX / 8, 1});
      },
      {"Array::wrap", "do not fit in int64"});
  // In range for int64 but past the end of the address space from this pointer.
  expect_throw_with<InvalidArgument>(
      [&] {
        Array::wrap(reinterpret_cast<void*>(UINTPTR_MAX - 64), {4}, DType::f64, Device::cpu(),
                    {16});
      },
      {"Array::wrap", "address space"});
  expect_throw_with<InvalidArgument>(
      [&] { Array::wrap(buf.data(), {4}, DType::f32, Device::cpu(), {-(int64_t{1} << 56)}); },
      {"Array::wrap", "address space"});
  // The keep-alive of a refused wrap is released, not leaked.
  auto keep = std::make_shared<int>(1);
  EXPECT_THROW(Array::wrap(buf.data(), {kHuge}, DType::f32, Device::cpu(), {}, keep),
               InvalidArgument);
  EXPECT_EQ(keep.use_count(), 1);
}

TEST(ArrayTest, OnStorageRefusesSizesAndOffsetsThatWrap) {
  auto s = Storage::allocate(Device::cpu(), 64);
  expect_throw_with<InvalidArgument>([&] { Array::on_storage(s, {kHuge}, DType::f32); },
                                     {"Array::on_storage", "[4611686018427387904]", "int64"});
  // offset + bytes used to wrap around size_t and pass the bounds check.
  expect_throw_with<InvalidArgument>(
      [&] { Array::on_storage(s, {4}, DType::f32, INT64_MAX); },
      {"Array::on_storage", "offset 9223372036854775807", "does not fit in storage of 64 bytes"});
  expect_throw_with<InvalidArgument>(
      [&] { Array::on_storage(s, {INT64_MAX / 2}, DType::u8, INT64_MAX / 2 + 2); },
      {"Array::on_storage", "does not fit"});
  EXPECT_EQ(Array::on_storage(s, {16}, DType::f32, 0).nbytes(), 64u);
  EXPECT_EQ(Array::on_storage(s, {0}, DType::f32, 64).nbytes(), 0u);
}

TEST(ArrayTest, FromAndReshapeRefuseCountsThatOverflow) {
  // 2^64 wraps to 0 elements, which matched an empty vector.
  expect_throw_with<InvalidArgument>(
      [] {
        Array::from(std::vector<float>{}, {int64_t{1} << 32, int64_t{1} << 32}, Device::cpu());
      },
      {"Array::from", "more elements than fit in int64"});
  const Array empty = Array::empty({0}, DType::f32, Device::cpu());
  expect_throw_with<InvalidArgument>(
      [&] {
        empty.reshape({int64_t{1} << 32, int64_t{1} << 32});
      },
      {"Array::reshape", "more elements than fit in int64"});
  const Array a = Array::empty({4}, DType::f32, Device::cpu());
  expect_throw_with<InvalidArgument>(
      [&] {
        a.reshape({2, -2});
      },
      {"Array::reshape", "negative size in dim 1"});
  EXPECT_EQ(a.shape(), (Shape{4}));
}

// ---------------------------------------------------------------------------------------------
// Undefined arrays: every operation names the undefined argument instead of crashing.

TEST(ArrayTest, OperationsOnAnUndefinedArrayThrow) {
  const Array none;
  const Array a = Array::from(std::vector<float>{1, 2}, {2}, Device::cpu());
  const std::string rule = "is undefined (a default-constructed Array)";
  expect_throw_with<InvalidArgument>([&] { a.copy_from(none); },
                                     {"Array::copy_from", "the source", rule});
  expect_throw_with<InvalidArgument>([&] { none.copy_from(a); },
                                     {"Array::copy_from", "the destination", rule});
  expect_throw_with<InvalidArgument>([&] { none.to_vector<float>(); }, {"Array::to_vector", rule});
  expect_throw_with<InvalidArgument>([&] { none.to(Device::cpu()); }, {"Array::to", rule});
  expect_throw_with<InvalidArgument>([&] { none.slice(0, 0, 0); }, {"Array::slice", rule});
  expect_throw_with<InvalidArgument>([&] { none.reshape({}); }, {"Array::reshape", rule});
  expect_throw_with<InvalidArgument>([&] { none.as_read_only(); }, {"Array::as_read_only", rule});
  expect_throw_with<InvalidArgument>([&] { to_dlpack(none); }, {"to_dlpack", rule});
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2}));  // the source is untouched
}

// ---------------------------------------------------------------------------------------------
// Read-only arrays

TEST(ArrayTest, ReadOnlyViewsStayReadOnlyAndRefuseCopyFrom) {
  const Array a = Array::from(std::vector<float>{1, 2, 3, 4}, {2, 2}, Device::cpu());
  EXPECT_FALSE(a.read_only());
  const Array r = a.as_read_only();
  EXPECT_TRUE(r.read_only());
  EXPECT_FALSE(a.read_only());  // the original view is unchanged
  EXPECT_EQ(r.data(), a.data());
  EXPECT_TRUE(r.slice(0, 1, 2).read_only());
  EXPECT_TRUE(r.reshape({4}).read_only());
  EXPECT_TRUE(r.as_read_only().read_only());
  const Array src = Array::from(std::vector<float>{9, 9, 9, 9}, {2, 2}, Device::cpu());
  expect_throw_with<InvalidArgument>([&] { r.copy_from(src); },
                                     {"Array::copy_from", "f32[2,2]", "read-only"});
  expect_throw_with<InvalidArgument>([&] { r.slice(0, 0, 1).copy_from(src.slice(0, 0, 1)); },
                                     {"read-only"});
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));  // nothing was written
  // Reading from a read-only array is fine, and a copy of it is writable.
  const Array dst = Array::empty({2, 2}, DType::f32, Device::cpu());
  dst.copy_from(r);
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  const Array c = r.to(Device::cpu());
  EXPECT_FALSE(c.read_only());
  c.copy_from(src);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{9, 9, 9, 9}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

// ---------------------------------------------------------------------------------------------
// Floating to integer conversions are defined: saturate, NaN -> 0 (convert.hpp).

TEST(ArrayTest, ToVectorSaturatesFloatsIntoIntegers) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Array a = Array::from(std::vector<double>{1e30, -1e30, inf, -inf, nan, -2.7, 300.5}, {7},
                              Device::cpu());
  EXPECT_EQ(a.to_vector<int64_t>(),
            (std::vector<int64_t>{INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 0, -2, 300}));
  EXPECT_EQ(a.to_vector<int32_t>(),
            (std::vector<int32_t>{INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 0, -2, 300}));
  EXPECT_EQ(a.to_vector<uint32_t>(),
            (std::vector<uint32_t>{UINT32_MAX, 0, UINT32_MAX, 0, 0, 0, 300}));
  EXPECT_EQ(a.to_vector<uint8_t>(), (std::vector<uint8_t>{255, 0, 255, 0, 0, 0, 255}));
  // NaN is nonzero, so true; as before for bool.
  EXPECT_EQ(a.to_vector<bool>(), (std::vector<bool>{true, true, true, true, true, true, true}));
  const Array h =
      Array::from(std::vector<half>{half(inf), half(-70000.0f), half(nan)}, {3}, Device::cpu());
  EXPECT_EQ(h.to_vector<int64_t>(), (std::vector<int64_t>{INT64_MAX, INT64_MIN, 0}));
  EXPECT_EQ(h.to_vector<uint8_t>(), (std::vector<uint8_t>{255, 0, 0}));
  const Array b =
      Array::from(std::vector<bfloat16>{bfloat16(3e38f), bfloat16(-3.5f)}, {2}, Device::cpu());
  EXPECT_EQ(b.to_vector<int32_t>(), (std::vector<int32_t>{INT32_MAX, -3}));
  // Integer to integer conversions wrap (two's complement), as static_cast does.
  const Array i = Array::from(std::vector<int64_t>{int64_t{1} << 32, -1}, {2}, Device::cpu());
  EXPECT_EQ(i.to_vector<int32_t>(), (std::vector<int32_t>{0, -1}));
  EXPECT_EQ(i.to_vector<uint32_t>(), (std::vector<uint32_t>{0, UINT32_MAX}));
}

}  // namespace
}  // namespace eagle

namespace eagle {
namespace {

// Pinned staging: a host array, page-locked exactly when a GPU is usable; asynchronous copies on
// a stream to the GPU and back leave the values intact once the stream is synchronized.
TEST(PinnedArray, IsAHostArrayPageLockedWhereAGpuIsUsable) {
  Array a = Array::empty_pinned({5}, DType::f32);
  EXPECT_EQ(a.device(), Device::cpu());
  EXPECT_EQ(a.pinned(), cuda_available());
  EXPECT_TRUE(a.owning() && a.is_contiguous());
  const std::vector<float> values = {1.5f, -2, 3, 4.25f, 5};
  std::memcpy(a.data(), values.data(), a.nbytes());
  EXPECT_FALSE(Array::empty({5}, DType::f32, Device::cpu()).pinned());
  if (!cuda_available()) return;
  Stream stream(Device::cuda(0));
  Array gpu = Array::empty({5}, DType::f32, Device::cuda(0));
  Array back = Array::empty_pinned({5}, DType::f32);
  gpu.copy_from(a, &stream);
  back.copy_from(gpu, &stream);
  stream.synchronize();
  EXPECT_EQ(back.to_vector<float>(), values);
}

TEST(PinnedArray, RefusesWhatEmptyRefuses) {
  EXPECT_THROW(Array::empty_pinned({-1}, DType::f32), InvalidArgument);
  EXPECT_THROW(Array::empty_pinned({INT64_MAX, 4}, DType::f32), InvalidArgument);
}

}  // namespace
}  // namespace eagle
