"""ozhpc's store of compiled cuTile kernels (``ozhpc/engines/kernel_store.py``).

CPU: cuda.tile's compile step is replaced by a counting fake, so these tests check the store's
own logic (keys, hits, damaged files, concurrency-safe writes, off switch). GPU: two fresh
processes run the same product; the second compiles nothing and gives the same bits.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

ct = pytest.importorskip("cuda.tile")

from ozhpc.engines import kernel_store as ks  # noqa: E402
from ozhpc.engines import cutile as ck  # noqa: E402

SPLIT, RESIDUE, CRT, PAIR = (ck.KERNELS[name] for name in ("split", "residue", "crt", "pair"))

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def compiled(monkeypatch, tmp_path):
    """cuda.tile's compile replaced by a fake that counts calls; a fresh store in tmp_path."""
    calls = []

    def fake(self, signature, context, compute_capability=None):
        calls.append((self._pyfunc.__name__, signature, compute_capability))
        return b"CUBIN:" + repr(signature).encode(), f"sym_{self._pyfunc.__name__}", None, ()

    monkeypatch.setattr(ct.kernel, "_compile", fake)
    monkeypatch.setenv(ks.TILE_CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(ks, "_STORE", {})
    return calls


def test_second_compile_is_served_from_the_store(compiled, tmp_path):
    k = SPLIT
    first = k._compile("sig-a", None, (9, 0))
    second = k._compile("sig-a", None, (9, 0))
    assert first == second == (b"CUBIN:'sig-a'", "sym__split_kernel", None, ())
    assert len(compiled) == 1
    store = ks.active_store()
    assert (store.hits, store.misses) == (1, 1)
    assert store.compiled == ["_split_kernel('sig-a')"]
    files = [f for _, _, fs in os.walk(tmp_path / ks.SUBDIR) for f in fs]
    assert len(files) == 1 and files[0].endswith(".cubin")


def test_a_new_process_store_object_reads_the_same_files(compiled, monkeypatch):
    SPLIT._compile("sig-a", None, (9, 0))
    monkeypatch.setattr(ks, "_STORE", {})          # as a new process would start
    assert SPLIT._compile("sig-a", None, (9, 0))[0] == b"CUBIN:'sig-a'"
    assert len(compiled) == 1


@pytest.mark.parametrize("other", [
    ("sig-b", (9, 0), "split"),        # another signature (types, constants, layout)
    ("sig-a", (10, 0), "split"),       # another architecture
    ("sig-a", (9, 0), "residue"),      # another kernel
])
def test_every_part_of_the_variant_is_in_the_key(compiled, other):
    SPLIT._compile("sig-a", None, (9, 0))
    sig, cap, name = other
    out = ck.KERNELS[name]._compile(sig, None, cap)
    assert len(compiled) == 2 and out[1] == f"sym_{ck.KERNELS[name]._pyfunc.__name__}"


def test_kernels_of_the_same_name_in_two_modules_have_two_keys(compiled, monkeypatch):
    """The key names the kernel's module too: two ops' modules may each define a ``_kernel``."""
    SPLIT._compile("sig-a", None, (9, 0))
    monkeypatch.setattr(SPLIT._pyfunc, "__module__", "ozhpc.engines.cutile.other")
    SPLIT._compile("sig-a", None, (9, 0))
    assert len(compiled) == 2


def test_hints_and_the_compiler_are_in_the_key(compiled, monkeypatch):
    CRT._compile("sig", None, (9, 0))
    CRT.replace_hints(occupancy=2)._compile("sig", None, (9, 0))
    assert len(compiled) == 2
    store = ks.active_store()
    monkeypatch.setattr(store, "_fixed", "another tileiras")
    CRT._compile("sig", None, (9, 0))
    assert len(compiled) == 3


def test_variants_are_described_by_what_cutile_specialises_on():
    compilation = pytest.importorskip("cuda.tile.compilation")
    array = compilation.ArrayConstraint(ct.float64, 2, index_dtype=ct.int32, stride_lower_bound_incl=0,
                                        alias_groups=(), may_alias_internally=False, stride_constant=(None, 1),
                                        stride_divisible_by=(2, 1), shape_divisible_by=(16, 1),
                                        base_addr_divisible_by=16)
    sig = compilation.KernelSignature([array, compilation.ScalarConstraint(ct.int32), 8, True],
                                      compilation.CallingConvention.cutile_python_v2())
    assert ks.describe_variant("k", sig) == "k(float64 2d extents%16:6_ strides:a1, scalar, 8, True)"


def test_any_change_in_the_kernels_package_is_a_new_key(tmp_path, monkeypatch):
    """Kernels compile in constants of other modules (e.g. the digit bits in engines/digits.py, the
    tile maths in engines/cutile/), so the digest covers every module of the engines package and
    its subpackages, not only the kernel's own file."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "kernels.py").write_text("K = 1\n")
    (pkg / "base.py").write_text("BITS = 7\n")
    monkeypatch.setattr(ks, "_DIGESTS", {})
    first = ks.package_digest(str(pkg))
    (pkg / "base.py").write_text("BITS = 8\n")
    monkeypatch.setattr(ks, "_DIGESTS", {})
    assert ks.package_digest(str(pkg)) != first
    (pkg / "notes.txt").write_text("not a module")
    monkeypatch.setattr(ks, "_DIGESTS", {})
    second = ks.package_digest(str(pkg))
    (pkg / "notes.txt").write_text("changed")
    monkeypatch.setattr(ks, "_DIGESTS", {})
    assert ks.package_digest(str(pkg)) == second
    (pkg / "sub").mkdir()
    (pkg / "sub" / "tile_math.py").write_text("TWO = 2\n")
    monkeypatch.setattr(ks, "_DIGESTS", {})
    third = ks.package_digest(str(pkg))
    assert third != second
    (pkg / "sub" / "tile_math.py").write_text("TWO = 3\n")
    monkeypatch.setattr(ks, "_DIGESTS", {})
    assert ks.package_digest(str(pkg)) != third
    engines = os.path.dirname(os.path.dirname(ck.__file__))
    assert ks.ENGINES_DIR == engines
    assert {k.source_digest for k in ck.KERNELS.values()} == {ks.package_digest(engines)}


def test_replace_hints_keeps_the_store_and_the_hints():
    k = PAIR.replace_hints(occupancy=3)
    assert isinstance(k, ks.StoredKernel)
    assert k._compiler_options.occupancy == 3
    assert k._compiler_options.num_ctas == PAIR._compiler_options.num_ctas


def test_a_damaged_file_is_compiled_again_and_rewritten(compiled, tmp_path, caplog):
    SPLIT._compile("sig-a", None, (9, 0))
    [path] = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path / ks.SUBDIR) for f in fs]
    blob = open(path, "rb").read()
    with open(path, "wb") as f:                   # a flipped byte in the cubin
        f.write(blob[:-1] + bytes([blob[-1] ^ 1]))
    out = SPLIT._compile("sig-a", None, (9, 0))
    assert out[0] == b"CUBIN:'sig-a'" and len(compiled) == 2
    assert "damaged" in caplog.text
    assert open(path, "rb").read() == blob        # rewritten whole
    with open(path, "wb") as f:                   # truncated in the header
        f.write(blob[:10])
    assert SPLIT._compile("sig-a", None, (9, 0))[0] == b"CUBIN:'sig-a'"
    assert len(compiled) == 3


def test_files_carry_symbol_and_checksum(compiled, tmp_path):
    SPLIT._compile("sig-a", None, (9, 0))
    [path] = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path / ks.SUBDIR) for f in fs]
    blob = open(path, "rb").read()
    assert blob.startswith(ks.MAGIC)
    header, _, cubin = blob[len(ks.MAGIC):].partition(b"\n")
    assert json.loads(header)["symbol"] == "sym__split_kernel" and cubin == b"CUBIN:'sig-a'"
    assert not [f for f in os.listdir(os.path.dirname(path)) if f.startswith(".tmp-")]


@pytest.mark.parametrize("cache", ["off", "0", ""])
def test_cache_off_means_no_store(compiled, monkeypatch, tmp_path, cache):
    monkeypatch.setenv(ks.TILE_CACHE_ENV, cache)
    SPLIT._compile("sig-a", None, (9, 0))
    SPLIT._compile("sig-a", None, (9, 0))
    assert len(compiled) == 2 and not (tmp_path / ks.SUBDIR).exists()


def test_another_cuda_tile_release_compiles_the_usual_way(compiled, monkeypatch, tmp_path):
    monkeypatch.setattr(ct, "__version__", "9.0.0", raising=False)
    SPLIT._compile("sig-a", None, (9, 0))
    SPLIT._compile("sig-a", None, (9, 0))
    assert len(compiled) == 2 and not (tmp_path / ks.SUBDIR).exists()


def test_an_unwritable_store_only_costs_a_compile(compiled, monkeypatch, tmp_path, caplog):
    (tmp_path / ks.SUBDIR).write_text("a file where the directory should be")
    assert SPLIT._compile("sig-a", None, (9, 0))[0] == b"CUBIN:'sig-a'"
    assert SPLIT._compile("sig-a", None, (9, 0))[0] == b"CUBIN:'sig-a'"
    assert len(compiled) == 2 and "cannot write" in caplog.text


CHILD = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np
    import ozhpc
    from ozhpc.engines import kernel_store
    from ozhpc.run.matrices import standard_matrix
    a, b = standard_matrix(300, 280, 0.5, 1), standard_matrix(280, 260, 0.5, 2)
    out = {}
    for scheme in ("ozaki1", "ozaki2"):
        c = ozhpc.gemm(a, b, engine="cutile", scheme=scheme)
        out[scheme] = hashlib.sha256(np.ascontiguousarray(c).tobytes()).hexdigest()
    store = kernel_store.active_store()
    print(json.dumps({"hits": store.hits, "misses": store.misses, **out}))
""")


