"""House rule: no function in src/trainplan is longer than 80 lines, from its `def` to its last line
(ast's end_lineno - lineno + 1, decorators not counted). A longer one is cut where a reader would cut it."""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src" / "trainplan"
MAX_LINES = 80


def _too_long(path: Path) -> list[str]:
    """'file:line name length' of each function in `path` longer than MAX_LINES."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    where = path.relative_to(SOURCE.parents[1])
    return [f"{where}:{node.lineno} {node.name} {node.end_lineno - node.lineno + 1}"
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_LINES]


def test_the_source_is_found() -> None:
    assert len(list(SOURCE.rglob("*.py"))) > 10


def test_no_function_is_longer_than_80_lines() -> None:
    too_long = [line for path in sorted(SOURCE.rglob("*.py")) for line in _too_long(path)]
    assert not too_long, f"functions over {MAX_LINES} lines (file:line name length):\n" + "\n".join(too_long)
