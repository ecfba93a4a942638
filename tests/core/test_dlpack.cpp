// Tests of DLPack export and import: shared memory, lifetimes, the deleter contract, strides,
// offsets, dtype codes and the errors for tensors eagle cannot represent.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "eagle/eagle.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using test::expect_throw_with;

using test::OnDevice;

// The DLPack (code, bits) of each dtype, written from the DLPack specification.
struct Code {
  DType dtype;
  uint8_t code;
  uint8_t bits;
};
constexpr Code kSpecCodes[] = {
    {DType::f64, 2, 64},  {DType::f32, 2, 32}, {DType::f16, 2, 16},
    {DType::bf16, 4, 16}, {DType::i64, 0, 64}, {DType::i32, 0, 32},
    {DType::u32, 1, 32},  {DType::u8, 1, 8},   {DType::boolean, 6, 8},
};

// A producer written by hand, as another library would: it owns a float buffer of 64 elements
// (0, 1, 2, ...) and the shape and stride arrays, and counts its deleter's calls.
struct Producer {
  std::vector<float> buffer;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int* deletions = nullptr;
  DLManagedTensorVersioned tensor{};
};

void producer_deleter(DLManagedTensorVersioned* self) {
  auto* p = static_cast<Producer*>(self->manager_ctx);
  ++*p->deletions;
  delete p;
}

struct ProducerSpec {
  std::vector<int64_t> shape = {4, 5};
  std::vector<int64_t> strides;  // empty: a null strides pointer (row-major)
  uint64_t byte_offset = 0;
  DLDevice device = {kDLCPU, 0};
  DLDataType dtype = {kDLFloat, 32, 1};
  DLPackVersion version = {1, 0};
  int32_t ndim = -100;  // -100: shape.size()
  bool null_data = false;
  bool null_shape = false;
  uint64_t flags = 0;
};

DLManagedTensorVersioned* make_producer(const ProducerSpec& spec, int* deletions) {
  auto* p = new Producer;
  p->buffer.resize(64);
  std::iota(p->buffer.begin(), p->buffer.end(), 0.0f);
  p->shape = spec.shape;
  p->strides = spec.strides;
  p->deletions = deletions;
  DLManagedTensorVersioned& t = p->tensor;
  t.version = spec.version;
  t.manager_ctx = p;
  t.deleter = &producer_deleter;
  t.flags = spec.flags;
  t.dl_tensor.data = spec.null_data ? nullptr : p->buffer.data();
  t.dl_tensor.device = spec.device;
  t.dl_tensor.ndim = spec.ndim == -100 ? static_cast<int32_t>(spec.shape.size()) : spec.ndim;
  t.dl_tensor.dtype = spec.dtype;
  t.dl_tensor.shape = spec.null_shape ? nullptr : p->shape.data();
  t.dl_tensor.strides = p->strides.empty() ? nullptr : p->strides.data();
  t.dl_tensor.byte_offset = spec.byte_offset;
  return &t;
}

// ---------------------------------------------------------------------------------------------
// Export and import round trips

class DLPackOnDevice : public OnDevice {};
EAGLE_ON_EVERY_DEVICE(DLPackOnDevice);

TEST_P(DLPackOnDevice, ExportDescribesTheArray) {
  const Array a = Array::from(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, device());
  DLManagedTensorVersioned* t = to_dlpack(a);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->version.major, 1u);
  EXPECT_NE(t->deleter, nullptr);
  EXPECT_NE(t->manager_ctx, nullptr);
  EXPECT_EQ(t->flags, 0u);
  const DLTensor& d = t->dl_tensor;
  EXPECT_EQ(d.device.device_type, device().is_cpu() ? kDLCPU : kDLCUDA);
  EXPECT_EQ(d.device.device_id, device().ordinal());
  EXPECT_EQ(d.ndim, 2);
  EXPECT_EQ(d.shape[0], 2);
  EXPECT_EQ(d.shape[1], 3);
  ASSERT_NE(d.strides, nullptr);
  EXPECT_EQ(d.strides[0], 3);
  EXPECT_EQ(d.strides[1], 1);
  EXPECT_EQ(d.dtype.code, kDLFloat);
  EXPECT_EQ(d.dtype.bits, 32);
  EXPECT_EQ(d.dtype.lanes, 1);
  EXPECT_EQ(static_cast<char*>(d.data) + d.byte_offset, a.data());
  t->deleter(t);
}

