"""What the base install holds: every command of the README runs after `pip install -e .`, or says
in one line which extra to install. The web page's server (fastapi, uvicorn) is in the base;
Parquet (pyarrow) stays an extra."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _names(requirements: list[str]) -> set[str]:
    """Distribution names of requirement strings ("fastapi>=0.110" -> "fastapi")."""
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].strip().lower() for r in requirements}


def test_the_web_page_is_in_the_base_install_and_parquet_is_an_extra() -> None:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    base = _names(project["dependencies"])
    extras = project["optional-dependencies"]
    assert {"fastapi", "uvicorn"} <= base
    assert _names(extras["ui"]) == {"fastapi", "uvicorn"}  # the old extra still installs
    assert "pyarrow" not in base and "pyarrow" in _names(extras["parquet"])


def test_ui_without_its_server_names_the_extra_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from trainplan.interfaces.cli import main

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn raises ImportError
    with pytest.raises(SystemExit) as stop:
        main(["ui", "--no-browser", "--port", "8765"])
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert "trainplan[ui]" in err and "uvicorn" in err
