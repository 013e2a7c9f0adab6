"""The layer rule as a contract (issue 27): every import of the package, at module level or inside a
function, read from the source, goes down the layers or stays in its layer, and no modules import
each other in a circle. No exceptions list.

The layers, lowest first (docs/architecture.md):

    0  errors, units, machine, limits, outputs, progress, quantities   (what every layer uses)
    1  catalogue                                                       (data and its loader)
    2  workload                                                        (the inputs, validated)
    3  accounts                                                        (pure formulas)
    4  measure, simulate                                               (beside the plan)
    5  planning                                                        (one evaluation)
    6  present                                                         (report formats)
    7  interfaces, profile, __main__                                   (the faces)
"""

from __future__ import annotations

import ast
from pathlib import Path

import trainplan

PACKAGE = Path(trainplan.__file__).parent
LAYERS: dict[str, int] = {
    "errors": 0, "units": 0, "machine": 0, "limits": 0, "outputs": 0, "progress": 0, "quantities": 0,
    "catalogue": 1, "workload": 2, "accounts": 3, "measure": 4, "simulate": 4, "planning": 5, "present": 6,
    "interfaces": 7, "profile": 7, "__main__": 7, "__init__": 7,
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(module: str, path: Path) -> set[str]:
    """Every trainplan module `module` imports, wherever the import statement is."""
    out = set()
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        out |= {n for n in names if n in MODULES and n != module}
    return out


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS[parts[1] if len(parts) > 1 else "__init__"]


def test_every_module_has_a_layer() -> None:
    assert {m.split(".")[1] for m in MODULES if "." in m} <= set(LAYERS)


def test_imports_go_down_the_layers() -> None:
    upward = sorted(f"{a} -> {b}" for a, targets in GRAPH.items() for b in targets if _layer(b) > _layer(a))
    assert upward == [], "imports running back up:\n" + "\n".join(upward)


def test_no_modules_import_each_other_in_a_circle() -> None:
    """Tarjan's strongly connected components of the import graph: every one a single module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert circles == []


def test_the_check_sees_function_level_imports() -> None:
    """Imports inside functions (the way cycles used to hide) are edges of the graph like any other."""
    inside = set()
    for module, path in MODULES.items():
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "") in MODULES:
                        for alias in node.names:
                            sub = f"{node.module}.{alias.name}"
                            inside.add((module, sub if sub in MODULES else node.module))
    assert len(inside) > 50  # the package imports lazily where start-up time asks for it
    assert all(target in GRAPH[module] for module, target in inside if target != module)


def test_catalogues_are_read_through_their_one_loader() -> None:
    """catalogue.table(name) is the only reader of catalogue/*.toml (docs/architecture.md)."""
    loader = PACKAGE / "catalogue" / "__init__.py"
    readers = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                     if p != loader and ('"trainplan.catalogue"' in p.read_text(encoding="utf-8")
                                         or ".toml\").read_text" in p.read_text(encoding="utf-8")))
    assert readers == []
