"""Arrays to and from numpy and DLPack: zero copy, dtypes, read-only flags, devices, errors."""

import numpy as np
import pytest

import eagle
from conftest import random_values


def test_numpy_round_trip_shares_memory(rng):
    x = random_values(rng, (4, 5))
    a = eagle.asarray(x)
    assert a.shape == (4, 5) and a.dtype == eagle.f32 and a.device == eagle.cpu
    assert a.data_ptr == x.ctypes.data  # no copy in
    back = np.from_dlpack(a)
    assert back.ctypes.data == x.ctypes.data  # no copy out
    x[1, 2] = 42.0
    assert back[1, 2] == 42.0 and a.numpy()[1, 2] == 42.0


@pytest.mark.parametrize(
    "np_dtype,dtype",
    [(np.float64, eagle.f64), (np.float32, eagle.f32), (np.float16, eagle.f16),
     (np.int64, eagle.i64), (np.int32, eagle.i32), (np.uint32, eagle.u32), (np.uint8, eagle.u8),
     (np.bool_, eagle.bool_)])
def test_every_numpy_dtype(rng, np_dtype, dtype):
    x = (rng.uniform(1, 100, size=(3, 2))).astype(np_dtype)
    a = eagle.asarray(x)
    assert a.dtype == dtype
    np.testing.assert_array_equal(a.numpy(), x)


def test_strided_numpy_view_keeps_its_strides(rng):
    x = random_values(rng, (6, 8))
    view = x[:, ::2]
    a = eagle.asarray(view)
    assert a.shape == (6, 4) and a.strides == (8, 2) and not a.is_contiguous
    np.testing.assert_array_equal(np.from_dlpack(a), view)


def test_bf16_round_trips_through_dlpack():
    a = eagle.full((3,), 1.5, eagle.bf16)
    cap = a.__dlpack__(max_version=(1, 0))

    class Producer:  # any DLPack producer of a bf16 tensor (torch on the GPU machine)
        def __dlpack__(self, **kwargs):
            return cap

        def __dlpack_device__(self):
            return (1, 0)

    b = eagle.asarray(Producer())
    assert b.dtype == eagle.bf16 and b.data_ptr == a.data_ptr
    with pytest.raises(eagle.NotSupported, match="bfloat16"):
        a.numpy()


def test_legacy_capsule_for_old_consumers(rng):
    x = random_values(rng, (5,))
    a = eagle.asarray(x)
    cap = a.__dlpack__()  # no max_version: a DLPack 0.x capsule
    assert "dltensor" in repr(cap) and "versioned" not in repr(cap)

    class Old:  # a producer that predates max_version
        def __dlpack__(self, stream=None):
            return a.__dlpack__()

        def __dlpack_device__(self):
            return (1, 0)

    b = eagle.asarray(Old())
    assert b.data_ptr == a.data_ptr
    np.testing.assert_array_equal(b.numpy(), x)


def test_a_cuda_producer_is_asked_with_the_stream_handshake(rng):
    # What a CUDA producer's __dlpack__ receives: the consumer's stream (1, the legacy default
    # stream, when none is given) and max_version; a producer from before DLPack 1.0 is asked
    # again with the stream alone. (The capsule handed back here is a CPU one.)
    x = random_values(rng, (3,))
    a = eagle.asarray(x)
    asked = []

    class CudaProducer:
        def __dlpack__(self, **kwargs):
            asked.append(kwargs)
            return a.__dlpack__(max_version=(1, 0))

        def __dlpack_device__(self):
            return (2, 0)

    class OldCudaProducer(CudaProducer):
        def __dlpack__(self, stream=None):
            asked.append({"stream": stream})
            return a.__dlpack__()

    for producer in (CudaProducer(), OldCudaProducer()):
        np.testing.assert_array_equal(eagle.asarray(producer).numpy(), x)
    assert [sorted(k) for k in asked] == [["max_version", "stream"], ["stream"]]
    assert asked[0]["stream"] == asked[1]["stream"] == 1 and asked[0]["max_version"][0] == 1


