"""A grid-independent fingerprint of a float64 matrix, computed where its blocks live.

Each entry ``(i, j, x)`` is hashed to a 64-bit word ``y`` by the murmur3 finaliser over
the float64 bit pattern of x times an odd constant, plus a key of row i, xor a key of
column j; three further lanes are keyed non-linear mixes of ``y``. Each lane's words are
summed modulo 2**64. A sum does not
depend on the order of its terms, so any split of the matrix into blocks (grid, block
size, rank count, chunks of a file) gives the same four sums, and the ranks combine
them exactly (integers, modulo 2**64). The shape is folded in at the end. Result: 64
hex digits (256 bits), the same for a matrix in memory, a :class:`DistMatrix` and an
HDF5 dataset.

A changed bit of any entry, swapped entries or another shape go unnoticed only if two
64-bit entry hashes collide or four 64-bit sums match by chance: a checksum against
accidents, not a cryptographic signature (SHA-256 of the bytes is that).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

LANES = 4
MASK = (1 << 64) - 1
KEYS = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93)
ROW_MUL = np.uint64(0xFF51AFD7ED558CCD)
COL_MUL = np.uint64(0xC4CEB9FE1A85EC53)
CHUNK_ENTRIES = 1 << 16
"""Entries hashed per NumPy pass: small enough that the temporaries stay in cache."""
FILE_CHUNK_BYTES = 1 << 26


DEVICE_CHUNK_ENTRIES = 1 << 25
"""Entries hashed per pass on a GPU (CuPy): 256 MiB per temporary."""


def fmix64(x: np.ndarray) -> np.ndarray:
    """murmur3's 64-bit finaliser, in place on a uint64 array (NumPy or CuPy; a bijection)."""
    x ^= x >> np.uint64(33)
    x *= ROW_MUL
    x ^= x >> np.uint64(33)
    x *= COL_MUL
    x ^= x >> np.uint64(33)
    return x


def _index_keys(idx: np.ndarray, key: int, mul: np.uint64, xp=np) -> np.ndarray:
    """Per-row (or per-column) keys: a bijective hash of the global index, per lane."""
    x = xp.asarray(np.asarray(idx, dtype=np.uint64)) * mul
    x ^= np.uint64(key)
    return fmix64(x)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the cores this rank may use, not the node's
    except AttributeError:
        return os.cpu_count() or 1


def _chunk_sums(bits, rk, ck) -> list[int]:
    """Lane sums of one chunk: one full mix of (i, j, bits) per entry, then a cheap keyed
    mix per further lane (the lanes differ non-linearly, so their sums are independent)."""
    y = bits * COL_MUL
    y += rk[:, None]
    y ^= ck[None, :]
    fmix64(y)
    out = [int(y.sum(dtype=np.uint64))]
    for key in KEYS[1:]:
        x = y ^ np.uint64(key)
        x *= ROW_MUL
        x ^= x >> np.uint64(29)
        out.append(int(x.sum(dtype=np.uint64)))
    return out


