"""Arrays from and to other libraries, without copying where the memory allows it."""

from __future__ import annotations

from . import _eagle

_NUMPY_DTYPES = {
    "float64": _eagle.DType.f64,
    "float32": _eagle.DType.f32,
    "float16": _eagle.DType.f16,
    "int64": _eagle.DType.i64,
    "int32": _eagle.DType.i32,
    "uint32": _eagle.DType.u32,
    "uint8": _eagle.DType.u8,
    "bool": _eagle.DType.bool_,
}


def _device(device) -> _eagle.Device:
    if device is None or isinstance(device, _eagle.Device):
        return device
    return _eagle.Device(str(device))


def asarray(obj, dtype=None, device=None, stream=None) -> _eagle.Array:
    """``obj`` as an eagle Array.

    Anything with ``__dlpack__`` (numpy, torch, cupy, jax, eagle) or ``__cuda_array_interface__``
    is shared, not copied; its producer orders its pending work before ``stream`` (an
    ``eagle.Stream``; default: the legacy default stream). Python lists and scalars are copied
    through numpy. A different ``dtype`` converts (a copy, through numpy on the host); a
    different ``device`` copies.
    """
    device = _device(device)
    if _eagle._is_array_like(obj):
        a = _eagle._import(obj, stream)
    else:
        import numpy as np

        a = _eagle._import(np.ascontiguousarray(np.asarray(obj)))
    if dtype is not None and a.dtype != dtype:
        a = from_numpy(_numpy_of(a).astype(_numpy_dtype(dtype)), device or a.device)
    if device is not None and a.device != device:
        a = a.to(device)
    return a


def from_numpy(values, device=None) -> _eagle.Array:
    """A copy of a numpy array (or anything numpy converts) on ``device`` (default: the CPU)."""
    import numpy as np

    host = _eagle._import(np.ascontiguousarray(values).copy())
    device = _device(device)
    return host if device is None or device.is_cpu else host.to(device)


def _numpy_dtype(dtype):
    import numpy as np

    for name, d in _NUMPY_DTYPES.items():
        if d == dtype:
            return np.dtype(name)
    raise _eagle.NotSupported(f"numpy has no dtype for eagle's {dtype.name}")


def _numpy_of(a: _eagle.Array):
    import numpy as np

    host = a if a.device.is_cpu else a.to(_eagle.Device("cpu"))
    if host.dtype == _eagle.DType.bf16:
        raise _eagle.NotSupported("numpy has no bfloat16: convert with torch, or use f32")
    return np.from_dlpack(host)


def to_numpy(a: _eagle.Array):
    """The values as a numpy array: zero copy for a CPU array, a host copy otherwise."""
    return _numpy_of(a)


def empty(shape, dtype=_eagle.DType.f32, device="cpu") -> _eagle.Array:
    """A new contiguous array with unspecified contents."""
    return _eagle.empty(shape, dtype, _device(device))


def full(shape, value, dtype=_eagle.DType.f32, device="cpu") -> _eagle.Array:
    """A new contiguous array holding ``value`` everywhere."""
    from . import kernels

    out = empty(shape, dtype, device)
    kernels.fill(value, buffer=out)
    return out
