"""The package's shape (docs/architecture.md): each folder is a layer, imports go one way down the
layers, no import cycle, the numerics (ozaki/, engines/) never import MPI, the command line
reaches nothing below the run layer, no function body over 60 lines, and docs/architecture.md
names every module with its role."""
from __future__ import annotations

import ast
import re
import pathlib

import ozhpc

ROOT = pathlib.Path(ozhpc.__file__).parent
LAYERS = {"engines": 0, "ozaki": 1, "parallel": 2, "io": 3, "run": 4, "commands": 5, "cli": 6, "__main__": 7}
"""A module's layer is its folder's (``ozhpc.run.runner``: ``run``); ``cli.py`` and ``__main__.py``
(the command line) are modules of the package's top, above every folder."""
SHARED = {"errors", "signals"}
"""Imported by any layer: the error classes, and the signal state (a commit defers a Ctrl-C)."""
DOOR = "ozhpc"
"""The package itself (``ozhpc/__init__.py``: the API's names, loaded on first use, and
``__version__``): read by any layer, and the only module outside the layers."""
RUN_LAYER = LAYERS["run"]
BELOW_THE_RUN_LAYER = [f"ozhpc.{folder}" for folder, n in LAYERS.items() if n < RUN_LAYER]
FACE = [name for name, n in LAYERS.items() if n > LAYERS["commands"]]
MAX_BODY_LINES = 60


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def layer(name: str) -> int:
    """The layer of a module: its folder's; -1 for the shared leaves, above all for the door."""
    if name == DOOR:
        return max(LAYERS.values()) + 1
    top = name.split(".")[1]
    return -1 if top in SHARED else LAYERS[top]


def import_statements(name: str):
    """``(module, names)`` of every import in ``name`` (at any depth of its code), the module by
    its absolute name; ``names`` is empty for ``import module``."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - max(0, node.level - 1)] if node.level else []
            yield ".".join(base + ([node.module] if node.module else [])), [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []


def imports(name: str) -> set[str]:
    """Modules of this package that ``name`` imports."""
    found = set()
    for target, names in import_statements(name):
        subs = {f"{target}.{n}" for n in names} & set(MODULES)
        found |= subs if names and len(subs) == len(names) else {target} | subs
    return {m for m in found if m in MODULES and m != name}


def test_every_module_is_in_a_layer():
    """Besides the package's door and the shared leaves, every module is in a layer's folder (or is
    cli.py / __main__.py): a new module at the top of the package must say where it belongs."""
    unplaced = sorted(name for name in MODULES
                      if name != DOOR and name.split(".")[1] not in LAYERS.keys() | SHARED)
    assert unplaced == []


def test_imports_go_down_the_layers():
    upward = [(name, dep) for name in MODULES if name != DOOR for dep in imports(name)
              if dep != DOOR and layer(dep) > layer(name)]
    assert upward == []


def test_numerics_never_import_mpi():
    """ozaki/ and engines/ run in one process without MPI: neither mpi4py nor ozhpc.parallel
    (whose reductions and transports reach them as arguments)."""
    banned = ("mpi4py", "ozhpc.parallel")
    found = [(name, dep) for name in MODULES if name.split(".")[1:2] in (["ozaki"], ["engines"])
             for dep, _ in import_statements(name) if any(dep == b or dep.startswith(b + ".") for b in banned)]
    assert found == []


def test_command_line_reaches_only_the_run_layer():
    """cli.py parses, dispatches and maps errors to exit codes: the work, MPI included, is below
    it in ozhpc/commands/ and ozhpc/run/, never engines/, ozaki/, parallel/ or io/ reached
    directly."""
    for face in FACE:
        name = f"ozhpc.{face}"
        past = sorted(dep for dep, _ in import_statements(name)
                      if any(dep == low or dep.startswith(low + ".") for low in BELOW_THE_RUN_LAYER + ["mpi4py"]))
        assert past == [], name
        assert {dep for dep in imports(name) if 0 <= layer(dep) < RUN_LAYER} == set(), name


def test_no_import_cycle():
    graph = {name: imports(name) for name in MODULES}
    state: dict[str, int] = {}

    def visit(node, path):
        state[node] = 1
        for dep in graph[node]:
            if state.get(dep) == 1:
                raise AssertionError(f"import cycle: {' -> '.join(path + [node, dep])}")
            if dep not in state:
                visit(dep, path + [node])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])


MAX_MODULE_LINES = 500


def test_a_module_over_500_lines_says_why_at_its_top():
    """One concept per module, read in one sitting: a longer module states why in its docstring."""
    reason = f"Longer than {MAX_MODULE_LINES} lines because"
    long = sorted(name for name, path in MODULES.items() if len(path.read_text().splitlines()) > MAX_MODULE_LINES
                  and reason not in (ast.get_docstring(ast.parse(path.read_text())) or ""))
    assert long == []


def test_no_function_body_over_60_lines():
    long = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body
                has_doc = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                start = body[1].lineno if has_doc and len(body) > 1 else body[0].lineno
                if node.end_lineno - start + 1 > MAX_BODY_LINES:
                    long.append(f"{name}.{node.name}: {node.end_lineno - start + 1} lines")
    assert long == []


def test_the_policy_takes_values_and_never_calls_the_product():
    """ozaki/policy.py answers a pass's outcome with the next pass as a value: it imports neither
    the product nor the passes or operands it would have to call into."""
    assert {"ozhpc.ozaki.product", "ozhpc.ozaki.passes", "ozhpc.ozaki.operands"} & imports("ozhpc.ozaki.policy") == set()


WIRE_FORMATS = {"fp64", "planes"}


def wire_branches(name: str) -> list[str]:
    """Where ``name`` compares something with a wire format's name ("fp64", "planes")."""
    found = []
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Compare):
            found += [f"{name}:{node.lineno}" for part in (node.left, *node.comparators)
                      if isinstance(part, ast.Constant) and part.value in WIRE_FORMATS]
    return found


def test_only_the_wire_value_branches_on_the_wire_format():
    """parallel/wire.py's Wire says what a format means (bytes per entry, split on arrival); no
    other module compares a wire's name, and the product is told only ``split_on_arrival``."""
    assert [hit for name in MODULES if name != "ozhpc.parallel.wire" for hit in wire_branches(name)] == []
    assert wire_branches("ozhpc.parallel.wire")   # the check sees a branch where there is one


def documented_modules() -> list[str]:
    """The first column of docs/architecture.md's "Modules" table (paths below ``ozhpc/``)."""
    text = (ROOT.parent / "docs" / "architecture.md").read_text()
    section = text[text.index("\n## Modules\n"):]
    section = section[:section.index("\n## ", 1)]
    return re.findall(r"^\| `([\w/]+\.py)` \| \S", section, re.M)


def test_architecture_md_names_every_module_with_its_role():
    """Each module of ozhpc/ has one row (and a role) in docs/architecture.md's Modules table,
    and every row is a module that exists."""
    listed = documented_modules()
    files = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py"))
    assert len(listed) == len(set(listed))
    assert (sorted(set(files) - set(listed)), sorted(set(listed) - set(files))) == ([], [])