def test_read_only_survives_both_ways(rng):
    x = random_values(rng, (4,))
    x.flags.writeable = False
    a = eagle.asarray(x)  # numpy flags a read-only array in its DLPack 1.x export
    assert a.read_only
    with pytest.raises(eagle.InvalidArgument, match="read-only"):
        a.copy_from(np.zeros(4, np.float32))
    with pytest.raises(eagle.InvalidArgument, match="read-only"):
        eagle.kernels.scale(x, 2.0, buffer=a)
    ro = eagle.asarray(random_values(rng, (4,))).as_read_only()
    assert not np.from_dlpack(ro).flags.writeable
    with pytest.raises(BufferError, match="read-only"):
        ro.__dlpack__()  # a 0.x capsule cannot carry the flag


def test_memory_outlives_the_producer(rng):
    x = random_values(rng, (1000,))
    expect = x.copy()
    a = eagle.asarray(x)
    del x  # the eagle array keeps numpy's buffer alive
    np.testing.assert_array_equal(a.numpy(), expect)
    b = np.from_dlpack(a)
    del a  # and numpy keeps eagle's
    np.testing.assert_array_equal(b, expect)


def test_python_lists_and_dtype_conversion():
    a = eagle.asarray([[1, 2], [3, 4]], dtype=eagle.f64)
    assert a.dtype == eagle.f64 and a.numpy().tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert eagle.full((2, 2), 7, eagle.i32).tolist() == [[7, 7], [7, 7]]


def test_dlpack_device_and_export_rules(rng):
    a = eagle.asarray(random_values(rng, (3,)))
    assert a.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError, match="stream must be None"):
        a.__dlpack__(stream=5, max_version=(1, 0))
    copied = np.from_dlpack(a, copy=True)
    assert copied.ctypes.data != a.data_ptr
    np.testing.assert_array_equal(copied, a.numpy())


def test_cuda_array_interface_in():
    class FakeCuda:  # describes device memory; eagle only wraps it (never touches it here)
        __cuda_array_interface__ = {"shape": (4, 2), "typestr": "<f4", "data": (0x1000, False),
                                    "strides": None, "version": 3}

    a = eagle.asarray(FakeCuda())
    assert a.device == eagle.Device("cuda:0") and a.shape == (4, 2) and a.dtype == eagle.f32
    assert a.data_ptr == 0x1000

    class BadType:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<c8", "data": (0x1000, False),
                                    "version": 3}

    with pytest.raises(eagle.InvalidArgument, match="typestr '<c8'"):
        eagle.asarray(BadType())

    class Pending:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0x1000, False),
                                    "version": 3, "stream": 7}

    with pytest.raises(eagle.NotSupported, match="stream"):
        eagle.asarray(Pending())


def test_not_an_array():
    with pytest.raises(eagle.InvalidArgument, match="expected an array"):
        eagle._eagle._import(object())


def test_errors_are_typed_and_keep_messages():
    assert issubclass(eagle.InvalidArgument, eagle.Error)
    assert issubclass(eagle.InvalidArgument, ValueError)
    assert issubclass(eagle.NotSupported, NotImplementedError)
    with pytest.raises(eagle.InvalidArgument, match="cuda:-1|negative|ordinal"):
        eagle.Device("cuda:-1")
    with pytest.raises(eagle.InvalidArgument, match="reshape"):
        eagle.empty((2, 3)).reshape((4, 2))


def test_a_capsule_imports_directly(rng):
    x = random_values(rng, (3,))
    cap = eagle.asarray(x).__dlpack__(max_version=(1, 0))
    a = eagle.asarray(cap)
    assert a.data_ptr == x.ctypes.data
    with pytest.raises(eagle.InvalidArgument, match="unused"):
        eagle.asarray(cap)  # a capsule is consumed once


def test_numpy_protocol_and_tolist():
    a = eagle.full((2, 2), 3.0)
    assert np.asarray(a).tolist() == [[3.0, 3.0], [3.0, 3.0]]
    assert np.asarray(a, dtype=np.int32).dtype == np.int32
    assert a.tolist() == [[3.0, 3.0], [3.0, 3.0]]
