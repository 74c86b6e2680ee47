"""``ozhpc.pdgemm`` against ScaLAPACK's own PDGEMM, and bitwise against ``ozhpc.gemm``.

ScaLAPACK (Debian's libscalapack-mpich-dev, linked against Debian's MPICH) runs in its own
process under ``mpiexec.mpich`` (tests/helpers/pdgemm_driver.c); ozhpc under the mpich wheel's
``mpiexec`` (tests/helpers/pdgemm_worker.py). They share only files, so no process ever loads
two MPI libraries. On the same descriptors and data: ozhpc's C is bitwise ``ozhpc.gemm``'s on
the gathered sub-matrices (any grid, blocks, offsets) and within the FP64 bound of PDGEMM's.
Skipped without ScaLAPACK, unless ``OZHPC_REQUIRE_SCALAPACK=1`` (.ci/run installs it and sets that).
"""
from __future__ import annotations

import ctypes.util
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import ozhpc
from ozhpc.errors import InputError
from ozhpc.parallel.layout import BlockCyclic
from ozhpc.parallel.mpi import MPI

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
U = 2.0 ** -53
GRIDS = [(2, 2), (1, 3)]


def random_matrix(rng, rows, cols):
    """Entries over a few binades, so the scales and plan matter."""
    return rng.standard_normal((rows, cols)) * 2.0 ** rng.integers(-6, 7, size=(rows, cols))


def cases(nprow, npcol):
    """(transa, transb, m, n, k, alpha, beta, (ia, ja, ib, jb, ic, jc), A's, B's, C's (MB, NB, RSRC, CSRC),
    extra rows/columns of each global matrix beyond its sub-matrix)."""
    last_row, last_col = nprow - 1, npcol - 1
    return [
        ("N", "N", 37, 29, 41, 1.0, 0.0, (1, 1, 1, 1, 1, 1), (5, 3, 0, 0), (7, 4, 0, 0), (3, 5, 0, 0), 0),
        ("T", "N", 23, 31, 19, -1.5, 0.75, (3, 2, 2, 4, 5, 3), (4, 7, last_row, 1 % npcol), (3, 3, 0, last_col),
         (5, 2, last_row, 0), 6),
        ("N", "T", 30, 17, 26, 0.5, 2.0, (2, 5, 4, 1, 1, 2), (1, 7, 0, last_col), (4, 1, last_row, 0), (6, 6, 0, 0), 5),
        ("C", "t", 19, 22, 33, 2.0, -1.0, (6, 1, 1, 3, 2, 7), (7, 5, 0, 0), (2, 9, 0, 1 % npcol),
         (11, 4, last_row, last_col), 8),
    ]


def sub_shapes(ta, tb, m, n, k):
    return (k, m) if ta in "TtCc" else (m, k), (n, k) if tb in "TtCc" else (k, n), (m, n)


def write_cases(tmp_path, nprow, npcol, rng):
    """The case file both programs read, and per case the global A, B, C and the expected C."""
    lines, expected = [], []
    for i, (ta, tb, m, n, k, alpha, beta, offsets, *blocks, extra) in enumerate(cases(nprow, npcol)):
        starts = [offsets[0:2], offsets[2:4], offsets[4:6]]
        mats, fields = [], []
        for name, (i0, j0), shape, blk in zip("ABC", starts, sub_shapes(ta, tb, m, n, k), blocks):
            rows, cols = i0 - 1 + shape[0] + extra, j0 - 1 + shape[1] + extra
            mats.append(random_matrix(rng, rows, cols))
            path = tmp_path / f"{name}{i}.bin"
            mats[-1].T.tofile(path)   # column-major
            fields.append(f"{rows} {cols} {' '.join(map(str, blk))}")
        lines.append(f"{ta} {tb} {m} {n} {k} {alpha!r} {beta!r} {' '.join(map(str, offsets))} {' '.join(fields)} "
                     + " ".join(str(tmp_path / f"{x}{i}.bin") for x in "ABC") + f" {tmp_path / f'out{i}.bin'}")
        expected.append(_reference(ta, tb, m, n, k, alpha, beta, starts, mats))
    (tmp_path / "cases.txt").write_text("\n".join(lines) + "\n")
    return expected