TEST_P(DLPackOnDevice, RoundTripSharesMemory) {
  const Array a = Array::from(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, device());
  const Array b = from_dlpack(to_dlpack(a));
  EXPECT_EQ(b.data(), a.data());
  EXPECT_EQ(b.dtype(), DType::f32);
  EXPECT_EQ(b.shape(), a.shape());
  EXPECT_EQ(b.strides(), a.strides());
  EXPECT_EQ(b.device(), device());
  EXPECT_FALSE(b.owning());
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // Writing through one is seen by the other, both ways.
  b.copy_from(Array::from(std::vector<float>{10, 20, 30, 40, 50, 60}, {2, 3}, Device::cpu()));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{10, 20, 30, 40, 50, 60}));
  a.copy_from(Array::from(std::vector<float>{-1, -2, -3, -4, -5, -6}, {2, 3}, Device::cpu()));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{-1, -2, -3, -4, -5, -6}));
}

TEST_P(DLPackOnDevice, ImportKeepsTheMemoryAliveAfterTheOriginalIsGone) {
  const std::size_t before = bytes_in_use(device());
  std::weak_ptr<Storage> weak;
  Array imported;
  {
    const Array a = Array::from(std::vector<int32_t>{7, 8, 9}, {3}, device());
    weak = a.storage();
    DLManagedTensorVersioned* t = to_dlpack(a);
    imported = from_dlpack(t);
  }
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(bytes_in_use(device()), before + 12);
  EXPECT_EQ(imported.to_vector<int32_t>(), (std::vector<int32_t>{7, 8, 9}));
  Array view = imported.slice(0, 1, 3);
  imported = Array();
  EXPECT_FALSE(weak.expired());  // the view still holds the export
  EXPECT_EQ(view.to_vector<int32_t>(), (std::vector<int32_t>{8, 9}));
  {
    const Array dead = view;  // a copy dies first; still alive
  }
  EXPECT_FALSE(weak.expired());
  view = Array();
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(bytes_in_use(device()), before);
}

TEST_P(DLPackOnDevice, ExportKeepsTheMemoryAliveUntilItsDeleter) {
  const std::size_t before = bytes_in_use(device());
  std::weak_ptr<Storage> weak;
  DLManagedTensorVersioned* t = nullptr;
  {
    const Array a = Array::from(std::vector<double>{1.5, 2.5}, {2}, device());
    weak = a.storage();
    t = to_dlpack(a);
  }
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(bytes_in_use(device()), before + 16);
  // The consumer can still read the memory.
  const Array peek = Array::wrap(static_cast<char*>(t->dl_tensor.data) + t->dl_tensor.byte_offset,
                                 {2}, DType::f64, device());
  EXPECT_EQ(peek.to_vector<double>(), (std::vector<double>{1.5, 2.5}));
  t->deleter(t);
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(bytes_in_use(device()), before);
}

TEST_P(DLPackOnDevice, ExportOfAViewUsesByteOffsetAndStrides) {
  std::vector<int64_t> v(20);
  std::iota(v.begin(), v.end(), int64_t{0});
  const Array a = Array::from(v, {4, 5}, device());
  const Array rows = a.slice(0, 1, 3);
  DLManagedTensorVersioned* t = to_dlpack(rows);
  EXPECT_EQ(t->dl_tensor.data, a.data());  // the storage base
  EXPECT_EQ(t->dl_tensor.byte_offset, 5u * 8u);
  const Array back = from_dlpack(t);
  EXPECT_EQ(back.data(), rows.data());
  EXPECT_EQ(back.to_vector<int64_t>(), std::vector<int64_t>(v.begin() + 5, v.begin() + 15));

  const Array cols = a.slice(1, 1, 3);
  t = to_dlpack(cols);
  EXPECT_EQ(t->dl_tensor.byte_offset, 8u);
  EXPECT_EQ(t->dl_tensor.shape[0], 4);
  EXPECT_EQ(t->dl_tensor.shape[1], 2);
  EXPECT_EQ(t->dl_tensor.strides[0], 5);
  EXPECT_EQ(t->dl_tensor.strides[1], 1);
  const Array back_cols = from_dlpack(t);
  EXPECT_FALSE(back_cols.is_contiguous());
  EXPECT_EQ(back_cols.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 6, 7, 11, 12, 16, 17}));
}