def lane_sums(block, rows, cols, threads: int | None = None) -> list[int]:
    """The four lane sums (Python ints mod 2**64) of ``block``, whose entry (a, b) is the
    global entry (rows[a], cols[b]); any partition of a matrix adds up to the whole's sums.
    A NumPy block is hashed in chunks on ``threads`` threads (default: the cores, at most 8;
    NumPy drops the GIL); a CuPy block on its GPU (the same integer arithmetic modulo 2**64, so
    the same sums): C is fingerprinted before it is copied back to the host."""
    on_device = type(block).__module__.startswith("cupy")
    if on_device:
        import cupy as xp
    else:
        xp = np
    block = xp.asarray(block, dtype=xp.float64)
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    if block.shape != (rows.size, cols.size):
        raise ValueError(f"block has shape {block.shape}, indices give {(rows.size, cols.size)}")
    if block.size == 0:
        return [0] * LANES
    rk, ck = _index_keys(rows, KEYS[0], ROW_MUL, xp), _index_keys(cols, KEYS[-1], COL_MUL, xp)
    if on_device:
        block = xp.ascontiguousarray(block)
        step = max(1, DEVICE_CHUNK_ENTRIES // max(1, cols.size))
        parts = [_chunk_sums(block[lo:lo + step].view(xp.uint64), rk[lo:lo + step], ck)
                 for lo in range(0, rows.size, step)]
        return add_sums([0] * LANES, *parts)
    return add_sums([0] * LANES, *_host_chunk_sums(block, rk, ck, threads))


def _host_chunk_sums(block, rk, ck, threads):
    """Lane sums of cache-sized chunks of a NumPy block, on a pool of threads."""
    step = max(1, CHUNK_ENTRIES // max(1, ck.size))
    cuts = [(lo, lo + step) for lo in range(0, rk.size, step)]
    cuts = [(lo, hi, c0, c0 + CHUNK_ENTRIES) for lo, hi in cuts for c0 in range(0, ck.size, CHUNK_ENTRIES)]

    def one(cut):
        lo, hi, c0, c1 = cut
        bits = np.ascontiguousarray(block[lo:hi, c0:c1]).view(np.uint64)
        return _chunk_sums(bits, rk[lo:hi], ck[c0:c1])

    workers = min(8, _cores()) if threads is None else threads
    if len(cuts) > 1:
        with ThreadPoolExecutor(max(1, workers)) as pool:
            return list(pool.map(one, cuts))
    return [one(cut) for cut in cuts]


def add_sums(*parts) -> list[int]:
    """Lane-wise sum modulo 2**64 of several :func:`lane_sums` results (exact)."""
    return [sum(lanes) & MASK for lanes in zip(*parts)]


def finish(sums, shape) -> str:
    """The fingerprint string from the whole matrix's lane sums and its shape."""
    m, n = (int(s) for s in shape)
    words = np.array([(s + k * (m + 1) + (n << 32)) & MASK for s, k in zip(sums, KEYS)], dtype=np.uint64)
    words = fmix64(fmix64(words) ^ np.uint64((m * 0x9E3779B1 + n) & MASK))
    return "".join(f"{int(w):016x}" for w in words)


def fingerprint_matrix(c) -> str:
    """Fingerprint of a whole matrix held by one process."""
    c = np.asarray(c)
    if c.ndim != 2:
        raise ValueError(f"a matrix is 2-D, got shape {c.shape}")
    return finish(lane_sums(c, np.arange(c.shape[0]), np.arange(c.shape[1])), c.shape)


def fingerprint_distributed(c) -> str:
    """Fingerprint of a :class:`~ozhpc.parallel.DistMatrix`; collective over its grid, and
    each rank hashes only its own blocks (one allgather of four integers per rank)."""
    mine = lane_sums(c.local, c.global_rows(), c.global_cols())   # NumPy or CuPy blocks
    return finish(add_sums(*c.grid.comm.allgather(mine)), c.shape)


def fingerprint_dataset(path: str, dset_path: str, chunk_bytes: int = FILE_CHUNK_BYTES, comm=None) -> str:
    """Fingerprint of a 2-D HDF5 dataset, read in row chunks (never whole). With ``comm``
    (collective) each rank reads one contiguous share of the rows and the sums are combined."""
    from ..io.h5io import reading

    rank, size = (0, 1) if comm is None else (comm.Get_rank(), comm.Get_size())
    with reading(path) as f:
        dset = f[dset_path]
        m, n = dset.shape
        lo, hi = m * rank // size, m * (rank + 1) // size
        step = max(1, chunk_bytes // max(1, 8 * n))
        parts = [lane_sums(dset[r:min(hi, r + step)].astype(np.float64, copy=False),
                           np.arange(r, min(hi, r + step)), np.arange(n)) for r in range(lo, hi, step)]
    mine = add_sums([0] * LANES, *parts)
    return finish(mine if comm is None else add_sums(*comm.allgather(mine)), (m, n))
