"""DLPack's C exchange API (the type attribute __dlpack_c_exchange_api__, torch >= 2.10): eagle
takes a producer's tensors through its C functions when no stream handshake is needed, and falls
back to __dlpack__ otherwise. The producer here is numpy arrays behind a table of ctypes
functions, counting each call."""

import ctypes
import gc

import numpy as np
import pytest

import eagle
from conftest import random_values


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


MANAGED_FROM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.c_void_p))
DLTENSOR_FROM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))
CURRENT_STREAM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                                  ctypes.POINTER(ctypes.c_void_p))


class ExchangeApi(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("prev_api", ctypes.c_void_p),
                ("managed_tensor_allocator", ctypes.c_void_p),
                ("managed_tensor_from_py_object_no_sync", MANAGED_FROM),
                ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
                ("dltensor_from_py_object_no_sync", DLTENSOR_FROM),
                ("current_work_stream", CURRENT_STREAM)]


capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype = ctypes.py_object
capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def describe(array, out, dtype):
    """Fills a DLTensor for a float32 numpy array (on the CPU) or eagle array (on cuda:0), as a
    producer describes its own tensor; the shape and strides returned must outlive its use."""
    on_gpu = isinstance(array, eagle.Array)
    out.data = array.data_ptr if on_gpu else array.ctypes.data
    out.device = DLDevice(2, 0) if on_gpu else DLDevice(1, 0)  # kDLCUDA, kDLCPU
    out.ndim = array.ndim
    out.dtype = dtype
    dims = (ctypes.c_int64 * array.ndim)(*array.shape)
    strides = array.strides if on_gpu else [s // array.itemsize for s in array.strides]
    steps = (ctypes.c_int64 * array.ndim)(*strides)
    out.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
    out.strides = ctypes.cast(steps, ctypes.POINTER(ctypes.c_int64))
    out.byte_offset = 0
    return dims, steps


def producer_type(major=1, minor=3, capsule_name=b"dlpack_exchange_api", fail=False,
                  dtype=DLDataType(2, 32, 1), current_stream=0):
    """A new producer type with its own exchange table and call counts, describing its float32
    arrays as `dtype` (kDLFloat 32 bits: what they are); on CUDA it issues on `current_stream`
    (0: the legacy default stream)."""
    calls = {"dltensor": 0, "managed": 0, "deleted": 0, "dlpack": 0, "stream": 0}
    alive = {}  # what a managed tensor keeps alive, by its address

    class Producer:
        def __init__(self, array):
            self.array = array
            self.layout = None

        def __dlpack__(self, **kwargs):
            calls["dlpack"] += 1
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    def dltensor_from(obj, out):
        calls["dltensor"] += 1
        if fail:
            return -1
        obj.layout = describe(obj.array, out.contents, dtype)  # lives as long as the object
        return 0

    def deleter(address):
        calls["deleted"] += 1
        del alive[address]

    def managed_from(obj, out):
        calls["managed"] += 1
        if fail:
            return -1
        m = DLManagedTensorVersioned()
        m.version = DLPackVersion(1, 3)
        m.deleter = deleter_fn
        layout = describe(obj.array, m.dl_tensor, dtype)
        alive[ctypes.addressof(m)] = (m, layout, obj)
        out[0] = ctypes.addressof(m)
        return 0

    def stream_now(device_type, device_id, out):
        calls["stream"] += 1
        out[0] = current_stream or None
        return 0

    deleter_fn = DELETER(deleter)
    api = ExchangeApi()
    api.version = DLPackVersion(major, minor)
    api.managed_tensor_from_py_object_no_sync = MANAGED_FROM(managed_from)
    api.dltensor_from_py_object_no_sync = DLTENSOR_FROM(dltensor_from)
    api.current_work_stream = CURRENT_STREAM(stream_now)
    Producer.__dlpack_c_exchange_api__ = capsule_new(ctypes.addressof(api), capsule_name, None)
    Producer.keep = (api, deleter_fn, api.current_work_stream)  # live as long as the type
    return Producer, calls, alive


def mul_plans(device=eagle.cpu):
    og = eagle.op.Graph("mul")
    ta, tb = og.tensor("a", (2, 3)), og.tensor("b", (2, 3))
    ty = og.pointwise("mul", ta, tb).set_output(True).set_name("y")
    plans = eagle.plan(og, device)
    plans.build_plans()
    return plans, ta, tb, ty


def test_execute_reads_operands_through_the_exchange_table(rng):
    Producer, calls, _ = producer_type()
    plans, ta, tb, ty = mul_plans()
    big = random_values(rng, (4, 6))
    a, b = big[1:3, ::2], random_values(rng, (2, 3))  # a strided: read through its strides
    y = np.full((2, 3), np.nan, np.float32)
    plans.execute({ta: Producer(a), tb: Producer(b), ty: Producer(y)})
    np.testing.assert_allclose(y, a * b, rtol=1e-6)
    assert calls["dltensor"] == 3 and calls["dlpack"] == 0 and calls["managed"] == 0


def test_a_failing_or_unusable_table_falls_back_to_dlpack(rng):
    plans, ta, tb, ty = mul_plans()
    a, b = random_values(rng, (2, 3)), random_values(rng, (2, 3))
    for kind in ({"fail": True}, {"major": 2}, {"minor": 1}, {"capsule_name": b"other"}):
        Producer, calls, _ = producer_type(**kind)
        y = np.full((2, 3), np.nan, np.float32)
        plans.execute({ta: Producer(a), tb: Producer(b), ty: Producer(y)})
        np.testing.assert_allclose(y, a * b, rtol=1e-6, err_msg=str(kind))
        assert calls["dlpack"] == 3, kind
        assert calls["dltensor"] == (3 if "fail" in kind else 0), kind


def test_asarray_owns_the_managed_tensor_until_its_last_view_dies(rng):
    Producer, calls, alive = producer_type()
    x = random_values(rng, (3, 4))
    a = eagle.asarray(Producer(x))
    assert calls["managed"] == 1 and calls["dlpack"] == 0
    assert a.shape == (3, 4) and a.data_ptr == x.ctypes.data
    np.testing.assert_array_equal(np.from_dlpack(a), x)
    assert len(alive) == 1 and calls["deleted"] == 0
    del a
    gc.collect()
    assert calls["deleted"] == 1 and not alive


def test_a_tensor_eagle_cannot_hold_is_refused_and_handed_back(rng):
    # A dtype eagle has no type for (complex64): asarray and execute refuse it with DLPack's
    # import error, and the managed tensor goes back to its producer.
    Producer, calls, alive = producer_type(dtype=DLDataType(5, 64, 1))
    with pytest.raises(eagle.InvalidArgument, match="dtype"):
        eagle.asarray(Producer(random_values(rng, (2, 3))))
    assert calls["managed"] == 1 and calls["deleted"] == 1 and not alive
    plans, ta, tb, ty = mul_plans()
    y = np.full((2, 3), np.nan, np.float32)
    with pytest.raises(eagle.InvalidArgument, match="dtype"):
        plans.execute({ta: Producer(random_values(rng, (2, 3))), tb: random_values(rng, (2, 3)),
                       ty: y})
    assert np.isnan(y).all()


@pytest.mark.skipif(not eagle.cuda_available(), reason="no CUDA device")
def test_cuda_operands_come_through_the_table_on_the_producers_current_stream(rng):
    # On the stream the producer issues on now (here the legacy default stream, handle 0, borrowed
    # as torch's current stream is), no handshake: the table. On eagle's own stream the producer
    # must order its work first: __dlpack__(stream=...).
    cuda = eagle.Device("cuda:0")
    plans, ta, tb, ty = mul_plans(cuda)
    a, b = random_values(rng, (2, 3)), random_values(rng, (2, 3))
    ga, gb = eagle.asarray(a, device=cuda), eagle.asarray(b, device=cuda)
    for stream, through_table in ((eagle.Stream.borrow(cuda, 0), True), (eagle.Stream(cuda), False)):
        Producer, calls, _ = producer_type()
        gy = eagle.asarray(np.full((2, 3), np.nan, np.float32), device=cuda)
        plans.execute({ta: Producer(ga), tb: Producer(gb), ty: Producer(gy)}, stream)
        stream.synchronize()
        np.testing.assert_allclose(gy.numpy(), a * b, rtol=1e-6)
        assert calls["stream"] == 1  # asked once per call, not per operand
        assert calls["dlpack"] == (0 if through_table else 3), stream