TEST_P(DLPackOnDevice, DTypesRoundTrip) {
  for (const Code& c : kSpecCodes) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)));
    const Array a = Array::empty({3}, c.dtype, device());
    DLManagedTensorVersioned* t = to_dlpack(a);
    EXPECT_EQ(t->dl_tensor.dtype.code, c.code);
    EXPECT_EQ(t->dl_tensor.dtype.bits, c.bits);
    EXPECT_EQ(t->dl_tensor.dtype.lanes, 1);
    const Array b = from_dlpack(t);
    EXPECT_EQ(b.dtype(), c.dtype);
    EXPECT_EQ(b.nbytes(), a.nbytes());
  }
}

// ---------------------------------------------------------------------------------------------
// Import from a hand-made producer

TEST(DLPackTest, DeleterCalledExactlyOnceWhenTheLastViewDies) {
  int deletions = 0;
  Array a = from_dlpack(make_producer({}, &deletions));
  EXPECT_EQ(deletions, 0);
  EXPECT_EQ(a.shape(), (Shape{4, 5}));
  EXPECT_EQ(a.dtype(), DType::f32);
  EXPECT_EQ(a.device(), Device::cpu());
  std::vector<float> want(20);
  std::iota(want.begin(), want.end(), 0.0f);
  EXPECT_EQ(a.to_vector<float>(), want);
  Array s = a.slice(0, 1, 2);
  Array r = a.reshape({20});
  Array c = a;
  a = Array();
  r = Array();
  EXPECT_EQ(deletions, 0);
  c = Array();
  EXPECT_EQ(deletions, 0);
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{5, 6, 7, 8, 9}));
  s = Array();
  EXPECT_EQ(deletions, 1);
}

TEST(DLPackTest, ReExportOfAnImportCallsTheProducerOnce) {
  int deletions = 0;
  DLManagedTensorVersioned* out = nullptr;
  {
    const Array a = from_dlpack(make_producer({}, &deletions));
    out = to_dlpack(a);
  }
  EXPECT_EQ(deletions, 0);  // the export holds the import
  const float* data = reinterpret_cast<const float*>(static_cast<char*>(out->dl_tensor.data) +
                                                     out->dl_tensor.byte_offset);
  EXPECT_EQ(data[7], 7.0f);
  out->deleter(out);
  EXPECT_EQ(deletions, 1);
}

TEST(DLPackTest, WritesReachTheProducerBuffer) {
  int deletions = 0;
  DLManagedTensorVersioned* t = make_producer({}, &deletions);
  const float* raw = static_cast<const float*>(t->dl_tensor.data);
  {
    const Array a = from_dlpack(t);
    EXPECT_EQ(a.data(), raw);
    a.slice(0, 0, 1).copy_from(
        Array::from(std::vector<float>{-1, -2, -3, -4, -5}, {1, 5}, Device::cpu()));
    EXPECT_EQ(raw[0], -1.0f);
    EXPECT_EQ(raw[4], -5.0f);
    EXPECT_EQ(raw[5], 5.0f);
  }
  EXPECT_EQ(deletions, 1);
}

TEST(DLPackTest, StridedImport) {
  int deletions = 0;
  ProducerSpec spec;
  // The transpose of a 4x5 row-major matrix: shape 5x4, strides (1, 5).
  spec.shape = {5, 4};
  spec.strides = {1, 5};
  {
    const Array a = from_dlpack(make_producer(spec, &deletions));
    EXPECT_EQ(a.shape(), (Shape{5, 4}));
    EXPECT_EQ(a.strides(), (Shape{1, 5}));
    EXPECT_FALSE(a.is_contiguous());
    std::vector<float> want;
    for (int j = 0; j < 5; ++j)
      for (int i = 0; i < 4; ++i) want.push_back(static_cast<float>(i * 5 + j));
    EXPECT_EQ(a.to_vector<float>(), want);
    EXPECT_EQ(a.to(Device::cpu()).to_vector<float>(), want);
    EXPECT_THROW(a.reshape({20}), InvalidArgument);
  }
  EXPECT_EQ(deletions, 1);

  // Every other element of a row, in a 3-d view.
  spec.shape = {2, 3, 2};
  spec.strides = {20, 5, 2};
  {
    const Array a = from_dlpack(make_producer(spec, &deletions));
    EXPECT_EQ(a.to_vector<float>(),
              (std::vector<float>{0, 2, 5, 7, 10, 12, 20, 22, 25, 27, 30, 32}));
  }
  EXPECT_EQ(deletions, 2);
}

