"""The plan interface is true (docs/architecture.md, "Where things plug in"): what differs between
the Ozaki schemes lives on the plan classes of ``ozhpc/ozaki/plan.py``, so no other module of
``ozhpc/ozaki/`` branches on the scheme's name (``settings.py`` checks the options, by name)."""
from __future__ import annotations

import ast
import pathlib

import ozhpc
from ozhpc.ozaki.plan import PLANS

OZAKI = pathlib.Path(ozhpc.__file__).parent / "ozaki"
NAMING = {"plan.py", "settings.py"}
"""The modules that may name a scheme: the plans, and the settings that check the options."""


def docstrings(tree) -> set[int]:
    """ids of the docstring nodes (modules, classes, functions, and the strings after assignments)."""
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            out |= {id(stmt.value) for stmt in body
                    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)}
    return out


def scheme_branches(path: pathlib.Path) -> list[str]:
    """Where ``path`` names a scheme in code (a string "ozaki1" / "ozaki2" outside docstrings) or
    reads a ``.scheme`` to compare or index with it."""
    tree = ast.parse(path.read_text())
    skip, found = docstrings(tree), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in PLANS and id(node) not in skip:
            found.append(f"{path.name}:{node.lineno}: {node.value!r}")
        tests = [node.left, *node.comparators] if isinstance(node, ast.Compare) else \
            [node.slice] if isinstance(node, ast.Subscript) else []
        found += [f"{path.name}:{node.lineno}: .scheme compared or indexed" for part in tests
                  if isinstance(part, ast.Attribute) and part.attr == "scheme"]
    return found


def test_only_the_plans_branch_on_the_scheme():
    modules = sorted(p for p in OZAKI.glob("*.py") if p.name not in NAMING)
    assert len(modules) >= 8   # product, certificate, policy, info, gemm, ...: the check sees them
    assert [hit for path in modules for hit in scheme_branches(path)] == []


def test_the_check_sees_a_branch(tmp_path):
    """The check itself: each form of a branch on the scheme is caught."""
    for line in ('x = 1 if plan.scheme == "ozaki1" else 2', "y = ULPS[plan.scheme]",
                 'z = {"ozaki2": 2}', 'if settings.scheme != "ozaki2":\n    pass'):
        probe = tmp_path / "probe.py"
        probe.write_text(f'"""A docstring naming "ozaki1" is fine."""\n{line}\n')
        assert scheme_branches(probe), line
    probe.write_text('"""ozaki1 and ozaki2, in words."""\nx = plan.width\n')
    assert scheme_branches(probe) == []
