"""The package's layers run one way (docs/architecture.md): a module imports only from its own
package or from packages of lower layers, never the facade, never ``popprof.testing`` (runtime code),
and no two modules import each other in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import popprof

PACKAGE = Path(popprof.__file__).resolve().parent

#: Layer of each top-level part of the package: an import may go to the same part or a lower layer.
#: Keep in step with the table in docs/architecture.md.
LAYERS: dict[str, int] = {
    "_version": 0,
    "model": 0,
    "markup": 0,
    "io": 1,
    "trace": 2,
    "readers": 3,
    "metrics": 4,
    "rules": 5,
    "compare": 5,
    "redaction": 5,
    "plots": 6,
    "report": 7,
    "pilot": 8,
    "record": 8,
    "sql": 7,
    "analysis_tables": 6,
    "store": 8,
    "cli": 9,
    "testing": 9,
    "launch": 10,
    "__main__": 11,
}
#: Parts importable from any layer (also from model/) because they import nothing of popprof.
LEAVES = frozenset({"_version", "markup"})


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(imported popprof module or name, whether at module level) for every import in the file."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text("utf-8"))
    top_level = {id(node) for node in tree.body}
    top_level |= {id(n) for node in tree.body if isinstance(node, ast.If) for n in node.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("popprof"):
                continue
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                sub = PACKAGE.parent / Path(*candidate.split("."))
                name = candidate if sub.with_suffix(".py").is_file() or sub.is_dir() else target
                found.append((name, id(node) in top_level))
        elif isinstance(node, ast.Import):
            found += [(a.name, id(node) in top_level) for a in node.names if a.name.startswith("popprof")]
    return found


def _part(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.parent != PACKAGE or p.name != "__init__.py")


def test_every_part_of_the_package_has_a_layer():
    parts = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in MODULES}
    assert parts <= set(LAYERS), f"give these a layer here and in docs/architecture.md: {parts - set(LAYERS)}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_run_down_the_layers(path):
    module = _module_name(path)
    own = _part(module)
    wrong = []
    for target, _ in _imports(path):
        part = _part(target)
        if part is None:
            wrong.append(f"{target} (the facade: import from the module that defines the name)")
        elif part == "testing" and own != "testing":
            wrong.append(f"{target} (testing code is never imported by runtime code)")
        elif part != own and LAYERS[part] >= LAYERS[own] and part not in LEAVES:
            wrong.append(f"{target} (layer {LAYERS[part]} is not below {own}'s {LAYERS[own]})")
    assert not wrong, f"{module} imports upward: {wrong}"


def test_the_leaves_import_nothing_of_popprof():
    for path in MODULES:
        module = _module_name(path)
        if _part(module) in LEAVES:
            outside = [t for t, _ in _imports(path) if _part(t) != _part(module)]
            assert not outside, (
                f"{module} may be imported from any layer, so it imports nothing of popprof: {outside}"
            )


def _graph(module_level_only: bool) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (at module level only, or anywhere in the file)."""
    graph: dict[str, set[str]] = {}
    for path in MODULES:
        module = _module_name(path)
        graph[module] = {t for t, top in _imports(path) if (top or not module_level_only) and t != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles of ``graph``; a package's ``__init__`` handing on the names of its own modules is not a
    cycle of logic."""
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return [c for c in cycles if not any(c[i + 1].startswith(c[i] + ".") for i in range(len(c) - 1))]


def test_no_import_cycles_at_module_level():
    found = _cycles(_graph(module_level_only=True))
    assert not found, f"import cycles: {found}"


def test_no_import_cycles_through_function_level_imports():
    """An import inside a function defers a circle to run time, it does not break it: every import counts."""
    found = _cycles(_graph(module_level_only=False))
    assert not found, f"import cycles (some imports inside functions): {found}"


def test_the_cycle_check_counts_function_level_imports():
    """The check itself: an import inside a function is an edge of the full graph, not of the module-level
    one, and two modules importing each other that way are a cycle; a package handing on its module is not."""
    path = PACKAGE / "__init__.py"  # the facade imports each part inside the function that uses it
    assert ("popprof.readers.bundle", False) in _imports(path)
    assert _cycles({"p.a": {"p.b"}, "p.b": {"p.a"}}) == [["p.a", "p.b", "p.a"]]
    assert _cycles({"p": {"p.a"}, "p.a": {"p"}}) == []


def test_no_facade_function_shares_a_module_name():
    names = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in MODULES}
    clashes = [n for n in popprof.__all__ if callable(getattr(popprof, n)) and n in names]
    assert not clashes, f"importing the module would replace the function: {clashes}"


def test_the_readers_face_hands_names_on_and_no_reader_imports_it():
    """``readers/__init__.py`` holds no logic (the registry and the dispatch are modules of their own), and no
    module of the readers imports names back from it."""
    face = PACKAGE / "readers" / "__init__.py"
    logic = [
        n.name
        for n in ast.parse(face.read_text("utf-8")).body
        if isinstance(n, ast.FunctionDef | ast.ClassDef)
    ]
    assert not logic, f"readers/__init__.py defines {logic}: move them to a module of the readers"
    inside = [p for p in MODULES if p.is_relative_to(face.parent) and p != face]
    back = [_module_name(p) for p in inside if any(t == "popprof.readers" for t, _ in _imports(p))]
    assert not back, f"these import from the readers' face: {back}"
