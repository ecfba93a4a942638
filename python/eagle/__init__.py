"""eagle: record graphs of GPU and CPU kernels once, replay them with next to no host cost.

The C++ core does the work (eagle._eagle); this package adds Pythonic spellings: arrays from
numpy / torch / cupy without copying, kernels that record inside a recording and run outside one,
``Graph.record`` and the ``@eagle.Graph.builder`` decorator, reverse mode, op graphs and planning.
"""

from . import _eagle
from ._eagle import (
    Array,
    Branch,
    BucketResults,
    CudaError,
    Device,
    DeviceKind,
    DeviceProperties,
    DType,
    Error,
    ExecutionPlans,
    InvalidArgument,
    Kernel,
    NotSupported,
    Recorder,
    RecordError,
    Stream,
    Value,
    bytes_in_use,
    chrome_trace_json,
    cublaslt_status,
    cuda_available,
    cuda_device_count,
    comm,
    cudnn_status,
    data,
    op,
    plan,
    plan_for,
    planned_kernel,
    planned_segments,
    ragged,
)
from ._arrays import asarray, empty, full, from_numpy, to_numpy
from ._graph import BucketSet, EagleWarning, Graph, current_recorder, parallel
from . import kernels, diff
from .kernels import load_kernels
from .builder import BuildError

cpu = Device("cpu")
f64, f32, f16, bf16 = DType.f64, DType.f32, DType.f16, DType.bf16
i64, i32, u32, u8, bool_ = DType.i64, DType.i32, DType.u32, DType.u8, DType.bool_

__all__ = [name for name in dir() if not name.startswith("_")]
