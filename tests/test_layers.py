"""The packages import in one direction only (docs/architecture.md), function-level imports included.

data → models → engines → retrieval → metrics → tasks → testing → results → compare → history → settings → evaluation
→ sweep, screen → studies → api → cli, with the foundations (errors, messages, types, registry, hub, progress, profiling) below
everything. A package may import its own modules and the layers below it; nothing imports upward, and the
package graph has no cycle. Inside a package, the modules import without a cycle (a function-level import counts:
deferring an import hides a loop, it does not break it), and no module imports a private name (``_x``) of another
package. Imports under ``if TYPE_CHECKING:`` are annotations only and are not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "src" / "embedscope"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("messages",),
    ("errors",),
    ("version", "types", "registry", "hub", "progress", "profiling", "files"),
    ("data",),
    ("models",),
    ("engines",),
    ("retrieval",),
    ("metrics",),
    ("tasks",),
    ("testing",),  # deterministic fakes and tiny tasks: tests, doctests and the text recorder of compare
    ("results",),
    ("compare",),
    ("history",),  # the results store, the gate and the leaderboard over it (evaluation records into it)
    ("settings",),
    ("evaluation",),
    ("sweep", "screen"),
    ("studies",),
    ("api",),  # the Python API's verbs over the packages below (embedscope/__init__.py names them)
    ("cli",),
    ("__init__", "__main__"),
)
RANK = {package: n for n, layer in enumerate(LAYERS) for package in layer}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    parts = list(
        path.relative_to(path.parents[len(path.parts) - path.parts.index("embedscope") - 1]).with_suffix("").parts
    )
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path) -> list[tuple[str, int]]:
    """``(imported module, line)`` of every runtime import in the file, at any depth."""
    module = _module_name(path)
    is_package = path.name == "__init__.py"
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub)
                continue
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = module.split(".")[: len(module.split(".")) - child.level + (1 if is_package else 0)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                found.append((target, child.lineno))
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return [(m, line) for m, line in found if m == "embedscope" or m.startswith("embedscope.")]


def _edges(root: Path = ROOT) -> list[tuple[str, str, str]]:
    """``(from package, to package, where)`` for every import between two packages."""
    edges = []
    for path in sorted(root.rglob("*.py")):
        source = _package(_module_name(path))
        for target, line in _imports(path):
            dest = _package(target) if target != "embedscope" else "__init__"
            if dest != source:
                edges.append((source, dest, f"{path.relative_to(root.parent)}:{line}"))
    return edges


def test_every_package_has_a_layer():
    packages = {_package(_module_name(p)) for p in ROOT.rglob("*.py")}
    assert packages <= set(RANK), f"packages without a layer: {sorted(packages - set(RANK))}"


@pytest.mark.slow
def test_no_package_imports_upward():
    upward = [f"{where}: {a} → {b}" for a, b, where in _edges() if RANK[b] > RANK[a]]
    assert not upward, "upward imports:\n" + "\n".join(upward)


@pytest.mark.slow
def test_the_package_graph_has_no_cycle():
    graph: dict[str, set[str]] = {}
    for a, b, _ in _edges():
        graph.setdefault(a, set()).add(b)
    state: dict[str, int] = {}

    def cycle_from(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path, node, nxt]
            if state.get(nxt) is None and (found := cycle_from(nxt, [*path, node])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if state.get(start) is None and (found := cycle_from(start, [])):
            pytest.fail("package cycle: " + " → ".join(found))


def test_the_checker_sees_function_level_imports(tmp_path):
    """A function-level upward import is caught (the check is not vacuous)."""
    fake = tmp_path / "embedscope"
    (fake / "data").mkdir(parents=True)
    (fake / "data" / "x.py").write_text("def f():\n    from embedscope.cli.main import main\n")
    (fake / "data" / "y.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import embedscope.cli\n"
    )
    assert _imports(fake / "data" / "x.py") == [("embedscope.cli.main", 2)]
    assert _imports(fake / "data" / "y.py") == []
    assert [(a, b) for a, b, _ in _edges(fake)] == [("data", "cli")]


def _module_files(root: Path = ROOT) -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(root.rglob("*.py"))}


def _imported(path: Path, modules: dict[str, Path]) -> list[tuple[str, str | None, int]]:
    """``(module, name, line)`` of each runtime import of an embedscope module: ``from M import n`` gives the
    submodule ``M.n`` when there is one (name None), else ``(M, n)``; ``import M`` gives ``(M, None)``."""
    module = _module_name(path)
    is_package = path.name == "__init__.py"
    found: list[tuple[str, str | None, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub)
                continue
            if isinstance(child, ast.Import):
                found.extend((a.name, None, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = module.split(".")[: len(module.split(".")) - child.level + (1 if is_package else 0)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                for alias in child.names:
                    sub = f"{target}.{alias.name}"
                    found.append((sub, None, child.lineno) if sub in modules else (target, alias.name, child.lineno))
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return [(m, n, line) for m, n, line in found if m in modules]


def _module_cycles(root: Path = ROOT) -> list[list[str]]:
    """The import cycles among the modules of one package (strongly connected groups of two or more, Tarjan)."""
    modules = _module_files(root)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for target, _, _ in _imported(path, modules):
            if target != name and _package(target) == _package(name) and _package(name) != "__init__":
                graph[name].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return groups


@pytest.mark.slow
def test_no_import_cycle_inside_a_package():
    """Module-level and function-level imports both count: a cycle deferred into a function is still a cycle."""
    cycles = _module_cycles()
    assert not cycles, "import cycles inside a package:\n" + "\n".join(" ↔ ".join(c) for c in cycles)


def _private_reach_ins(root: Path = ROOT) -> list[str]:
    modules = _module_files(root)
    found = []
    for name, path in modules.items():
        for target, imported, line in _imported(path, modules):
            private = imported if imported is not None else target.rpartition(".")[2]
            if private.startswith("_") and not private.startswith("__") and _package(target) != _package(name):
                found.append(f"{path.relative_to(root.parent)}:{line}: {target}{'.' + imported if imported else ''}")
    return found


@pytest.mark.slow
def test_no_private_name_is_imported_from_another_package():
    reach_ins = _private_reach_ins()
    assert not reach_ins, "private names imported from another package:\n" + "\n".join(reach_ins)


def test_the_checker_sees_cycles_and_private_reach_ins(tmp_path):
    fake = tmp_path / "embedscope"
    for package in ("data", "tasks"):
        (fake / package).mkdir(parents=True)
        (fake / package / "__init__.py").write_text("")
    (fake / "data" / "a.py").write_text("from embedscope.data.b import f\n\ndef _g():\n    pass\n")
    (fake / "data" / "b.py").write_text("def f():\n    from embedscope.data import a\n")
    (fake / "data" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import embedscope.data.a\n"
    )
    (fake / "tasks" / "t.py").write_text("from embedscope.data.a import _g\nfrom embedscope.data import b\n")
    assert _module_cycles(fake) == [["embedscope.data.a", "embedscope.data.b"]]
    assert _private_reach_ins(fake) == ["embedscope/tasks/t.py:1: embedscope.data.a._g"]
