"""Reverse mode over recorded graphs: gradients as graphs of kernels, built once, replayed."""

from __future__ import annotations

from . import _eagle
from ._graph import Graph


def reverse(forward: Graph, seeds, wrt) -> Graph:
    """The reverse of a built forward graph (recorded with ``record=True``) as a new built graph
    whose results are the gradients of the ``wrt`` names, in order.

    ``seeds``: names of the forward's name map (params, externals, labeled arrays, ``result``,
    ``result.0``, ...) whose final contents are differentiated; a name alone means a cotangent
    of ones, ``(name, array)`` gives one (bound as param ``seed.<name>``). Run ``forward()``
    then ``reverse()`` each step; after ``forward.bind`` make the reverse again."""
    if isinstance(seeds, (str, tuple)):
        seeds = [seeds]
    if isinstance(wrt, str):
        wrt = [wrt]
    return Graph(_eagle._reverse(forward._g, list(seeds), list(wrt)))


def gradients(r, seeds, wrt, cotangents=()):
    """Inside a recording made with ``record=True``: records the reverse of everything recorded
    so far and returns the gradients of ``wrt`` (Values), for a training step in one graph."""
    one = not isinstance(wrt, (list, tuple))
    grads = r.gradients(list(seeds) if isinstance(seeds, (list, tuple)) else [seeds],
                        [wrt] if one else list(wrt), list(cotangents))
    return grads[0] if one else grads
