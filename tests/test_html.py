"""trainplan plan --format html: one self-contained page with the tables and the plots."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from trainplan.present.html import render_html
from trainplan.planning.evaluate import build_report
from trainplan.workload.load import load_workload


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
    assert page.count("<svg") == 4 and "id=plot-timeline" in page and "<h2 id=simulation>Queue simulation</h2>" in page


def test_token_workload_has_no_busy_curve():
    page = _page("data.kind=tokens", "training.tokens=1e9")
    assert page.count("<svg") == 1 and "id=plot-busy" not in page and "id=plot-memory" in page


def test_cli_writes_html(cli, tmp_path):
    out = tmp_path / "report.html"
    res = cli("plan", "--format", "html", "--output", str(out))
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.count("<svg") == 3


def test_the_page_opens_with_the_first_screen() -> None:
    """The HTML answer is the CLI's first screen: Fits? / Time / Cost / Waits on / Measure / Decide, and the
    Decide line carries the planning decisions (prices.attempts = 3 by default: 3 attempts budgeted)."""
    w = load_workload(None, [])
    page = render_html(build_report(w), w)
    answer = page.split("<dl class=answer id=answer>", 1)[1].split("</dl>", 1)[0]
    labels = re.findall(r"<dt>(.*?)</dt>", answer)
    assert labels[:4] == ["Fits?", "Time", "Cost", "Waits on"] and "Decide" in labels
    # 337,500 s x (1 + 1.302 s save / 3,600 s) = 337,622 s x $3.00/h = $281.35 a run; 3 attempts $844.06
    assert "<dd>$844.06: $281.35 a run x 3 attempts at $3.00/h per accelerator.</dd>" in answer
    assert "budgets 3 attempts" in answer
    verdict = page.split("<p class=verdict>", 1)[1].split("</p>", 1)[0]
    assert verdict.startswith("Decode binds")


def _visible_text(page: str) -> str:
    body = re.sub(r"<svg.*?</svg>", "", page, flags=re.S)
    body = re.sub(r"<style>.*?</style>", "", body, flags=re.S)
    return re.sub(r"<[^>]+>", " ", body)


def test_headings_and_columns_are_words_with_units() -> None:
    page = _page()
    text = _visible_text(page)
    for raw in ("training_cost.accelerators", "wall_seconds", "dollars_per_hour", "decisions.checks",
                "accelerator_hours", "price_source"):
        assert raw not in text, raw
    assert "<th>applies</th>" not in page and "<th>triggered</th>" not in page  # the checks' debug table
    headings = re.findall(r"<h2[^>]*>(.*?)</h2>", page)
    assert "Device memory" in headings and "Training cost" in headings and "Input pipeline: what the accelerator waits on" in headings
    assert all(" " in h or h[0].isupper() for h in headings)  # words, not ids
    # the comparison table's columns in words, prices with their unit: the A100 at $1.30 per accelerator-hour
    assert "<th>price per accelerator-hour</th>" in page and "$1.30/h" in page
    # inputs with their units: cluster.link 1.5e9 B/s, data.bitrate 8e6 bit/s, runtime buffers 2e9 B
    for key, value in (("cluster.link", "1.5 GB/s"), ("data.bitrate", "8 Mbit/s"), ("cluster.runtime_buffers", "2 GB")):
        assert re.search(rf"<td[^>]*>{re.escape(key)}</td><td[^>]*>{re.escape(value)}</td>", page), key


def test_serving_only_when_the_workload_describes_serving() -> None:
    assert "<h2 id=serving>" not in _page()  # a training plan: no KV cache of a ViT
    assert "<h2 id=serving>" in _page("serving.requests_per_day=2e6")


def test_token_workload_has_no_video_bill() -> None:
    page = _page("data.kind=tokens", "training.tokens=1e9")
    accounts = _visible_text(page.split("<h2 id=assumptions>", 1)[0])
    assert "<h2 id=bill>" not in page and "id=plot-bill" not in page and "frames/s" not in accounts


CHROMIUM = "/usr/bin/chromium"
#: Screenshot slices: height in px and how many (the top of the page, where a reader looks first).
SHOT_HEIGHT = 8000
SHOT_SLICES = 2
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def test_report_fits_a_wide_screen_and_a_phone(tmp_path) -> None:  # noqa: ANN001
    """Screenshots at 1,400 px and 390 px (a phone): nothing wider than the window, nothing clipped."""
    import os

    import pytest

    if not os.path.exists(CHROMIUM):
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (.ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    pages = {"video": _page(), "tokens": render_html(*_report_and_workload("examples/finetune-1b.toml"))}
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for name, html in pages.items():
                path = tmp_path / f"{name}.html"
                path.write_text(html, encoding="utf-8")
                for width in (1400, 390):
                    page = browser.new_page(viewport={"width": width, "height": 900})
                    page.set_default_timeout(120_000)  # generous: the machine is shared (never timing-sensitive)
                    page.goto(path.as_uri())
                    assert page.evaluate("document.documentElement.scrollWidth") <= width
                    wider = page.evaluate(
                        "w => [...document.querySelectorAll('body *:not(svg *)')]"
                        ".filter(e => e.getBoundingClientRect().right > w + 0.5).map(e => e.tagName).slice(0, 5)", width)
                    assert wider == [], (name, width, wider)
                    # Chromium captures at most about 16,000 px at once: the page in slices of SHOT_HEIGHT
                    height = page.evaluate("document.documentElement.scrollHeight")
                    for i, top in enumerate(range(0, min(height, SHOT_HEIGHT * SHOT_SLICES), SHOT_HEIGHT)):
                        shot = tmp_path / f"report-{name}-{width}-{i}.png"
                        clip = {"x": 0, "y": top, "width": width, "height": min(SHOT_HEIGHT, height - top)}
                        page.screenshot(path=str(shot), full_page=True, clip=clip, timeout=120_000)
                        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
                    page.close()
        finally:
            browser.close()


def _report_and_workload(file: str) -> tuple[dict, object]:
    from pathlib import Path

    w = load_workload(Path(__file__).resolve().parent.parent / file, [])
    return build_report(w), w
