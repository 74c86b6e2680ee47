"""MPI worker for tests/test_mpi.py: many configurations in ONE mpiexec job.

    mpiexec -n R python tests/helpers/mpi_worker.py repro        # SUMMA vs ozhpc.gemm, bit for bit
    mpiexec -n R python tests/helpers/mpi_worker.py io DIR       # runner.execute on HDF5 files in DIR
    mpiexec -n R python tests/helpers/mpi_worker.py mismatch     # ranks with different engines must all refuse
    mpiexec -n R python tests/helpers/mpi_worker.py pinned PxQ   # SHA-256 of tests/helpers/pinned_cases.py on a PxQ grid
    mpiexec -n R python tests/helpers/mpi_worker.py wire [cutile]  # FP64 and int8-plane panels: the same bits
    mpiexec -n R python tests/helpers/mpi_worker.py complex DIR  # complex SUMMA and HDF5 runs vs ozhpc.gemm
    mpiexec -n R python tests/helpers/mpi_worker.py anyinput     # levels / exact dots: certified, the same bits
    mpiexec -n R python tests/helpers/mpi_worker.py infact       # the in-fact check's passes: the same bits

Every rank runs every configuration its rank count allows (grids with P*Q == R,
block sizes 1..64, transposes, alpha/beta, inf/nan, a forced tiny MPI count limit, Ozaki
schemes I and II); rank 0 compares SHA-256 digests with the single-process product and
prints one JSON line. Exit status 0 when everything matched, 1 otherwise.
"""
from __future__ import annotations

import itertools
import json
import os
import sys

import numpy as np
from mpi4py import MPI

import ozhpc
from ozhpc.io.h5io import DatasetRef
from ozhpc.parallel import ProcessGrid, Summa
from ozhpc.run.config import RunConfig
from ozhpc.run.matrices import standard_matrix
from ozhpc.run.report import sha256_of_matrix

M, K, N = 157, 301, 96
BLOCKS = [1, 5, 13, 17, 32, 64, (5, 13)]
GRIDS = {1: [(1, 1)], 2: [(1, 2), (2, 1)], 3: [(3, 1), (1, 3)], 4: [(2, 2), (1, 4), (4, 1)]}
TRANS = list(itertools.product((False, True), repeat=2))


def operands(transa, transb, nonfinite=False):
    a = standard_matrix(M, K, 1.0, 11)
    b = standard_matrix(K, N, 1.0, 12)
    a[3] = 0.0  # an all-zero row
    if nonfinite:
        a[5, 7], a[9, 100], a[20, 0] = np.inf, -np.inf, np.nan
        b[7, 2], b[100, 50], b[200, 3] = np.inf, 0.0, -np.inf
        a[30, 200] = np.inf
    return (a.T.copy() if transa else a), (b.T.copy() if transb else b)


def cases(ranks):
    out = []
    for gi, grid in enumerate(GRIDS[ranks]):
        for bi, block in enumerate(BLOCKS):
            ta, tb = TRANS[(gi + bi) % 4]
            out.append(dict(grid=grid, block=block, transa=ta, transb=tb))
        out.append(dict(grid=grid, block=17, transa=True, transb=False, alpha=-1.5, beta=0.75))
        out.append(dict(grid=grid, block=5, transa=False, transb=True, nonfinite=True))
        # kb=13: a 7-element message limit splits each panel into (panel bytes / 7) requests in flight
        out.append(dict(grid=grid, block=13, kb=13, transa=False, transb=False, max_count=7))
        out.append(dict(grid=grid, block=(13, 5), transa=True, transb=True, kb=3, slices=4, groups="all"))
        # Ozaki scheme II: other blocks and panel widths, inf/nan, a given bits, alpha/beta.
        out.append(dict(grid=grid, block=13, kb=7, transa=False, transb=True, scheme="ozaki2"))
        out.append(dict(grid=grid, block=(5, 17), transa=True, transb=False, nonfinite=True, scheme="ozaki2"))
        out.append(dict(grid=grid, block=32, kb=64, transa=False, transb=False, alpha=-1.5, beta=0.75,
                        scheme="ozaki2", bits=30))
    return out