TEST(DLPackTest, NullStridesMeanRowMajor) {
  int deletions = 0;
  ProducerSpec spec;
  spec.shape = {2, 3, 4};
  const Array a = from_dlpack(make_producer(spec, &deletions));
  EXPECT_EQ(a.strides(), (Shape{12, 4, 1}));
  EXPECT_TRUE(a.is_contiguous());
}

TEST(DLPackTest, ByteOffsetHonoured) {
  int deletions = 0;
  ProducerSpec spec;
  spec.shape = {5};
  spec.byte_offset = 3 * sizeof(float);
  DLManagedTensorVersioned* t = make_producer(spec, &deletions);
  const char* base = static_cast<const char*>(t->dl_tensor.data);
  {
    const Array a = from_dlpack(t);
    EXPECT_EQ(a.data(), base + 12);
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{3, 4, 5, 6, 7}));
    // Re-exported, the offset is still right.
    const Array b = from_dlpack(to_dlpack(a));
    EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{3, 4, 5, 6, 7}));
  }
  EXPECT_EQ(deletions, 1);

  // With strides as well.
  spec.shape = {3};
  spec.strides = {4};
  spec.byte_offset = 2 * sizeof(float);
  {
    const Array a = from_dlpack(make_producer(spec, &deletions));
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{2, 6, 10}));
  }
  EXPECT_EQ(deletions, 2);
}

TEST(DLPackTest, ZeroDimAndEmptyTensors) {
  int deletions = 0;
  ProducerSpec spec;
  spec.shape = {};
  {
    const Array a = from_dlpack(make_producer(spec, &deletions));
    EXPECT_EQ(a.ndim(), 0);
    EXPECT_EQ(a.numel(), 1);
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{0}));
  }
  spec.shape = {3, 0};
  {
    const Array a = from_dlpack(make_producer(spec, &deletions));
    EXPECT_EQ(a.numel(), 0);
    EXPECT_TRUE(a.to_vector<float>().empty());
  }
  EXPECT_EQ(deletions, 2);
}

TEST(DLPackTest, DTypeCodesForEveryDType) {
  for (const Code& c : kSpecCodes) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)));
    int deletions = 0;
    ProducerSpec spec;
    spec.shape = {8};
    spec.dtype = {c.code, c.bits, 1};
    {
      const Array a = from_dlpack(make_producer(spec, &deletions));
      EXPECT_EQ(a.dtype(), c.dtype);
      EXPECT_EQ(a.nbytes(), 8 * static_cast<std::size_t>(c.bits / 8));
    }
    EXPECT_EQ(deletions, 1);
  }
}

TEST(DLPackTest, MinorVersionAndCudaHostAreAccepted) {
  int deletions = 0;
  ProducerSpec spec;
  spec.version = {1, 7};
  spec.device = {kDLCUDAHost, 0};
  {
    const Array a = from_dlpack(make_producer(spec, &deletions));
    EXPECT_EQ(a.device(), Device::cpu());  // pinned host memory is CPU-readable
    EXPECT_EQ(a.to_vector<float>()[19], 19.0f);
  }
  EXPECT_EQ(deletions, 1);
}

TEST(DLPackTest, ANullDeleterIsAllowed) {
  std::vector<float> buf = {1, 2, 3};
  int64_t shape[] = {3};
  DLManagedTensorVersioned t{};
  t.version = {1, 0};
  t.dl_tensor.data = buf.data();
  t.dl_tensor.device = {kDLCPU, 0};
  t.dl_tensor.ndim = 1;
  t.dl_tensor.dtype = {kDLFloat, 32, 1};
  t.dl_tensor.shape = shape;
  {
    const Array a = from_dlpack(&t);
    EXPECT_EQ(a.to_vector<float>(), buf);
  }
  EXPECT_EQ(buf, (std::vector<float>{1, 2, 3}));
}