@pytest.mark.gpu
def test_a_second_process_compiles_nothing_and_gives_the_same_bits(gpu, tmp_path):
    env = dict(os.environ, CUDA_TILE_CACHE_DIR=str(tmp_path),
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert runs[0]["misses"] > 0
    assert runs[1]["misses"] == 0 and runs[1]["hits"] == runs[0]["misses"] + runs[0]["hits"]
    assert runs[1]["ozaki1"] == runs[0]["ozaki1"] and runs[1]["ozaki2"] == runs[0]["ozaki2"]


@pytest.mark.gpu
def test_after_warmup_no_size_compiles_a_kernel(gpu, tmp_path):
    """``ozhpc warmup`` covers every size: extents that are multiples of 16 and extents that are not."""
    from conftest import run_cli

    cache = tmp_path / "kc"
    r = run_cli(["warmup", "--cache-dir", cache], timeout=1200)
    assert r.returncode == 0, r.stderr
    a = tmp_path / "in.h5"
    for shape, seed, name in (("512x640", 1, "A"), ("640x384", 2, "B"), ("333x517", 3, "R"), ("517x259", 4, "S")):
        assert run_cli(["gen", "--shape", shape, "--seed", seed, f"{a}:/{name}"]).returncode == 0
    for x, y, scheme in (("A", "B", "ozaki1"), ("A", "B", "ozaki2"), ("R", "S", "ozaki1"), ("R", "S", "ozaki2")):
        report = tmp_path / f"{x}{scheme}.json"
        r = run_cli(["gemm", f"{a}:/{x}", f"{a}:/{y}", "-o", f"{tmp_path / 'c.h5'}:/{x}{scheme}", "--engine", "cutile",
                     "--scheme", scheme, "--cache-dir", cache, "--report", report], timeout=600)
        assert r.returncode == 0, r.stderr
        kernels = json.loads(report.read_text())["kernels"]
        assert kernels["compiled"] == 0 and kernels["from_store"] > 0, (x, scheme, kernels)
        assert kernels["compiled_variants"] == []
        assert "0 compiled" in r.stdout
