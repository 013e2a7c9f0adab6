"""trainplan plan --format html: one self-contained page with the tables and the plots."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from trainplan.present.html import render_html
from trainplan.planning.evaluate import build_report
from trainplan.workload.schema import load_workload


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        self.tags.append((tag, dict(attrs)))


def _page(*sets: str, simulation: dict | None = None) -> str:
    w = load_workload(None, list(sets))
    report = build_report(w)
    if simulation is not None:
        report["simulation"] = simulation
    return render_html(report, w)


def test_page_is_self_contained_with_tables_and_plots():
    page = _page()
    parser = _Tags()
    parser.feed(page)
    tags = [t for t, _ in parser.tags]
    # nothing fetched: no scripts, no stylesheets or images by URL, no external references
    assert "script" not in tags and "link" not in tags and "img" not in tags and "iframe" not in tags
    for _, attrs in parser.tags:
        for name in ("src", "href"):
            assert not str(attrs.get(name, "")).startswith(("http", "//")), attrs
    assert not re.search(r"url\(\s*['\"]?https?:", page) and "@import" not in page
    # three plots inline (busy, memory, bill), text drawn as paths
    assert page.count("<svg") == 3 and "<text" not in page
    for plot in ("plot-busy", "plot-memory", "plot-bill"):
        assert f"id={plot}" in page
    for account in ("compute", "memory", "network", "storage", "pipeline", "bill", "assumptions"):
        assert f"<h2 id={account}>" in page
    assert "Decode binds" in page  # the verdict (reference workload)


def test_busy_curve_marks_the_current_point():
    import numpy as np

    from trainplan.accounts import pipeline
    from trainplan.planning import evaluate as plan

    w = load_workload(None, [])
    busy = pipeline.pipeline_arrays(**plan.pipeline_inputs(w, cores=np.arange(0, 31)))["busy"]
    # busy = min(1, 120 c / 2770.78): the curve the plot draws, 8 cores -> 34.6 %
    assert busy[8] == build_report(w)["pipeline"]["busy"]
    assert round(busy[8] * 100, 1) == 34.6 and busy[23] < 1.0 and busy[24] == 1.0  # 23 x 120 = 2,760 < 2,770.78


def test_timeline_drawn_when_simulated():
    intervals = [{"who": "read", "state": "busy", "start": 0.0, "end": 0.5},
                 {"who": "decoder", "state": "busy", "start": 0.1, "end": 0.9},
                 {"who": "decoder", "state": "blocked", "start": 0.9, "end": 1.0},
                 {"who": "accelerator", "state": "busy", "start": 0.3, "end": 1.0}]
    page = _page(simulation={"busy": 0.35, "formula_busy": 0.346, "difference": 0.004, "timeline": intervals})
    assert page.count("<svg") == 4 and "id=plot-timeline" in page and "<h2>simulation</h2>" in page


def test_token_workload_has_no_busy_curve():
    page = _page("data.kind=tokens", "training.tokens=1e9")
    assert page.count("<svg") == 2 and "id=plot-busy" not in page


def test_cli_writes_html(cli, tmp_path):
    out = tmp_path / "report.html"
    res = cli("plan", "--format", "html", "--output", str(out))
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.count("<svg") == 3


def test_the_page_verdict_carries_the_planning_decisions() -> None:
    """The HTML verdict is the CLI's: the verdict and the decisions' sentences (prices.attempts = 3
    by default, so the bill says it budgets 3 attempts)."""
    from trainplan.planning.evaluate import build_report
    from trainplan.present.html import render_html
    from trainplan.workload.schema import load_workload

    w = load_workload(None, [])
    page = render_html(build_report(w), w)
    verdict = page.split("<p class=verdict>", 1)[1].split("</p>", 1)[0]
    assert verdict.startswith("Decode binds") and "budgets 3 attempts" in verdict