TEST(DLPackTest, ExportOfAnUndefinedArrayThrows) {
  EXPECT_THROW(to_dlpack(Array()), InvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Import errors: each is InvalidArgument and leaves the tensor (and its deleter) to the caller.

struct BadCase {
  const char* what;
  ProducerSpec spec;
  std::vector<std::string> needles;
};

std::vector<BadCase> bad_cases() {
  std::vector<BadCase> cases;
  auto add = [&](const char* what, auto edit, std::vector<std::string> needles) {
    BadCase c{what, {}, std::move(needles)};
    edit(c.spec);
    cases.push_back(std::move(c));
  };
  add("major version 2", [](ProducerSpec& s) { s.version = {2, 0}; }, {"major version 2"});
  add("major version 0", [](ProducerSpec& s) { s.version = {0, 9}; }, {"major version 0"});
  add("lanes 2", [](ProducerSpec& s) { s.dtype = {kDLFloat, 32, 2}; }, {"lanes", "2"});
  add("lanes 0", [](ProducerSpec& s) { s.dtype = {kDLFloat, 32, 0}; }, {"lanes"});
  add("complex", [](ProducerSpec& s) { s.dtype = {kDLComplex, 64, 1}; }, {"code 5", "bits 64"});
  add("opaque", [](ProducerSpec& s) { s.dtype = {kDLOpaqueHandle, 64, 1}; }, {"code 3"});
  add("float8", [](ProducerSpec& s) { s.dtype = {kDLFloat, 8, 1}; }, {"code 2", "bits 8"});
  add("int16", [](ProducerSpec& s) { s.dtype = {kDLInt, 16, 1}; }, {"code 0", "bits 16"});
  add("uint64", [](ProducerSpec& s) { s.dtype = {kDLUInt, 64, 1}; }, {"code 1", "bits 64"});
  add("bool of 32 bits", [](ProducerSpec& s) { s.dtype = {kDLBool, 32, 1}; }, {"code 6"});
  add("unknown code", [](ProducerSpec& s) { s.dtype = {99, 32, 1}; }, {"code 99"});
  add("vulkan", [](ProducerSpec& s) { s.device = {kDLVulkan, 0}; }, {"device type 7"});
  add("opencl", [](ProducerSpec& s) { s.device = {kDLOpenCL, 0}; }, {"device type 4"});
  add("rocm", [](ProducerSpec& s) { s.device = {kDLROCM, 0}; }, {"device type 10"});
  add("cuda managed", [](ProducerSpec& s) { s.device = {kDLCUDAManaged, 0}; }, {"device type 13"});
  add("negative cuda id", [](ProducerSpec& s) { s.device = {kDLCUDA, -1}; }, {"-1"});
  add("negative ndim", [](ProducerSpec& s) { s.ndim = -1; }, {"ndim"});
  add("negative size", [](ProducerSpec& s) { s.shape = {4, -5}; }, {"negative"});
  add("null data", [](ProducerSpec& s) { s.null_data = true; }, {"null"});
  add("null shape", [](ProducerSpec& s) { s.null_shape = true; }, {"shape", "null"});
  // Counts and byte offsets that do not fit in int64 or the address space.
  add("bytes past int64", [](ProducerSpec& s) { s.shape = {int64_t{1} << 62}; },
      {"[4611686018427387904]", "more than fit in int64"});
  add("elements past int64",
      [](ProducerSpec& s) {
        s.shape = {int64_t{1} << 32, int64_t{1} << 32};
      },
      {"more elements than fit in int64"});
  add("strides past int64",
      [](ProducerSpec& s) {
        s.shape = {4, 5};
        s.strides = {int64_t{1} << 61, 1};
      },
      {"strides [2305843009213693952,1]", "do not fit in int64"});
  add("byte_offset past the address space", [](ProducerSpec& s) { s.byte_offset = UINT64_MAX - 8; },
      {"byte_offset"});
  add("byte_offset past int64", [](ProducerSpec& s) { s.byte_offset = uint64_t{1} << 63; },
      {"byte_offset"});
  add("negative stride before the address space",
      [](ProducerSpec& s) {
        s.strides = {-(int64_t{1} << 56), 1};
      },
      {"address space"});
  return cases;
}

TEST(DLPackTest, ImportOfNullThrows) {
  expect_throw_with<InvalidArgument>([] { from_dlpack(nullptr); }, {"null"});
}

TEST(DLPackTest, UnrepresentableTensorsThrowAndLeaveTheDeleterToTheCaller) {
  for (const BadCase& c : bad_cases()) {
    SCOPED_TRACE(c.what);
    int deletions = 0;
    DLManagedTensorVersioned* t = make_producer(c.spec, &deletions);
    try {
      from_dlpack(t);
      ADD_FAILURE() << "expected InvalidArgument";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("from_dlpack"), std::string::npos) << what;
      for (const auto& n : c.needles)
        EXPECT_NE(what.find(n), std::string::npos) << "'" << what << "' lacks '" << n << "'";
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type: " << e.what();
    }
    EXPECT_EQ(deletions, 0) << "the deleter ran although the import failed";
    // Ownership stayed with the caller, who can still release the tensor.
    if (deletions == 0) t->deleter(t);
    EXPECT_EQ(deletions, 1);
  }
}

// A producer that throws nothing but makes the import fail late (after every DLPack field check,
// in Array::wrap) still keeps its tensor: no failure path of from_dlpack runs the deleter.
TEST(DLPackTest, AFailureInsideWrapLeavesTheDeleterToTheCaller) {
  int deletions = 0;
  ProducerSpec spec;
  spec.shape = {2};
  spec.strides = {int64_t{1} << 40};  // fits in int64, but runs past the address space
  DLManagedTensorVersioned* t = make_producer(spec, &deletions);
  t->dl_tensor.data = reinterpret_cast<void*>(UINTPTR_MAX - (uintptr_t{1} << 20));
  expect_throw_with<InvalidArgument>([&] { from_dlpack(t); }, {"address space"});
  EXPECT_EQ(deletions, 0);
  t->deleter(t);
  EXPECT_EQ(deletions, 1);
}

// ---------------------------------------------------------------------------------------------
// The read-only flag

TEST(DLPackTest, AReadOnlyImportIsAReadOnlyArray) {
  int deletions = 0;
  ProducerSpec spec;
  spec.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  {
    const Array a = from_dlpack(make_producer(spec, &deletions));
    EXPECT_TRUE(a.read_only());
    EXPECT_TRUE(a.slice(0, 1, 3).read_only());
    EXPECT_TRUE(a.reshape({20}).read_only());
    const Array zeros = Array::from(std::vector<float>(20, 0.0f), {4, 5}, Device::cpu());
    expect_throw_with<InvalidArgument>([&] { a.copy_from(zeros); },
                                       {"Array::copy_from", "read-only"});
    EXPECT_EQ(a.to_vector<float>()[7], 7.0f);  // the producer's memory is untouched
    EXPECT_FALSE(a.to(Device::cpu()).read_only());
    // Exported again, it stays read-only for the next consumer.
    DLManagedTensorVersioned* again = to_dlpack(a);
    EXPECT_EQ(again->flags & DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_FLAG_BITMASK_READ_ONLY);
    again->deleter(again);
  }
  EXPECT_EQ(deletions, 1);
  // Without the flag the import is writable (other flags are ignored).
  spec.flags = DLPACK_FLAG_BITMASK_IS_COPIED;
  EXPECT_FALSE(from_dlpack(make_producer(spec, &deletions)).read_only());
  EXPECT_EQ(deletions, 2);
}

TEST(DLPackTest, ExportOfAViewBeforeItsStorageBaseHasNoNegativeOffset) {
  // A reversed wrap sliced past its start: byte offset -8 used to become 2^64 - 8.
  std::vector<float> buf = {0, 1, 2, 3};
  const Array reversed = Array::wrap(buf.data() + 3, {4}, DType::f32, Device::cpu(), {-1});
  const Array tail = reversed.slice(0, 2, 4);  // elements 1, 0
  ASSERT_LT(tail.byte_offset(), 0);
  DLManagedTensorVersioned* t = to_dlpack(tail);
  EXPECT_EQ(t->dl_tensor.byte_offset, 0u);
  EXPECT_EQ(t->dl_tensor.data, buf.data() + 1);
  const Array back = from_dlpack(t);
  EXPECT_EQ(back.to_vector<float>(), (std::vector<float>{1, 0}));
}

TEST(DLPackTest, ExportFlagsFollowTheArray) {
  const Array a = Array::from(std::vector<float>{1, 2}, {2}, Device::cpu());
  DLManagedTensorVersioned* w = to_dlpack(a);
  EXPECT_EQ(w->flags, 0u);
  w->deleter(w);
  DLManagedTensorVersioned* r = to_dlpack(a.as_read_only());
  EXPECT_EQ(r->flags, static_cast<uint64_t>(DLPACK_FLAG_BITMASK_READ_ONLY));
  const Array back = from_dlpack(r);
  EXPECT_TRUE(back.read_only());
  EXPECT_EQ(back.data(), a.data());
}

}  // namespace
}  // namespace eagle
