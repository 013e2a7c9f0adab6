"""Progress displays: shown on a terminal, quiet when piped or nested, gone when the job ends; the
probes that can run past a few seconds show one and keep stdout's JSON clean."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from trainplan import progress as progress_mod
from trainplan.progress import progress, progress_bar


def _terminal() -> tuple[Console, io.StringIO]:
    sink = io.StringIO()
    return Console(file=sink, force_terminal=True, width=80), sink


def test_shown_on_a_terminal_with_its_label_and_steps() -> None:
    console, sink = _terminal()
    with progress("probing", total=3, console=console) as steps:
        assert progress_mod.showing()
        steps.describe("probe read")
        steps.advance()
        steps.advance(2)
    assert not progress_mod.showing()
    text = sink.getvalue()
    assert "probe read" in text and "3/3" in text  # the last refresh before the transient line goes


def test_quiet_when_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with progress("decode probe") as steps:  # pytest's stderr is not a terminal
        assert not progress_mod.showing()
        steps.advance()
        steps.describe("still quiet")
    with progress_bar("bootstrap", 10) as advance:
        advance(1)
    out, err = capsys.readouterr()
    assert out == "" and err == ""


def test_a_nested_progress_stays_quiet() -> None:
    console, sink = _terminal()
    inner_console, inner_sink = _terminal()
    with progress("probing", total=1, console=console):
        with progress("decode probe", console=inner_console) as inner:
            inner.describe("inner")
        assert progress_mod.showing()
    assert inner_sink.getvalue() == "" and "probing" in sink.getvalue()


def test_matmul_probe_json_is_clean_when_piped(capsys: pytest.CaptureFixture[str]) -> None:
    from trainplan.interfaces.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["probe", "matmul", "--n", "64", "--seconds", "0.01", "--format", "json"])
    assert stop.value.code == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["results"] and all(r["flops_per_second"] > 0 for r in data["results"])
    assert "━" not in err and "matmul probe" not in err  # only "skipped: ..." lines may be there
