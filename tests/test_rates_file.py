"""``ozhpc plan --calibrate``'s rates file: it lives in the config directory ($XDG_CONFIG_HOME/ozhpc),
is written atomically without following a planted link, and is believed only where no other user
could have written it; a file that cannot be believed is ignored with one line (plan) or refused
(--calibrate), never a traceback."""
from __future__ import annotations

import json
import os
import stat

import pytest

from conftest import run_cli
from ozhpc.commands.plan import calibrate
from ozhpc.errors import InputError

PLAN = ["plan", "--m", "2048", "--n", "2048", "--k", "2048", "--gpus", "2", "--gpu", "cpu"]
RATES = {"cpu": {"pair_ops": 1e12, "split_rate": 1e9, "host": "n1", "date": "d", "engine": "numpy"}}
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="another user's file needs root (chown)")


def _env(config):
    """XDG_CONFIG_HOME at ``config``; the kernel cache (the file's former home) is its ozhpc/ too,
    so that a check that only moved the file would still be caught."""
    return {"XDG_CONFIG_HOME": str(config), "OZHPC_CACHE_DIR": str(config / "ozhpc")}


def _rates_dir(tmp_path):
    d = tmp_path / "ozhpc"
    d.mkdir(mode=0o700)
    return d


def _ignored(r, why: str):
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("ozhpc plan: warning: ignoring the rates file: "), r.stderr
    assert why in r.stderr and r.stderr.endswith("; the table's rates are used\n"), r.stderr
    assert "rates: calibrated" not in r.stdout


def test_calibrate_records_in_the_config_directory(tmp_path):
    """The rates go to $XDG_CONFIG_HOME/ozhpc/planner_rates.json (0600 in a 0700 directory), not
    into the kernel cache, and the command says where."""
    r = run_cli(PLAN + ["--calibrate"], env={"XDG_CONFIG_HOME": str(tmp_path / "config"),
                                             "OZHPC_CACHE_DIR": str(tmp_path / "cache")}, timeout=300)
    assert r.returncode == 0, r.stderr
    rates = tmp_path / "config" / "ozhpc" / "planner_rates.json"
    assert stat.S_IMODE(rates.stat().st_mode) == 0o600 and stat.S_IMODE(rates.parent.stat().st_mode) == 0o700
    assert set(json.loads(rates.read_text())) == {"cpu"} and not (tmp_path / "cache").exists()
    assert r.stdout.splitlines()[0].endswith(f"; recorded in {rates}")
    assert "rates: calibrated on " in r.stdout and r.stdout.splitlines()[-1].endswith(f"; recorded in {rates}")


def test_calibrate_refuses_a_planted_link_and_leaves_its_target(tmp_path):
    """A link at the rates file's name (a link another user planted, or one of this user's): one
    line, exit 2, before any compute; neither the link nor its target changes."""
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    rates = _rates_dir(tmp_path) / "planner_rates.json"
    rates.symlink_to(victim)
    r = run_cli(PLAN + ["--calibrate"], env=_env(tmp_path), timeout=300)
    assert r.returncode == 2 and r.stderr == (f"ozhpc plan: error: --calibrate records nothing: {rates} is a symbolic "
                                              "link; use a directory and file only you can write (move the file "
                                              "away)\n"), r.stderr
    assert victim.read_text() == "keep me" and rates.is_symlink()


def test_config_directory_made_private(tmp_path):
    """Missing directories are created 0700, whatever the umask lets the group do."""
    from ozhpc.run.private_files import write_private

    old = os.umask(0o002)
    try:
        write_private(str(tmp_path / "a" / "b" / "f.json"), b"{}")
    finally:
        os.umask(old)
    assert {stat.S_IMODE((tmp_path / d).stat().st_mode) for d in ("a", "a/b")} == {0o700}


