"""The package's import graph, read from the source with ``ast`` (no module is imported): no cycle anywhere, the
public faces imported by nothing inside the package, every subpackage documented.

Edges are every ``import`` / ``from ... import`` of a module of the package, at module level or inside a function
(an import deferred into a function still runs, so it still counts). ``from pkg import name`` is an edge to the
module ``pkg.name`` where that is a module, to ``pkg`` otherwise. Importing ``a.b.c`` also runs the ``__init__`` of
every package above it, so it is an edge to those too, except to the root ``ovl_runtime``, whose ``__init__``
re-exports from the whole package (every module is inside it).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "ovl_runtime"
PACKAGE = "ovl_runtime"
#: The public faces: the package's API, which its own modules never import.
FACES = ("ovl_runtime.ops", "ovl_runtime.nn", "ovl_runtime.models")
#: The compiler bundle's files (scripts/build-compiler.sh): data, not modules, though its kernels end in .py.
BUNDLE = ROOT / "_compiler" / "bundle"


def _modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name, for its ``__init__``)."""
    out: dict[str, Path] = {}
    for path in sorted(ROOT.rglob("*.py")):
        if path.is_relative_to(BUNDLE):
            continue
        parts = (PACKAGE, *path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _imported(name: str, path: Path, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``node`` (in module ``name`` at ``path``) imports, by name."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in modules}
    if node.level:
        base = name.split(".") if _is_package(path) else name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        mod = ".".join([*base, node.module] if node.module else base)
    else:
        mod = node.module or ""
    if mod != PACKAGE and not mod.startswith(PACKAGE + "."):
        return set()
    out = set()
    for alias in node.names:
        sub = f"{mod}.{alias.name}"
        out.add(sub if sub in modules else mod)
    return {m for m in out if m in modules}


def _with_parents(target: str, modules: dict[str, Path]) -> set[str]:
    """``target`` and every package above it but the root: importing it runs their ``__init__`` too."""
    parts = target.split(".")
    return {".".join(parts[:i]) for i in range(2, len(parts) + 1)} & modules.keys()


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _imported(name, path, node, modules):
                    edges |= _with_parents(target, modules)
        edges.discard(name)
        # A module runs its own package's __init__ before itself: that is not an edge out of it.
        graph[name] = {e for e in edges if not name.startswith(e + ".")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_reads_every_module_and_its_deferred_imports():
    graph = import_graph()
    assert len(graph) > 50
    # A function-level import is an edge: the CLI defers the report writer into a function.
    assert "ovl_runtime._report.report" in graph["ovl_runtime._cli.main"]
    # `from . import x` of a submodule is an edge to that submodule.
    assert "ovl_runtime.operators.ag_gemm.autograd" in graph["ovl_runtime.operators.ag_gemm.api"]


def test_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles (each a set of modules that import each other):\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_nothing_inside_imports_the_public_faces():
    graph = import_graph()
    inside = {name: edges & set(FACES) for name, edges in graph.items() if name not in FACES and name != PACKAGE}
    assert not {name: faces for name, faces in inside.items() if faces and name != "ovl_runtime.nn"}, inside
    # nn builds on ops; nothing else inside the package reaches for either face.
    assert graph["ovl_runtime.nn"] & set(FACES) == {"ovl_runtime.ops"}


def test_every_subpackage_says_what_it_is_for():
    for name, path in _modules().items():
        if not _is_package(path) or name in (PACKAGE, *FACES):  # a face's docstring documents its API
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert doc, f"{path}: a package's __init__ says in its docstring what the package holds"
        assert len(doc.splitlines()) <= 3, f"{path}: a package's docstring is a short note on its role"


def test_private_subpackages_import_nothing_on_their_own():
    """A private subpackage's ``__init__`` is its docstring alone, so importing one of its modules runs nothing else."""
    for name, path in _modules().items():
        if _is_package(path) and name.split(".")[-1].startswith("_"):
            body = ast.parse(path.read_text(encoding="utf-8")).body
            assert all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body), path