def repro(comm) -> dict:
    rank, size = comm.Get_rank(), comm.Get_size()
    refs, failures, done = {}, [], 0
    for case in cases(size):
        ta, tb, nf = case["transa"], case["transb"], case.get("nonfinite", False)
        alpha, beta = case.get("alpha", 1.0), case.get("beta", 0.0)
        slices, groups = case.get("slices", "auto"), case.get("groups", "auto")
        scheme, bits = case.get("scheme", "ozaki1"), case.get("bits", "auto")
        A, B = operands(ta, tb, nf)
        C0 = standard_matrix(M, N, 0.5, 13) if beta else None
        key = (ta, tb, nf, alpha, beta, slices, groups, scheme, bits)
        if key not in refs:
            refs[key] = sha256_of_matrix(ozhpc.gemm(A, B, C0, alpha=alpha, beta=beta, transa=ta, transb=tb,
                                                    slices=slices, groups=groups, scheme=scheme, bits=bits,
                                                    engine="numpy"))
        options = {"max_count": case["max_count"]} if "max_count" in case else None
        with ProcessGrid(comm, case["grid"]) as grid:
            block = case["block"]
            with Summa(grid, M, N, K, block=block if isinstance(block, tuple) else (block, block),
                       kb=case.get("kb"), engine="numpy", slices=slices, groups=groups, scheme=scheme,
                       bits=bits, transport_options=options) as summa:
                a, bt, c = summa.distribute(A, B, C0, transa=ta, transb=tb)
                out = summa(a, bt, c, alpha=alpha, beta=beta)
                whole = out.gather(0)
                info = summa.info
                sent = comm.reduce(info.bytes_sent, op=MPI.SUM, root=0)
                msgs = comm.reduce(info.messages, op=MPI.SUM, root=0)
                calls = comm.reduce(info.mpi_calls, op=MPI.SUM, root=0)
        if rank == 0:
            done += 1
            digest = sha256_of_matrix(whole)
            p, q = case["grid"]
            # one pass of the plan's planes (+ class codes for inf/NaN) with fixed slices / bits;
            # "auto" adds the certificate's magnitude digits to its first pass, maybe more passes
            if info.certified is None and info.pass_planes != [info.planes + (1 if nf else 0)]:
                failures.append(f"planes per pass {info.pass_planes}, plan {info.planes}: {case}")
            depth = sum(info.pass_bytes)
            model = depth * K * (M * (q - 1) + N * (p - 1))
            if digest != refs[key]:
                failures.append(f"bits differ: {case}")
            if info.scheme != scheme or (bits != "auto" and info.bits != bits):
                failures.append(f"info says scheme {info.scheme}, {info.bits} bits: {case}")
            if sent != model:
                failures.append(f"bytes_sent {sent} != model {model}: {case}")
            if "max_count" in case and size > 1 and not calls > msgs > 0:
                failures.append(f"max_count did not split messages ({calls} calls, {msgs} messages): {case}")
            if "max_count" not in case and calls != msgs:
                failures.append(f"messages split without need ({calls} calls, {msgs} messages): {case}")
    return {"cases": done, "failures": failures}


def wire(comm, engine="numpy") -> dict:
    """Both wire formats, both schemes, on every grid of this rank count: C bit for bit equal to
    ozhpc.gemm, through certified "auto"'s extra passes (tests/test_certificate_pipeline.py's structured cases:
    equilibrated operands, support digits, wider plans), and bytes sent = the model's, exactly.
    ``engine`` "cutile": the GPU engine, transport "auto" (tests/test_shared_gpu.py: ranks sharing
    one GPU), against the NumPy engine's one-process bits."""
    import warnings

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/
    from test_certificate_pipeline import structured_cases

    rank = comm.Get_rank()
    named = structured_cases()
    named["inf/nan"] = operands(False, False, nonfinite=True)
    named["phi1 300x500x200"] = (standard_matrix(300, 500, 1.0, 21), standard_matrix(500, 200, 1.0, 22))
    failures, done, transports = [], 0, set()
    for scheme in ("ozaki1", "ozaki2"):
        for name in ("scaled", "sparse", "hard", "inf/nan") + (("phi1 300x500x200",) if engine != "numpy" else ()):
            A, B = named[name]
            (m, k), n = A.shape, B.shape[1]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ozhpc.AccuracyWarning)
                want, ref = ozhpc.gemm(A, B, scheme=scheme, engine="numpy", info=True)
            for grid_dims in GRIDS[comm.Get_size()]:
                for wire_format in ("fp64", "planes"):
                    with ProcessGrid(comm, grid_dims) as grid, \
                            Summa(grid, m, n, k, block=(3, 5) if m < 100 else (64, 32), kb=4 if k < 100 else 96,
                                  scheme=scheme, wire=wire_format, engine=engine) as summa:
                        a, bt, _ = summa.distribute(A, B)
                        whole = summa(a, bt).gather(0)
                        info = summa.info
                        sent = comm.reduce(info.bytes_sent, op=MPI.SUM, root=0)
                        transports.add(f"{info.transport}: {info.transport_reason}")
                    if rank:
                        continue
                    done += 1
                    p, q = grid_dims
                    case = f"{scheme} {name} {grid_dims} {wire_format}"
                    if sha256_of_matrix(whole) != sha256_of_matrix(want):
                        failures.append(f"bits differ: {case}")
                    if (info.certified, info.widths) != (ref.certified, ref.widths):
                        failures.append(f"certificate {info.widths} != {ref.widths}: {case}")
                    per_entry = [8] * len(info.pass_planes) if wire_format == "fp64" else info.pass_planes
                    if info.wire != wire_format or info.pass_bytes != per_entry:
                        failures.append(f"wire {info.wire}, bytes per entry {info.pass_bytes}: {case}")
                    if sent != sum(per_entry) * k * (m * (q - 1) + n * (p - 1)):
                        failures.append(f"bytes_sent {sent}: {case}")
    return {"cases": done, "failures": failures, "transports": sorted(transports)}


