"""The commands' work from Python, without argparse (ozhpc/commands/): what `ozhpc gen`,
`gemm`, `fingerprint`, `check` and `info` do, with the same files and figures as the command line."""
import h5py
import numpy as np
import pytest

from ozhpc.commands.check import check, check_lines
from ozhpc.commands.fingerprint import fingerprint
from ozhpc.commands.gemm import gemm
from ozhpc.commands.gen import gen
from ozhpc.commands.info import info_lines
from ozhpc.errors import InputError
from ozhpc.io.h5io import DatasetRef
from ozhpc.run.check import failures
from ozhpc.run.config import RunConfig
from ozhpc.run.fingerprint import fingerprint_matrix
from ozhpc.run.matrices import standard_matrix

from conftest import run_cli


def ref(path, name):
    return DatasetRef(str(path), name)


def test_gen_gemm_fingerprint_check_from_python(tmp_path):
    src, out = tmp_path / "in.h5", tmp_path / "out.h5"
    assert gen(ref(src, "/A"), (40, 24), phi=1.0, seed=3) == f"wrote 40x24 test matrix (phi=1.0, seed=3) to {src}:/A"
    gen(ref(src, "/B"), (24, 16), seed=4)
    with h5py.File(src, "r") as f:
        a = f["/A"][...]
    assert np.array_equal(a, standard_matrix(40, 24, 1.0, 3))

    report = gemm(RunConfig(a=ref(src, "/A"), b=ref(src, "/B"), out=ref(out, "/C"), engine="numpy", progress="off"))
    with h5py.File(out, "r") as f:
        c = f["/C"][...]
    assert report["fingerprint"] == fingerprint(ref(out, "/C")) == fingerprint_matrix(c)

    stats = check(ref(out, "/C"), ref(src, "/A"), ref(src, "/B"), samples=16, fingerprint=True)
    assert stats["samples"] == 16 and stats["outside_bound"] == 0 and stats["fingerprint_matches"] is True
    assert failures(stats) == []
    lines = check_lines(stats)
    assert lines[0] == "16 entries checked exactly; error = |C - exact| / (|A||B|)"
    assert lines[-1] == f"  fingerprint {report['fingerprint']}: matches its attribute"


def test_python_and_command_line_print_the_same(tmp_path):
    src = tmp_path / "in.h5"
    gen(ref(src, "/A"), (20, 20), seed=1)
    gen(ref(src, "/B"), (20, 20), seed=2)
    out = tmp_path / "out.h5"
    assert run_cli(["gemm", f"{src}:/A", f"{src}:/B", "-o", f"{out}:/C", "--engine", "numpy"]).returncode == 0
    done = run_cli(["check", f"{out}:/C", "--a", f"{src}:/A", "--b", f"{src}:/B", "--samples", "9"])
    stats = check(ref(out, "/C"), ref(src, "/A"), ref(src, "/B"), samples=9)
    assert (done.returncode, done.stdout) == (0, "\n".join(check_lines(stats)) + "\n")
    done = run_cli(["fingerprint", f"{out}:/C"])
    assert done.stdout == f"{fingerprint(ref(out, '/C'))}  {out}:/C\n"


def test_a_refusal_is_an_input_error_and_writes_nothing(tmp_path):
    with pytest.raises(InputError, match="^input file .*missing.h5. does not exist$"):
        fingerprint(ref(tmp_path / "missing.h5", "/C"))
    src = tmp_path / "in.h5"
    gen(ref(src, "/A"), (8, 8))
    before = src.read_bytes()
    with pytest.raises(InputError):
        gen(ref(src, "/A"), (8, 8), seed=5)  # exists, no force
    assert src.read_bytes() == before


def test_info_lines_one_process():
    lines = info_lines()
    assert lines[0].startswith("ozhpc ") and "MPI ranks: 1 on 1 node(s)" in lines
    assert any(line.startswith("engine numpy: ") for line in lines)


def test_an_unavailable_engine_is_said_in_sentences():
    """``engine 'x' is not available: WHY. HINT``: the hint starts a sentence of its own."""
    from ozhpc.engines import INSTALL_HINT, EngineUnavailable, get_engine

    try:
        get_engine("cutile")
    except EngineUnavailable as exc:
        why, hint = str(exc).rsplit(". ", 1)
        assert why.startswith("engine 'cutile' is not available: ") and hint == INSTALL_HINT["cutile"]
        assert hint[0].isupper()
    else:
        pytest.skip("the cutile engine runs here")


def test_an_unavailable_engine_is_tried_once_per_process(monkeypatch):
    """A failed import is not cached by Python: "auto" must not retry it on every call."""
    import importlib

    from ozhpc import engines

    try:
        engines.get_engine("cutile")
    except engines.EngineUnavailable as first:
        tried = []
        real = importlib.import_module
        monkeypatch.setattr(importlib, "import_module", lambda name, *a: tried.append(name) or real(name, *a))
        with pytest.raises(engines.EngineUnavailable) as again:
            engines.get_engine("cutile")
        assert str(again.value) == str(first) and tried == []
        assert engines.get_engine("auto").name == "numpy" and tried == ["ozhpc.engines.numpy_engine"]
    else:
        pytest.skip("the cutile engine runs here")
