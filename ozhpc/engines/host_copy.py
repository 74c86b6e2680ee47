"""Large host <-> GPU copies at DMA speed: the NumPy array is page-locked for the copy.

CuPy copies a NumPy array from pageable memory at 1.9 GB/s up and 2.7 GB/s down on the H200
nodes (the driver stages it itself): 2.1 s for the two 2 GB operands of n = 16384 and 0.75 s
for C, more than the product. Registering the array's own pages with CUDA (cudaHostRegister)
for the duration of the copy takes 0.07 s for 2 GB and lets the copy run at 51 GB/s, with no
extra host buffer (``bench/speed/transfer_paths.py`` measures every path). Where registration is
refused (pages already registered by someone else, a driver without it), the copy runs the
plain way. The bytes are the same either way; only the time changes.
"""
from __future__ import annotations

from contextlib import contextmanager

import cupy as cp
import numpy as np

MIN_BYTES = 32 << 20
"""Arrays below this take CuPy's plain copy (registration costs more than it saves)."""


@contextmanager
def page_locked(x: np.ndarray):
    """``x``'s memory registered with CUDA inside the block (best effort: see the module docstring)."""
    try:
        cp.cuda.runtime.hostRegister(x.ctypes.data, x.nbytes, 0)
    except cp.cuda.runtime.CUDARuntimeError:
        yield False
        return
    try:
        yield True
    finally:
        cp.cuda.runtime.hostUnregister(x.ctypes.data)


def upload(x: np.ndarray, stream) -> cp.ndarray:
    """``x`` on the current device, in ``x``'s layout (a transposed view stays a transposed view)."""
    transposed = not x.flags.c_contiguous and x.T.flags.c_contiguous
    flat = x.T if transposed else np.ascontiguousarray(x)
    out = cp.empty(flat.shape, dtype=flat.dtype)
    with page_locked(flat):
        out.set(flat, stream=stream)
        stream.synchronize()
    return out.T if transposed else out


def download(d: cp.ndarray, stream) -> np.ndarray:
    """``d`` as a C-ordered NumPy array, after the work queued on ``stream``."""
    d = cp.ascontiguousarray(d)
    out = np.empty(d.shape, dtype=d.dtype)
    with page_locked(out):
        d.get(stream=stream, out=out)    # blocking: returns when the copy is done
    return out