def io(comm, directory) -> dict:
    from ozhpc.run.runner import execute

    rank, size = comm.Get_rank(), comm.Get_size()
    src = os.path.join(directory, "in.h5")
    failures, done = [], 0
    runs = [dict(grid=g, block=b, transa=ta, transb=tb)
            for i, (g, b) in enumerate(itertools.product(GRIDS[size], [(1, 1), (5, 5), (17, 13), (64, 64)]))
            for ta, tb in [TRANS[i % 4]]]
    runs.append(dict(grid=None, block=(13, 13), transa=False, transb=True, alpha=2.0, beta=-1.0))
    runs.append(dict(grid=None, block=(17, 13), kb=9, transa=True, transb=False, scheme="ozaki2"))
    for i, run in enumerate(runs):
        ta, tb = run["transa"], run["transb"]
        alpha, beta = run.get("alpha", 1.0), run.get("beta", 0.0)
        scheme = run.get("scheme", "ozaki1")
        out = DatasetRef(os.path.join(directory, f"out{size}.h5"), f"/C{i}")
        cfg = RunConfig(a=DatasetRef(src, "/AT" if ta else "/A"), b=DatasetRef(src, "/BT" if tb else "/B"),
                        out=out, c=DatasetRef(src, "/C0") if beta else None, transa=ta, transb=tb,
                        alpha=alpha, beta=beta, grid=run["grid"], block=run["block"], engine="numpy",
                        scheme=scheme, panel=run.get("kb"), force=True, progress="off",
                        report=os.path.join(directory, f"run{size}_{i}.json"))
        report = execute(cfg, comm=comm)
        if rank == 0:
            done += 1
            import h5py

            with h5py.File(src, "r") as f:
                A, B = f["A"][...], f["B"][...]
                C0 = f["C0"][...] if beta else None
            with h5py.File(out.file, "r") as f:
                written = f[out.path][...]
                attr = f[out.path].attrs["ozhpc_sha256"]
                plan_attrs = {k: f[out.path].attrs.get(f"ozhpc_{k}") for k in ("scheme", "bits", "moduli")}
            ref = sha256_of_matrix(ozhpc.gemm(A, B, C0, alpha=alpha, beta=beta, scheme=scheme, engine="numpy"))
            if not (report["sha256"] == ref == sha256_of_matrix(written) == attr):
                failures.append(f"sha256 differs: {run}")
            if (plan_attrs["scheme"] != report["scheme"] or report["scheme"] != scheme
                    or plan_attrs["bits"] != report["bits"]
                    or (scheme == "ozaki2" and not plan_attrs["moduli"] == report["moduli"] == report["int8_gemms"])):
                failures.append(f"scheme/bits/moduli in report {report['scheme']}/{report['bits']}/"
                                f"{report['moduli']} and attributes {plan_attrs}: {run}")
            with open(cfg.report) as f:
                saved = json.load(f)
            if saved["sha256"] != ref or saved["ranks"] != size:
                failures.append(f"report content: {run}")
    leftovers = [n for n in os.listdir(directory) if n.endswith((".tmp", ".ozhpc-lock"))]
    if leftovers:
        failures.append(f"temporary files left: {leftovers}")
    return {"cases": done, "failures": failures}