def _reference(ta, tb, m, n, k, alpha, beta, starts, mats):
    """ozhpc.gemm on one process on the gathered sub-matrices, C's other entries untouched; and
    the FP64 bound's |alpha| |op(A)||op(B)| + |beta| |C| over sub(C)."""
    (_, _, c), windows = mats, []
    for (i0, j0), x, shape in zip(starts, mats, sub_shapes(ta, tb, m, n, k)):
        windows.append((slice(i0 - 1, i0 - 1 + shape[0]), slice(j0 - 1, j0 - 1 + shape[1])))
    sa, sb, sc = (x[w] for x, w in zip(mats, windows))
    transa, transb = ta in "TtCc", tb in "TtCc"
    out = c.copy()
    out[windows[2]] = ozhpc.gemm(sa, sb, sc, alpha=alpha, beta=beta, transa=transa, transb=transb, engine="numpy")
    scale = np.zeros_like(c)
    opa, opb = (sa.T if transa else sa), (sb.T if transb else sb)
    scale[windows[2]] = abs(alpha) * (abs(opa) @ abs(opb)) + abs(beta) * abs(sc)
    return out, scale, k, c.shape


def run(cmd, timeout=120):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def scalapack_missing() -> str | None:
    """Why ScaLAPACK's PDGEMM cannot run here (None when it can)."""
    for tool in ("mpicc.mpich", "mpiexec.mpich"):
        if shutil.which(tool) is None:
            return f"{tool} not found (apt-get install mpich libscalapack-mpich-dev)"
    if ctypes.util.find_library("scalapack-mpich") is None:
        return "libscalapack-mpich not found (apt-get install libscalapack-mpich-dev)"
    if shutil.which("mpiexec") is None:
        return "mpiexec not found (pip install mpich)"
    return None


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    why = scalapack_missing()
    if why and os.environ.get("OZHPC_REQUIRE_SCALAPACK") == "1":
        pytest.fail(f"OZHPC_REQUIRE_SCALAPACK=1 but {why}; see .ci/run")
    if why:
        pytest.skip(why)
    exe = tmp_path_factory.mktemp("scalapack") / "pdgemm_driver"
    run(["mpicc.mpich", "-O1", "-o", str(exe), os.path.join(HERE, "helpers", "pdgemm_driver.c"),
         "-lscalapack-mpich"])
    return exe


@pytest.mark.mpi
@pytest.mark.parametrize("nprow,npcol", GRIDS)
def test_pdgemm_matches_scalapack_and_gemm(driver, tmp_path, nprow, npcol):
    expected = write_cases(tmp_path, nprow, npcol, np.random.default_rng(nprow * 10 + npcol))
    ranks, case_file = str(nprow * npcol), str(tmp_path / "cases.txt")
    run(["mpiexec.mpich", "-n", ranks, str(driver), str(nprow), str(npcol), case_file])
    run([shutil.which("mpiexec"), "-n", ranks, sys.executable, os.path.join(HERE, "helpers", "pdgemm_worker.py"),
         str(nprow), str(npcol), case_file, ".oz"])
    for i, (ref, scale, k, shape) in enumerate(expected):
        pd = np.fromfile(tmp_path / f"out{i}.bin").reshape(shape[1], shape[0]).T
        oz = np.fromfile(tmp_path / f"out{i}.bin.oz").reshape(shape[1], shape[0]).T
        assert oz.tobytes() == ref.tobytes(), f"case {i}: pdgemm differs from ozhpc.gemm"
        # ozhpc: k u |alpha||A||B| + rounding; PDGEMM: gamma_k on the products, roundings of alpha, beta.
        bound = (2 * k + 4) * U * scale + 2.0 ** -1074
        assert np.all(abs(oz - pd) <= bound), f"case {i}: max excess {np.max(abs(oz - pd) - bound)}"
        assert np.array_equal(pd[scale == 0], ref[scale == 0]), f"case {i}: PDGEMM changed C outside sub(C)"


