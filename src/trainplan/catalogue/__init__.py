"""Catalogues as data (TOML beside this file, every figure with its unit and source) and their one loader.

`table(name)` reads `name.toml` once; `rows(name, RowType)` turns each entry into a typed
row (a frozen dataclass whose fields name the entry's keys, converted to the field's type).
Every catalogue module reads its data through these two functions.
"""

from __future__ import annotations

import tomllib
from dataclasses import fields
from functools import lru_cache
from importlib import resources
from typing import Any, TypeVar

Row = TypeVar("Row")

# field annotation (as written under `from __future__ import annotations`) -> conversion
_CONVERT = {"float": float, "int": int, "str": str, "bool": bool}


@lru_cache(maxsize=None)
def table(name: str) -> dict[str, Any]:
    """The parsed catalogue `name`.toml (read once per process)."""
    text = resources.files(__name__).joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


@lru_cache(maxsize=None)
def rows(name: str, row_type: type[Row], key_field: str = "key") -> dict[str, Row]:
    """Each entry of catalogue `name` as a `row_type`, by its key (which fills `key_field`)."""
    kinds = {f.name: _CONVERT.get(str(f.type), lambda v: v) for f in fields(row_type)}  # type: ignore[arg-type]
    out = {}
    for key, entry in table(name).items():
        values = {f: convert(entry[f]) for f, convert in kinds.items() if f != key_field and f in entry}
        out[key] = row_type(**{key_field: key}, **values)
    return out