def mismatch(comm) -> dict:
    """Rank 1 runs a differently named engine: every rank must raise the same InputError."""
    from ozhpc.engines.numpy_engine import NumpyEngine
    from ozhpc.errors import InputError

    class OtherEngine(NumpyEngine):
        name = "numpy-other"

    engine = OtherEngine() if comm.Get_rank() == 1 else "numpy"
    with ProcessGrid(comm, (1, comm.Get_size())) as grid:
        try:
            Summa(grid, 8, 8, 8, block=4, engine=engine)
            message = None
        except InputError as exc:
            message = str(exc)
    messages = comm.gather(message, root=0)
    failures = [] if comm.Get_rank() else [f"rank {r}: {m!r}" for r, m in enumerate(messages)
                                            if m is None or "different engines" not in m]
    return {"cases": 1, "failures": failures, "message": messages[0] if messages else None}


def complex_operands(mode_a, mode_b, kinds="cc", m=61, k=97, n=43):
    """A and B (complex or real by ``kinds``) stored so that op(A) is m x k and op(B) k x n."""
    def one(rows, cols, seed, kind):
        x = standard_matrix(rows, cols, 1.0, seed, complex=kind == "c")
        if kind == "c":
            x[2] = x[2].real   # a purely real row and a purely imaginary column
            x[:, 3] = 1j * x[:, 3].imag
        return x
    a, b = one(m, k, 31, kinds[0]), one(k, n, 32, kinds[1])
    return (a if mode_a == "N" else a.T.copy()), (b if mode_b == "N" else b.T.copy())


def complex_cases(ranks):
    out = []
    for gi, grid in enumerate(GRIDS[ranks]):
        for i, (block, kb, wire_format) in enumerate([(1, 5, "planes"), (5, 7, "fp64"), ((13, 5), 16, "planes"),
                                                      (17, None, "fp64")]):
            modes = [("N", "N"), ("C", "N"), ("T", "C"), ("N", "C")][(gi + i) % 4]
            out.append(dict(grid=grid, block=block, kb=kb, wire=wire_format, modes=modes, kinds="cc"))
        out.append(dict(grid=grid, block=7, kb=9, wire="planes", modes=("N", "N"), kinds="rc", alpha=1 - 2j,
                        beta=0.5j))
        out.append(dict(grid=grid, block=9, kb=11, wire="fp64", modes=("C", "T"), kinds="cr"))
        out.append(dict(grid=grid, block=(8, 3), kb=5, wire="planes", modes=("N", "N"), kinds="cc", scheme="ozaki1"))
    return out