def local_blocks(x, mb, nb, grid=(1, 1), coords=(0, 0), rsrc=0, csrc=0):
    """One rank's Fortran-order blocks of x and its descriptor."""
    layout = BlockCyclic(*x.shape, mb, nb, *grid, rsrc, csrc)
    rows, cols = layout.rows.global_indices(coords[0]), layout.cols.global_indices(coords[1])
    return np.asfortranarray(x[np.ix_(rows, cols)]), list(layout.descriptor(lld=max(1, rows.size), prow=coords[0]))


def test_pdgemm_one_rank_is_gemm_with_offsets():
    """One process: sub-matrices at offsets, every trans pair, bitwise ``ozhpc.gemm``; C's other entries kept."""
    rng = np.random.default_rng(5)
    for ta, tb in (("N", "N"), ("T", "N"), ("N", "T"), ("T", "T")):
        m, n, k = 9, 7, 11
        (ra, ca), (rb, cb), _ = sub_shapes(ta, tb, m, n, k)
        A, B, C = random_matrix(rng, ra + 3, ca + 2), random_matrix(rng, rb + 1, cb + 4), random_matrix(rng, 14, 12)
        (a, da), (b, db), (c, dc) = local_blocks(A, 4, 3), local_blocks(B, 2, 5), local_blocks(C, 3, 3)
        ozhpc.pdgemm(ta, tb, m, n, k, -0.5, a, da, b, db, 1.5, c, dc, ia=3, ja=2, ib=2, jb=4, ic=4, jc=6)
        ref = C.copy()
        ref[3:3 + m, 5:5 + n] = ozhpc.gemm(A[2:2 + ra, 1:1 + ca], B[1:1 + rb, 3:3 + cb], C[3:3 + m, 5:5 + n],
                                           alpha=-0.5, beta=1.5, transa=ta == "T", transb=tb == "T")
        assert c.tobytes(order="F") == np.asfortranarray(ref).tobytes(order="F"), (ta, tb)


def test_pdgemm_empty_products_keep_c_and_still_give_info():
    """m or n = 0 touches nothing; k = 0 gives beta C; with info=True each returns its SummaInfo, as
    ``ozhpc.gemm(info=True)`` gives its GemmInfo for an empty product."""
    rng = np.random.default_rng(7)
    C = random_matrix(rng, 6, 5)
    a, da = local_blocks(random_matrix(rng, 6, 4), 2, 3)
    b, db = local_blocks(random_matrix(rng, 4, 5), 3, 2)
    for m, n, k, want in ((0, 5, 4, C), (6, 0, 4, C), (0, 0, 0, C), (6, 5, 0, ozhpc.gemm(
            np.zeros((6, 0)), np.zeros((0, 5)), C, beta=-2.5))):
        c, dc = local_blocks(C, 4, 4)
        info = ozhpc.pdgemm("N", "N", m, n, k, 1.0, a, da, b, db, -2.5, c, dc, info=True)
        assert (info.m, info.n, info.k, info.certified) == (m, n, k, True)
        assert c.tobytes(order="F") == np.asfortranarray(want).tobytes(order="F"), (m, n, k)


