"""eagle's kernels. Calling one inside a recording records a node and returns its Value(s);
outside one it runs at once on arrays and returns the outputs (complete on return).

``buffer=`` names where the output goes (an Array, or inside a recording a Value written in
place); ``label=`` names the node. Kernels written in C++ in a shared library of their own
(EAGLE_EXPORT_KERNELS, eagle/kernel/export.hpp) come in with ``load_kernels(path)``.
"""

from __future__ import annotations

from . import _eagle
from ._graph import current_recorder


def _call(kernel, *args, buffer=None, label: str = ""):
    r = current_recorder()
    if r is not None:
        outs = r.call_all(kernel, args, buffer, label)
    else:
        buffers = None if buffer is None else (buffer if isinstance(buffer, (list, tuple)) else [buffer])
        outs = _eagle._launch(kernel, args, buffers)
        if buffers is not None and not outs:
            outs = buffers
    if len(outs) == 1:
        return outs[0]
    return tuple(outs)


_standard = _eagle._standard_kernels()
fill = _standard["fill"]
copy = _standard["copy"]
scale = _standard["scale"]
axpy = _standard["axpy"]
add = _standard["add"]
mul = _standard["mul"]
where = _standard["where"]
sum = _standard["sum"]  # noqa: A001 (eagle's name for the kernel)
max = _standard["max"]  # noqa: A001
broadcast = _standard["broadcast"]
equal_mask = _standard["equal_mask"]
mul_div = _standard["mul_div"]
cell_or = _standard["cell_or"]
cell_none = _standard["cell_none"]
loop_next = _standard["loop_next"]
cell_increment = _standard["cell_increment"]
cell_mad = _standard["cell_mad"]
step_count = _standard["step_count"]
gather_view = _standard["gather_view"]  # a strided view (transpose, column slice) made contiguous
add_to_view = _standard["add_to_view"]  # view += c where the strided view lies
scatter_view = _standard["scatter_view"]  # view = c where the strided view lies
zero_view = _standard["zero_view"]
validate_cu_seqlens = _standard["validate_cu_seqlens"]
chunk_offsets = _standard["chunk_offsets"]
chunk_tasks = _standard["chunk_tasks"]
seqlen_bucket = _standard["seqlen_bucket"]  # the switch index over ragged.seqlen_buckets(T, S0)
active_rows = _standard["active_rows"]
mask_rows = _standard["mask_rows"]
gradient_barrier = _standard["gradient_barrier"]


def first_true(n: int) -> _eagle.Kernel:
    """The kernel that decides an elif chain of ``n`` conditions (index of the first non-zero)."""
    return _eagle._first_true(n)


def adamw(tensors: int) -> _eagle.Kernel:
    """Fused AdamW over ``tensors`` parameter tensors (count, then param, grad, m, v each)."""
    return _eagle._adamw(tensors)


def load_kernels(path: str) -> dict:
    """The kernels a shared library exports (EAGLE_EXPORT_KERNELS), by name. The library stays
    loaded for the life of the process."""
    return _eagle._load_kernels(str(path))
