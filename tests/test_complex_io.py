"""Complex matrices in and out of HDF5 (h5py's compound of ``r`` and ``i``): ``ozhpc gen --complex``,
distributed reads and writes, the SHA-256 and the fingerprint, for any rank count."""
import os

import h5py
import numpy as np
import pytest

from ozhpc.run.fingerprint import fingerprint_matrix, lane_sums
from ozhpc.io import h5io
from ozhpc.io.checksum import sha256_of_matrix
from ozhpc.run.matrices import ROW_CHUNK, standard_matrix

from conftest import run_cli
from test_gen_check import ozhpc_mpi, read


def test_complex_standard_matrix_extends_the_real_one():
    z = standard_matrix(3 * ROW_CHUNK // 2, 9, 0.5, 4, complex=True)
    assert z.dtype == np.complex128
    assert np.array_equal(z.real, standard_matrix(3 * ROW_CHUNK // 2, 9, 0.5, 4))
    assert not np.array_equal(z.imag, z.real) and np.abs(z.imag).max() > 0


def test_fingerprint_of_a_complex_matrix():
    """Any split into blocks gives the same sums; a complex matrix never shares a fingerprint with
    its parts laid out as a real matrix, nor with its conjugate."""
    z = standard_matrix(40, 11, 1.0, 2, complex=True)
    whole = fingerprint_matrix(z)
    parts = [lane_sums(z[r0:r1, c0:c1], np.arange(r0, r1), np.arange(c0, c1))
             for r0, r1 in ((0, 13), (13, 40)) for c0, c1 in ((0, 4), (4, 11))]
    from ozhpc.run.fingerprint import add_sums, finish
    assert finish(add_sums(*parts), z.shape, complex=True) == whole
    assert whole != fingerprint_matrix(z.view(np.float64))
    assert whole != fingerprint_matrix(np.conj(z))
    assert fingerprint_matrix(z.real) == fingerprint_matrix(standard_matrix(40, 11, 1.0, 2))


@pytest.mark.mpi
def test_gen_complex_is_the_same_for_any_rank_count(tmp_path):
    m, n = ROW_CHUNK + 77, 13
    want = standard_matrix(m, n, 0.5, 7, complex=True)
    for ranks in (0, 1, 3):
        out = tmp_path / f"g{ranks}.h5"
        r = ozhpc_mpi(ranks, ["gen", "--complex", "--shape", f"{m}x{n}", "--seed", "7", f"{out}:/Z"])
        assert r.returncode == 0, r.stderr
        assert "complex test matrix" in r.stdout
        got, attrs = read(out, "Z")
        assert got.dtype == np.complex128 and got.tobytes() == want.tobytes()
        assert attrs["ozhpc_fingerprint"] == fingerprint_matrix(want)
        assert attrs["ozhpc_sha256"] == sha256_of_matrix(want)
        with h5py.File(out, "r") as f:   # h5py's complex: a compound of float64 r and i
            assert f["Z"].id.get_type().get_nmembers() == 2
        r = run_cli(["fingerprint", f"{out}:/Z"])
        assert r.returncode == 0 and r.stdout.split()[0] == fingerprint_matrix(want)


def test_complex_datasets_are_inputs(tmp_path):
    path = str(tmp_path / "c.h5")
    z = standard_matrix(5, 4, 0.5, 1, complex=True)
    with h5py.File(path, "w") as f:
        f["Z"] = z
        f["Z64"] = z.astype(np.complex64)
        f["S"] = np.array([["a", "b"]], dtype="S1")
    assert h5io.dataset_info(h5io.DatasetRef(path, "/Z")) == ((5, 4), np.dtype(np.complex128))
    with h5py.File(path, "r") as f:
        assert h5io.exact_float64(f["Z64"][...], "Z64").dtype == np.complex128
        assert np.array_equal(h5io.exact_float64(f["Z"][...], "Z"), z)
    with pytest.raises(h5io.InputError, match="must hold real or complex numbers"):
        h5io.dataset_info(h5io.DatasetRef(path, "/S"))


def test_complex_blocks_round_trip(tmp_path):
    """Block-cyclic reads and the safe write keep every bit of both parts (one process)."""
    from ozhpc.io.distio import read_distributed, write_distributed
    from ozhpc.parallel import ProcessGrid
    from ozhpc.parallel.layout import BlockCyclic
    from ozhpc.parallel.mpi import MPI

    z = standard_matrix(37, 29, 2.0, 5, complex=True)
    z[3, 4] = complex(np.inf, -0.0)
    src = tmp_path / "in.h5"
    with h5py.File(src, "w") as f:
        f["Z"] = z
    with ProcessGrid(MPI.COMM_WORLD, (1, 1)) as grid:
        for transpose in (False, True):
            shape = z.shape[::-1] if transpose else z.shape
            d = read_distributed(h5io.DatasetRef(str(src), "/Z"), grid, BlockCyclic(*shape, 5, 7, 1, 1),
                                 transpose=transpose)
            assert d.local.dtype == np.complex128
            assert d.local.tobytes() == np.ascontiguousarray(z.T if transpose else z).tobytes()
        digest = write_distributed(h5io.DatasetRef(str(tmp_path / "out.h5"), "/C"), d)
    got, attrs = read(tmp_path / "out.h5", "C")
    assert got.tobytes() == np.ascontiguousarray(z.T).tobytes()
    assert digest == attrs["ozhpc_sha256"] == sha256_of_matrix(z.T)
    assert not [p for p in os.listdir(tmp_path) if "tmp" in p]


def test_check_a_complex_product(tmp_path):
    """``ozhpc check`` on complex data: exact components, conjugate transposes, complex alpha and beta;
    a changed imaginary part fails it."""
    from ozhpc.run.check import failures, zgemm_bound
    from ozhpc.commands.check import check, check_lines

    a, b = standard_matrix(9, 6, 1.0, 1, complex=True), standard_matrix(9, 5, 1.0, 2, complex=True)
    c0 = standard_matrix(6, 5, 0.5, 3, complex=True)
    alpha, beta = 0.5 - 2j, 1j
    c = alpha * (a.conj().T @ b) + beta * c0
    path = str(tmp_path / "p.h5")
    with h5py.File(path, "w") as f:
        f["A"], f["B"], f["C0"], f["C"] = a, b, c0, c
        bad = c.copy()
        bad[2, 3] += 1e-9j
        f["BAD"] = bad
    ref = lambda name: h5io.DatasetRef(path, f"/{name}")   # noqa: E731
    stats = check(ref("C"), ref("A"), ref("B"), c=ref("C0"), alpha=alpha, beta=beta, transa="C", samples=30)
    assert stats["complex"] and stats["bound"] == zgemm_bound(9) and not failures(stats)
    assert stats["max_rel_error"] < 1e-15 and stats["native_max_rel_error"] < 1e-15
    assert "complex FP64 GEMM" in "\n".join(check_lines(stats, alpha, beta))
    stats = check(ref("BAD"), ref("A"), ref("B"), c=ref("C0"), alpha=alpha, beta=beta, transa="C", samples=30)
    assert stats["outside_bound"] == 1 and failures(stats)
    # the transpose without conjugation is another product: far outside
    stats = check(ref("C"), ref("A"), ref("B"), c=ref("C0"), alpha=alpha, beta=beta, transa="T", samples=30)
    assert stats["outside_bound"] == 30