def test_pdgemm_refuses_bad_input_in_one_line_and_keeps_c():
    rng = np.random.default_rng(6)
    A, B, C = random_matrix(rng, 8, 6), random_matrix(rng, 6, 5), random_matrix(rng, 8, 5)
    (a, da), (b, db), (c, dc) = local_blocks(A, 3, 2), local_blocks(B, 2, 2), local_blocks(C, 3, 3)
    keep = c.copy()
    bad = {
        "transa must be 'N', 'T' or 'C', got 'X'": dict(transa="X"),
        "desca: DTYPE must be 1 (dense block-cyclic), got 2": dict(desca=[2] + da[1:]),
        "descb must be 9 integers (DTYPE, CTXT, M, N, MB, NB, RSRC, CSRC, LLD), got 8": dict(descb=db[:8]),
        "descc: LLD=7 is below the 8 local rows of process (0, 0)": dict(descc=dc[:8] + [7]),
        "descc: RSRC=1, CSRC=0 outside the 1x1 process grid": dict(descc=dc[:6] + [1] + dc[7:]),
        "A(ia=2, ja=1) with 8x6 entries does not fit the 8x6 matrix of desca": dict(ia=2),
        "b: the local array is 6x4 on process (0, 0), descb needs at least 6x5": dict(b=b[:, :4]),
        "c: the local array is updated in place, so it must be a writable float64 array, got float32":
            dict(c=c.astype(np.float32)),
        "alpha must be a real number, got 1j": dict(alpha=1j),
        "beta must be within FP64's range, got a 309-digit integer": dict(beta=-10**308 * 2),
        "m must be an integer, got '8'": dict(m="8"),
        "jc must be an integer, got 1.0": dict(jc=1.0),
        "grid=2x2 needs 4 ranks, the communicator has 1": dict(grid=(2, 2)),
        "grid must be two integers (NPROW, NPCOL), got '1x1'": dict(grid="1x1"),
        "comm must be an mpi4py communicator of the grid's ranks, got 'world'": dict(comm="world"),
        "grid must be two integers (NPROW, NPCOL), got (1.5, 1)": dict(grid=(1.5, 1)),
        "desca must be 9 integers (DTYPE, CTXT, M, N, MB, NB, RSRC, CSRC, LLD), got [1, 0, 8, 6, 2.5, 2, 0, 0, 8]":
            dict(desca=da[:4] + [2.5] + da[5:]),
        "descb must be 9 integers (DTYPE, CTXT, M, N, MB, NB, RSRC, CSRC, LLD), got '100662205'":
            dict(descb="100662205"),
        "descc must be 9 integers (DTYPE, CTXT, M, N, MB, NB, RSRC, CSRC, LLD), got None": dict(descc=None),
    }
    if hasattr(MPI, "COMM_NULL"):   # mpi4py's (the stand-in without MPI has none)
        bad["comm must be an mpi4py communicator of the grid's ranks, got MPI.COMM_NULL"] = dict(comm=MPI.COMM_NULL)
    args = dict(transa="N", transb="N", m=8, n=5, k=6, alpha=1.0, a=a, desca=da, b=b, descb=db, beta=1.0,
                c=c, descc=dc)
    for message, change in bad.items():
        kw = dict(args, **change)
        pos = [kw.pop(x) for x in ("transa", "transb", "m", "n", "k", "alpha", "a", "desca", "b", "descb",
                                   "beta", "c", "descc")]
        with pytest.raises(InputError) as err:
            ozhpc.pdgemm(*pos, **kw)
        assert str(err.value) == message
    assert c.tobytes() == keep.tobytes()


@pytest.mark.mpi
@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="mpiexec not found (pip install mpich)")
def test_pdgemm_refuses_one_ranks_bad_input_on_every_rank():
    """A scalar that differs between ranks, a local array too small on one rank: every rank raises
    the same one-line InputError (no rank left waiting in a collective)."""
    proc = run([shutil.which("mpiexec"), "-n", "2", sys.executable, os.path.join(HERE, "helpers", "pdgemm_worker.py"),
                "refusals"], timeout=60)
    lines = sorted(line for line in proc.stdout.splitlines() if line)
    assert lines == sorted([
        f"rank {r}: alpha: rank 1 passed other alpha than rank 0: every rank must pass the same arguments "
        "(only the local arrays and LLD differ)" for r in (0, 1)] + [
        f"rank {r}: array: a: the local array is 6x1 on process (0, 1), desca needs at least 6x2" for r in (0, 1)])