def complex_summa(comm, directory) -> dict:
    """Complex products (mixed real/complex operands, ops N/T/C, complex alpha/beta, both schemes,
    both wires) on every grid of this rank count, then complex HDF5 runs through runner.execute:
    C bit for bit equal to one-process ozhpc.gemm, and the bytes sent the model's."""
    import h5py

    from ozhpc.run.runner import execute

    rank, size = comm.Get_rank(), comm.Get_size()
    failures, done, refs = [], 0, {}
    for case in complex_cases(size):
        ta, tb = case["modes"]
        alpha, beta, scheme = case.get("alpha", 1.0), case.get("beta", 0.0), case.get("scheme", "ozaki2")
        A, B = complex_operands(ta, tb, case["kinds"])
        m, k, n = 61, 97, 43
        C0 = standard_matrix(m, n, 0.5, 33, complex=True) if beta else None
        key = (ta, tb, case["kinds"], alpha, beta, scheme)
        if key not in refs:
            ref_c, ref_info = ozhpc.gemm(A, B, C0, alpha=alpha, beta=beta, transa=ta, transb=tb, scheme=scheme,
                                         engine="numpy", info=True)
            refs[key] = (sha256_of_matrix(ref_c), ref_info.certified, ref_info.worst_ratio)
        block = case["block"] if isinstance(case["block"], tuple) else (case["block"], case["block"])
        with ProcessGrid(comm, case["grid"]) as grid, \
                Summa(grid, m, n, k, block=block, kb=case["kb"], engine="numpy", scheme=scheme, wire=case["wire"],
                      complex=True) as summa:
            a, bt, c = summa.distribute(A, B, C0, transa=ta, transb=tb)
            whole = summa(a, bt, c, alpha=alpha, beta=beta).gather(0)
            info = summa.info
            sent = comm.reduce(info.bytes_sent, op=MPI.SUM, root=0)
        if rank == 0:
            done += 1
            p, q = case["grid"]
            if whole.dtype != np.complex128 or sha256_of_matrix(whole) != refs[key][0]:
                failures.append(f"bits differ: {case}")
            if (info.certified, info.worst_ratio) != refs[key][1:]:   # the certificate's global facts too
                failures.append(f"certified {info.certified}, worst ratio {info.worst_ratio} != {refs[key][1:]}: {case}")
            per_entry = [16] * len(info.pass_planes) if case["wire"] == "fp64" else info.pass_planes
            if not info.complex or info.pass_bytes != per_entry:
                failures.append(f"complex {info.complex}, bytes per entry {info.pass_bytes}: {case}")
            if sent != sum(per_entry) * k * (m * (q - 1) + n * (p - 1)):
                failures.append(f"bytes_sent {sent}: {case}")
    src = os.path.join(directory, "zin.h5")
    if rank == 0:
        with h5py.File(src, "w") as f:
            for name, (x, _) in (("A", complex_operands("N", "N")), ("AH", complex_operands("C", "N"))):
                f[name] = x
            f["B"] = complex_operands("N", "N")[1]
            f["C0"] = standard_matrix(61, 43, 0.5, 33, complex=True)
    comm.Barrier()
    runs = [dict(grid=g, block=b, a="A", transa="N") for g, b in zip(GRIDS[size], [(5, 5), (17, 13), (64, 64)])]
    runs.append(dict(grid=None, block=(13, 7), kb=9, a="AH", transa="C", alpha=2 - 1j, beta=0.25, wire="planes"))
    for i, run in enumerate(runs):
        alpha, beta = run.get("alpha", 1.0), run.get("beta", 0.0)
        out = DatasetRef(os.path.join(directory, f"zout{size}.h5"), f"/C{i}")
        cfg = RunConfig(a=DatasetRef(src, "/" + run["a"]), b=DatasetRef(src, "/B"), out=out,
                        c=DatasetRef(src, "/C0") if beta else None, transa=run["transa"], alpha=alpha, beta=beta,
                        grid=run["grid"], block=run["block"], panel=run.get("kb"), wire=run.get("wire", "auto"),
                        engine="numpy", force=True, progress="off")
        report = execute(cfg, comm=comm)
        if rank == 0:
            done += 1
            with h5py.File(src, "r") as f:
                A, B, C0 = f[run["a"]][...], f["B"][...], f["C0"][...]
            with h5py.File(out.file, "r") as f:
                written, attrs = f[out.path][...], dict(f[out.path].attrs)
            ref = sha256_of_matrix(ozhpc.gemm(A, B, C0, alpha=alpha, beta=beta, transa=run["transa"], engine="numpy"))
            if not (written.dtype == np.complex128 and report["sha256"] == ref == sha256_of_matrix(written)
                    == attrs["ozhpc_sha256"]):
                failures.append(f"sha256 differs: {run}")
            if not (report["complex"] and attrs["ozhpc_complex"] and attrs["ozhpc_transa"] == {"N": False, "C": "C"}[run["transa"]]
                    and complex(attrs["ozhpc_alpha"]) == alpha):
                failures.append(f"report / attributes: {run}")
    return {"cases": done, "failures": failures}


PINNED_LAYOUTS = [dict(block=(5, 5)), dict(block=(13, 7), kb=4), dict(block=(64, 64), kb=64)]


def pinned(comm, grid_text) -> dict:
    """SHA-256 of C for every case of tests/helpers/pinned_cases.py on one grid, three block/panel sizes."""
    from pinned_cases import CASES, M, N, K, gemm_kwargs, operands

    dims = tuple(int(x) for x in grid_text.split("x"))
    digests, done = {}, 0
    for name, case in CASES.items():
        A, B, C0 = operands(case)
        kw = gemm_kwargs(case)
        alpha, beta = kw.pop("alpha", 1.0), kw.pop("beta", 0.0)
        ta, tb = kw.pop("transa", False), kw.pop("transb", False)
        for layout in PINNED_LAYOUTS:
            with ProcessGrid(comm, dims) as grid:
                with Summa(grid, M, N, K, engine="numpy", **layout, **kw) as summa:
                    a, bt, c = summa.distribute(A, B, C0, transa=ta, transb=tb)
                    whole = summa(a, bt, c, alpha=alpha, beta=beta).gather(0)
            if comm.Get_rank() == 0:
                digests.setdefault(name, []).append(sha256_of_matrix(whole))
                done += 1
    return {"cases": done, "failures": [], "digests": digests}


ANYINPUT_LAYOUTS = [dict(block=(3, 2), kb=2), dict(block=(5, 7), kb=3, wire="fp64")]


