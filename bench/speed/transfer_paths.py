"""Host <-> device copy paths for a large operand on one GPU (which one should the engine use?).

    python bench/speed/transfer_paths.py [--gb 2]

Times, for an array of --gb GB: CuPy's pageable copy (cupy.asarray / .get), a pinned host
array (allocation, then the copy), cudaHostRegister on the existing NumPy array, a ring of
pinned staging chunks (NumPy copy into the chunk, asynchronous copy, two chunks in flight), and
what the cutile engine does (ozhpc.engines.host_copy: the array page-locked for the copy).
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import parser  # noqa: E402
import numpy as np  # noqa: E402

cp = cupyx = None
"""CuPy, imported by :func:`main` after the arguments (``--help`` runs without a GPU)."""


def timed(f):
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    out = f()
    cp.cuda.Device().synchronize()
    return time.perf_counter() - t0, out


def ring_upload(x: np.ndarray, chunk_bytes: int):
    flat = x.reshape(-1)
    out = cp.empty_like(x).reshape(-1)
    n = max(1, chunk_bytes // x.itemsize)
    bufs = [cupyx.empty_pinned((n,), x.dtype) for _ in range(2)]
    events = [None, None]
    stream = cp.cuda.Stream(non_blocking=True)
    for i, lo in enumerate(range(0, flat.size, n)):
        hi = min(flat.size, lo + n)
        b = i % 2
        if events[b] is not None:
            events[b].synchronize()
        np.copyto(bufs[b][:hi - lo], flat[lo:hi])
        out[lo:hi].set(bufs[b][:hi - lo], stream=stream)
        events[b] = stream.record()
    stream.synchronize()
    return out.reshape(x.shape)


def ring_download(d, chunk_bytes: int):
    flat = d.reshape(-1)
    out = np.empty(d.shape, d.dtype).reshape(-1)
    n = max(1, chunk_bytes // d.itemsize)
    bufs = [cupyx.empty_pinned((n,), d.dtype) for _ in range(2)]
    stream = cp.cuda.Stream(non_blocking=True)
    chunks = list(range(0, flat.size, n))
    events = []
    for i, lo in enumerate(chunks[:2]):
        hi = min(flat.size, lo + n)
        flat[lo:hi].get(stream=stream, out=bufs[i][:hi - lo], blocking=False)
        events.append(stream.record())
    for i, lo in enumerate(chunks):
        hi = min(flat.size, lo + n)
        b = i % 2
        events[b].synchronize()
        np.copyto(out[lo:hi], bufs[b][:hi - lo])
        if i + 2 < len(chunks):
            lo2 = chunks[i + 2]
            hi2 = min(flat.size, lo2 + n)
            flat[lo2:hi2].get(stream=stream, out=bufs[b][:hi2 - lo2], blocking=False)
            events[b] = stream.record()
    return out.reshape(d.shape)


def main():
    ap = parser(__doc__)
    ap.add_argument("--gb", type=float, default=2.0)
    args = ap.parse_args()
    global cp, cupyx
    import cupy as cp
    import cupyx
    n = int(args.gb * 2**30 / 8)
    x = np.random.default_rng(1).standard_normal(n)
    cp.zeros(1).get()
    rows = []
    t, d = timed(lambda: cp.asarray(x)); rows.append(("pageable cupy.asarray", t))
    t, _ = timed(lambda: d.get()); rows.append(("pageable .get()", t))
    t, p = timed(lambda: cupyx.empty_pinned(x.shape, x.dtype)); rows.append(("cupyx.empty_pinned (alloc)", t))
    t, _ = timed(lambda: np.copyto(p, x)); rows.append(("np.copyto into pinned (first touch)", t))
    t, _ = timed(lambda: np.copyto(p, x)); rows.append(("np.copyto into pinned (again)", t))
    t, _ = timed(lambda: cp.asarray(p)); rows.append(("pinned cupy.asarray", t))
    t, _ = timed(lambda: d.get(out=p)); rows.append(("pinned .get(out=)", t))
    y = np.random.default_rng(2).standard_normal(n)
    reg = cp.cuda.runtime.hostRegister
    t, _ = timed(lambda: reg(y.ctypes.data, y.nbytes, 0)); rows.append(("cudaHostRegister (existing array)", t))
    t, _ = timed(lambda: cp.asarray(y)); rows.append(("registered cupy.asarray", t))
    t, _ = timed(lambda: cp.cuda.runtime.hostUnregister(y.ctypes.data)); rows.append(("cudaHostUnregister", t))
    for mb in (16, 64, 256):
        t, u = timed(lambda: ring_upload(x, mb << 20)); rows.append((f"ring upload, {mb} MB chunks", t))
        assert bool((u == d).all())
        t, h = timed(lambda: ring_download(d, mb << 20)); rows.append((f"ring download, {mb} MB chunks", t))
        assert np.array_equal(h, x)
    from ozhpc.engines import host_copy
    s = cp.cuda.get_current_stream()
    t, u = timed(lambda: host_copy.upload(x, s)); rows.append(("ozhpc host_copy.upload (page-locked)", t))
    assert bool((u == d).all())
    t, h = timed(lambda: host_copy.download(d, s)); rows.append(("ozhpc host_copy.download (page-locked, fresh array)", t))
    assert np.array_equal(h, x)
    for name, t in rows:
        print(f"| {name} | {t:.3f} s | {args.gb / t:.1f} GB/s |")


if __name__ == "__main__":
    main()
