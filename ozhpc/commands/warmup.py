"""``ozhpc warmup``: compile the cuTile kernels ahead of time into the node's kernel cache.

The cutile engine compiles each kernel variant on its first launch (tileiras: seconds per
variant). Run once per node (or once per shared cache directory) before the jobs: it runs small
products from HDF5 to HDF5 through the very path of ``ozhpc gemm`` (:func:`ozhpc.run.runner.execute`,
one rank; the operands reach the kernels in the layouts a real run gives them, e.g. op(B)^T as a
transposed view), for both schemes, "auto" and fixed accuracy, transposed operands, inputs
with inf/NaN (the special-value kernels) and complex operands (conjugate transposes too). cuTile specialises a kernel on whether each extent is
a multiple of 16 and whether each stride is a multiple of 16 bytes, not on the sizes themselves,
so three small shapes (extents that are multiples of 16, as 8192 or 16384; even ones that are
not; odd ones) cover every size.
"""
from __future__ import annotations

import os
import tempfile
import time

import numpy as np

CASES = (
    ("ozaki1", {}), ("ozaki1", {"slices": 7}), ("ozaki1", {"transa": True, "transb": True}),
    ("ozaki2", {}), ("ozaki2", {"bits": 53}), ("ozaki2", {"transa": True, "transb": True}),
    ("ozaki1", {"nonfinite": True}), ("ozaki2", {"nonfinite": True}),
    ("ozaki1", {"slices": 16}), ("ozaki2", {"moduli": 16}),
    ("ozaki2", {"complex": True}), ("ozaki2", {"complex": True, "transa": "C", "transb": "C"}),
    ("ozaki2", {"complex": True, "moduli": 16}), ("ozaki1", {"complex": True}),
)
"""The warm-up products. Slice and modulus counts are array extents too: 16 of them (as "auto"
reaches when it widens a plan) is a variant of its own. Complex operands take kernels of their
own (Gaussian residues and CRT: 16 moduli, 32 residue planes, is the default at large k)."""
SHAPES = ((256, 320, 288), (250, 300, 270), (251, 301, 271))
"""(m, k, n) of the warm-up products: extents that are multiples of 16; even extents that are not
(rows of 16-byte multiples); odd extents (rows that are not)."""


def _inputs(directory: str, m: int, k: int, n: int) -> str:
    """A (m x k), B (k x n), their transposes and copies with inf/NaN, in one file."""
    import h5py

    from ..run.matrices import standard_matrix

    path = os.path.join(directory, f"in_{m}_{k}_{n}.h5")
    a, b = standard_matrix(m, k, 0.5, 1), standard_matrix(k, n, 0.5, 2)
    with h5py.File(path, "w") as f:
        f["A"], f["B"], f["At"], f["Bt"] = a, b, a.T, b.T
        az = a + 1j * standard_matrix(m, k, 0.5, 3)
        bz = b + 1j * standard_matrix(k, n, 0.5, 4)
        f["Az"], f["Bz"], f["Azt"], f["Bzt"] = az, bz, az.T.conj(), bz.T.conj()
        a[1, 2], b[3, 1] = np.inf, np.nan
        f["Anf"], f["Bnf"] = a, b
    return path


def _bits_for(moduli: int, k: int, complex_: bool = False) -> int:
    from ..engines import crt, gaussian

    needed = gaussian.moduli_needed if complex_ else crt.moduli_needed
    return next(b for b in range(crt.MIN_BITS, crt.MAX_BITS + 1) if needed(b, k) >= moduli)


def warm(engine_name: str = "cutile", shapes=SHAPES, log=print) -> list[tuple[str, float]]:
    """Run every case of :data:`CASES` once per shape; returns (case, seconds) pairs."""
    from ..parallel.mpi import MPI

    from ..io.h5io import DatasetRef
    from ..run.config import RunConfig
    from ..run.runner import execute

    out = []
    with tempfile.TemporaryDirectory(prefix="ozhpc-warmup-") as tmp:
        for shape in shapes:
            path = _inputs(tmp, *shape)
            for i, (scheme, opts) in enumerate(CASES):
                opts = dict(opts)
                suffix = "nf" if opts.pop("nonfinite", False) else ""
                complex_ = opts.pop("complex", False)
                if "moduli" in opts:   # the bits that take exactly that many moduli at this k
                    opts["bits"] = _bits_for(opts.pop("moduli"), shape[1], complex_)
                if complex_:
                    suffix = "z"
                a = "A" + suffix + ("t" if opts.get("transa") else "")
                b = "B" + suffix + ("t" if opts.get("transb") else "")
                cfg = RunConfig(a=DatasetRef(path, "/" + a), b=DatasetRef(path, "/" + b),
                                out=DatasetRef(os.path.join(tmp, "out.h5"), f"/C{i}_{'x'.join(map(str, shape))}"),
                                scheme=scheme, engine=engine_name, progress="off", **opts)
                t0 = time.perf_counter()
                execute(cfg, comm=MPI.COMM_SELF)
                name = f"{'x'.join(map(str, shape))} {scheme} " + \
                    (" ".join(f"{k}={v}" for k, v in opts.items()) or "auto") + \
                    {"": "", "nf": " inf/nan", "z": " complex"}[suffix]
                out.append((name, time.perf_counter() - t0))
                log(f"  {name}: {out[-1][1]:.1f} s")
    return out


def run_warmup(cache: str | None = None, log=print) -> int:
    """The command: 0 when compiled (or nothing to do: no GPU engine here, said in one line)."""
    from ..engines import EngineUnavailable, get_engine
    from ..engines.toolchain import configure_cache, describe

    path = configure_cache(cache)
    try:
        get_engine("cutile")
    except EngineUnavailable as exc:
        log(f"ozhpc warmup: nothing to compile, the cutile engine cannot run here ({exc})")
        return 0
    log(f"ozhpc warmup: {describe()}")
    t0 = time.perf_counter()
    warm("cutile", log=log)
    log(f"ozhpc warmup: kernels compiled in {time.perf_counter() - t0:.1f} s into {path} "
        "(a second run only loads them)")
    return 0
