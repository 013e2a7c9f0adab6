"""Benchmarks that time the command line run it as an installed copy would: byte-compiled.

`pip install` writes each module's .pyc; an editable install under PYTHONDONTWRITEBYTECODE (this
machine and CI set it) compiles some 50 modules from source on every start instead, about 0.1 s
that an installed copy never pays."""

from __future__ import annotations

import compileall
from pathlib import Path


def byte_compile() -> bool:
    """Write the package's .pyc files; False where they cannot be written."""
    return bool(compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "src"), quiet=1))