@pytest.mark.parametrize("content,why", [
    ("{not json", "is not a rates file (not JSON"),
    ('{"cpu": 5}', "entry 'cpu' is not a device of --gpu"),
    ('[1, 2]', "not a JSON object"),
    ('{"cpu": {"pair_ops": "fast", "split_rate": 1}}', "cpu.pair_ops is not a rate from 1 to 1e+30 per second"),
    ('{"cpu": {"pair_ops": 0, "split_rate": 1}}', "cpu.pair_ops is not a rate from 1 to 1e+30 per second"),
    ('{"cpu": {"pair_ops": 1e400, "split_rate": 1}}', "cpu.pair_ops is not a rate from 1 to 1e+30 per second"),
    ('{"cpu": {"pair_ops": 1e9, "split_rate": 1e-320}}', "cpu.split_rate is not a rate from 1 to 1e+30 per second"),
    ('{"cpu": {"pair_ops": 1, "split_rate": 1, "by_scheme": {"ozaki2": {"pair_ops": -1}}}}',
     "cpu.by_scheme.ozaki2.pair_ops is not a rate from 1 to 1e+30 per second"),
    ('{"a100": {"pair_ops": 1, "split_rate": 1}}', "entry 'a100' is not a device of --gpu"),
    ("[" * 100000 + "]" * 100000, "is not a rates file (not JSON"),
    (b"\xff\xfe", "is not a rates file (not JSON"),
], ids=["text", "number", "list", "rate text", "rate 0", "rate inf", "rate tiny", "scheme rate", "device", "deep", "binary"])
def test_a_malformed_rates_file_is_ignored_in_one_line(tmp_path, content, why):
    rates = _rates_dir(tmp_path) / "planner_rates.json"
    (rates.write_bytes if isinstance(content, bytes) else rates.write_text)(content)
    _ignored(run_cli(PLAN, env=_env(tmp_path)), why)
    with pytest.raises(InputError, match="^--calibrate records nothing: ") as refused:   # before any compute
        calibrate("cpu", n=16, path=str(rates))
    assert why in str(refused.value)
    assert (rates.read_bytes if isinstance(content, bytes) else rates.read_text)() == content


def _trusted_file(tmp_path):
    rates = _rates_dir(tmp_path) / "planner_rates.json"
    rates.write_text(json.dumps(RATES))
    rates.chmod(0o600)
    return rates


def test_a_good_rates_file_is_used(tmp_path):
    _trusted_file(tmp_path)
    r = run_cli(PLAN, env=_env(tmp_path))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert "rates: calibrated on n1 d" in r.stdout


def test_a_group_writable_directory_or_file_is_not_believed(tmp_path):
    rates = _trusted_file(tmp_path)
    rates.chmod(0o620)
    _ignored(run_cli(PLAN, env=_env(tmp_path)), f"{rates} is writable by its group (mode 0620)")
    rates.chmod(0o600)
    rates.parent.chmod(0o770)
    _ignored(run_cli(PLAN, env=_env(tmp_path)), f"{rates.parent} is writable by its group (mode 0770)")
    r = run_cli(PLAN + ["--calibrate"], env=_env(tmp_path))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "is writable by its group" in r.stderr, r.stderr
    assert json.loads(rates.read_text()) == RATES


def test_a_link_at_the_rates_file_is_not_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(RATES))
    (_rates_dir(tmp_path) / "planner_rates.json").symlink_to(elsewhere)
    _ignored(run_cli(PLAN, env=_env(tmp_path)), "planner_rates.json is a symbolic link")


def test_a_fifo_is_not_read(tmp_path):
    os.mkfifo(_rates_dir(tmp_path) / "planner_rates.json")
    _ignored(run_cli(PLAN, env=_env(tmp_path), timeout=30), "planner_rates.json is not a regular file")


@needs_root
def test_another_users_file_is_not_believed(tmp_path):
    """A rates file owned by another user (uid 2001) in this user's directory: ignored, and
    --calibrate does not replace it."""
    rates = _trusted_file(tmp_path)
    os.chown(rates, 2001, 2001)
    _ignored(run_cli(PLAN, env=_env(tmp_path)), f"{rates} is owned by another user (uid 2001)")
    r = run_cli(PLAN + ["--calibrate"], env=_env(tmp_path))
    assert r.returncode == 2 and "is owned by another user (uid 2001)" in r.stderr, r.stderr
    assert rates.stat().st_uid == 2001


@needs_root
def test_another_users_link_to_the_config_directory_is_not_followed(tmp_path):
    """$XDG_CONFIG_HOME through a symbolic link another user owns (they could re-point it at a
    directory of theirs): nothing read from it, nothing written."""
    real = tmp_path / "real"
    real.mkdir()
    _trusted_file(real)
    link = tmp_path / "link"
    link.symlink_to(real)
    os.lchown(link, 2001, 2001)
    _ignored(run_cli(PLAN, env=_env(link)), f"{link} is a symbolic link owned by another user (uid 2001)")
    r = run_cli(PLAN + ["--calibrate"], env=_env(link))
    assert r.returncode == 2 and "is a symbolic link owned by another user" in r.stderr, r.stderr


def test_a_relative_xdg_config_home_is_ignored(tmp_path, monkeypatch):
    """As the XDG specification says: a relative $XDG_CONFIG_HOME (or an empty one) means
    ~/.config, not a directory under wherever the command runs."""
    from ozhpc.run.private_files import config_dir

    monkeypatch.setenv("HOME", str(tmp_path))
    for value in ("rel/dir", "", "."):
        assert config_dir({"XDG_CONFIG_HOME": value}) == str(tmp_path / ".config" / "ozhpc")
    assert config_dir({"XDG_CONFIG_HOME": str(tmp_path / "c")}) == str(tmp_path / "c" / "ozhpc")