def anyinput(comm) -> dict:
    """tests/helpers/anyinput_cases.py (inputs no single scale per row reaches) on every grid of
    this rank count, two layouts, both schemes and guarantees: certified, C bit for bit equal to
    ozhpc.gemm's, with the same levels and counts (the levels and exact dots of a rank's entries
    read whole rows on the whole block's k indices, agreed)."""
    from anyinput_cases import cases as anyinput_cases

    failures, done = [], 0
    for name, (A, B) in sorted(anyinput_cases().items()):
        for scheme, guarantee in itertools.product(("ozaki1", "ozaki2"), ("dgemm", "tight")):
            ref, ref_info = ozhpc.gemm(A, B, engine="numpy", scheme=scheme, guarantee=guarantee, info=True)
            for dims, layout in itertools.product(GRIDS[comm.Get_size()], ANYINPUT_LAYOUTS):
                m, k = A.shape
                with ProcessGrid(comm, dims) as grid:
                    with Summa(grid, m, B.shape[1], k, engine="numpy", scheme=scheme, guarantee=guarantee,
                               **layout) as summa:
                        a, bt, c = summa.distribute(A, B, None)
                        out = summa(a, bt, c)
                        whole, info = out.gather(0), summa.info
                done += 1
                counts = (info.levels, info.refined_entries, info.exact_entries)
                if comm.Get_rank() == 0 and (not (info.certified and ref_info.certified)
                                             or counts != (ref_info.levels, ref_info.refined_entries,
                                                           ref_info.exact_entries)
                                             or sha256_of_matrix(whole) != sha256_of_matrix(ref)):
                    failures.append(f"{name} {scheme} {guarantee} {dims} {layout}: certified {info.certified}, "
                                    f"levels, refined, exact {counts}")
    return {"cases": done, "failures": failures}


def in_fact(comm) -> dict:
    """Sparse, banded and triangular operands (the in-fact check's passes: the certificate's sharper
    bounds, wider plans) on every grid of this rank count, both schemes: C bit for bit equal to
    ozhpc.gemm's, and the same plans run."""
    rng = np.random.default_rng(5)
    i, j = np.indices((40, 40))
    band = lambda: np.where(np.abs(i - j) <= 2, rng.standard_normal((40, 40)), 0.0)
    sparse = lambda shape: np.where(rng.random(shape) < 0.05, rng.standard_normal(shape) * np.exp(rng.standard_normal(shape)), 0.0)
    cases = {"sparse": (sparse((20, 96)), sparse((96, 18))), "banded": (band(), band()),
             "L U": (np.tril(rng.standard_normal((40, 40))) + 40 * np.eye(40), np.triu(rng.standard_normal((40, 40))))}
    failures, done = [], 0
    for name, (A, B) in sorted(cases.items()):
        for scheme in ("ozaki1", "ozaki2"):
            ref, ref_info = ozhpc.gemm(A, B, engine="numpy", scheme=scheme, info=True)
            for dims, layout in itertools.product(GRIDS[comm.Get_size()], ANYINPUT_LAYOUTS):
                m, k = A.shape
                with ProcessGrid(comm, dims) as grid:
                    with Summa(grid, m, B.shape[1], k, engine="numpy", scheme=scheme, **layout) as summa:
                        a, bt, c = summa.distribute(A, B, None)
                        whole, info = summa(a, bt, c).gather(0), summa.info
                done += 1
                if comm.Get_rank() == 0 and (sha256_of_matrix(whole) != sha256_of_matrix(ref)
                                             or [w[0] for w in info.widths] != [w[0] for w in ref_info.widths]):
                    failures.append(f"{name} {scheme} {dims} {layout}: widths {info.widths} vs {ref_info.widths}")
    return {"cases": done, "failures": failures}


def main() -> int:
    comm = MPI.COMM_WORLD
    mode = sys.argv[1]
    if mode == "io":
        result = io(comm, sys.argv[2])
    elif mode == "complex":
        result = complex_summa(comm, sys.argv[2])
    elif mode == "wire":
        result = wire(comm, *sys.argv[2:3])
    elif mode == "pinned":
        result = pinned(comm, sys.argv[2])
    else:
        result = {"repro": repro, "mismatch": mismatch, "anyinput": anyinput, "infact": in_fact}[mode](comm)
    if comm.Get_rank() == 0:
        print(json.dumps(result))
    ok = comm.bcast(not result["failures"] if comm.Get_rank() == 0 else None, root=0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
