"""The typed report: every figure declared once, formatted by its dimension, one evaluation path."""

from __future__ import annotations

import math

import pytest

from trainplan.planning.evaluate import build_report
from trainplan.planning.figures import DIMENSIONS, FIGURES
from trainplan.quantities import json_safe
from trainplan.units import format_figure, significant
from trainplan.present.render import flatten
from trainplan.workload.load import load_workload

WORKLOADS = [
    [],
    ["data.kind=tokens", "training.tokens=2e9", "model.layers=16", "model.width=2048"],
    ["cluster.cores=4", "prices.data_hour=2"],
    ["cluster.count=8", "data.access=random"],
]


@pytest.mark.parametrize("sets", WORKLOADS)
def test_every_figure_of_the_report_is_declared(sets):
    report = build_report(load_workload(None, sets))
    undeclared = [k for k, v in flatten({s: v for s, v in report.items() if s not in ("assumptions", "verdict", "null_reasons")}).items()
                  if k not in FIGURES and not isinstance(v, list)]
    assert undeclared == []


def test_declarations_are_complete():
    for f in FIGURES.values():
        assert f.dimension in DIMENSIONS and f.label and f.meaning, f


@pytest.mark.parametrize("value,dimension,text", [
    (9_553_216_921.6, "bytes", "9.55 GB"),  # memory.per_device_bytes of the default plan
    (337_500.0, "seconds", "3.91 d"),  # 337,500 / 86,400 = 3.906 days
    (0.0231, "seconds", "23.1 ms"),
    (90.0, "seconds", "1.5 min"),
    (843.75, "dollars", "$843.75"),
    (504_438.501749855, "dollars", "$504,439"),
    (1.95e-05, "dollars", "$0.0000195"),
    (-2.5, "dollars", "-$2.50"),
    (0.3464731682668014, "fraction", "34.6 %"),
    (4.6282752e19, "flops", "46.3 EFLOP"),
    (8.086e22, "flops", "80.9 ZFLOP"),
    (3.958e14, "flop_rate", "396 TFLOP/s"),
    (93_000_000.0, "count", "93 M"),
    (6_738_415_616.0, "count", "6.74 B"),
    (256.0, "count", "256"),
    (2770.777, "frames_per_second", "2.77 k frames/s"),
    (78.75, "kwh", "78.8 kWh"),
    (22_645.9, "kg", "22.6 t"),
    (math.inf, "tokens_per_second", "no limit"),
    (math.nan, "seconds", "n/a"),
    (None, "bytes", "n/a"),
    (True, "flag", "yes"),
])
def test_format_by_dimension(value, dimension, text):
    assert format_figure(value, dimension) == text


def test_significant_never_writes_an_exponent():
    for x in (1e-12, 3.3e-7, 1e30, 123456789.123, -4.2e25):
        assert "e" not in significant(x).lower()


def test_json_safe():
    import numpy as np

    assert json_safe({"a": np.float64("inf"), "b": [np.int64(3), math.nan], "c": (1.5,)}) == \
        {"a": None, "b": [3, None], "c": [1.5]}


# ---------------------------------------------------------------- what a person reads

import re  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_sweep import point_workloads  # noqa: E402

from trainplan.present.render import to_markdown, to_table  # noqa: E402
from trainplan.present.summary import MAX_LINES, first_screen  # noqa: E402

RAW = re.compile(r"(?i:\bnan\b|\binf\b)|\d[eE][+-]?\d|\bNone\b|\bTrue\b|\bFalse\b|∞")


def test_first_screen_answers_in_forty_lines_of_eighty_columns():
    report = build_report(load_workload(None, []))
    lines = first_screen(report)
    assert len(lines) <= MAX_LINES and max(len(line) for line in lines) <= 80
    text = " ".join(" ".join(lines).split())
    # fits: (1.488e9 state + 2e9 buffers + 5.197e9 activations) x 1.1 = 9.553e9 B per device, the activations
    # Korthikanti's block: 8 x 2048 tokens x 768 x (2 x 17 x 12 layers + 1 embedding mask + 4 output layer);
    # of the H100's 85.52e9 B (79.65 GiB) = 11.2 %
    assert "Fits? yes: 9.55 GB per device of 85.5 GB (11.2 %)" in text
    # time: 337,500 s wall = 3.91 d; compute alone 116,935 s = 1.35 d; 337,500 s x 1 device = 93.75 h
    assert "3.91 d on 1 x NVIDIA H100-SXM5-80GB (1.35 d if the accelerator never waited); 93.8 accelerator-hours" in text
    # cost: 93.75 h, plus the blocking saves of a 93 M x 14 B checkpoint at 1 GB/s each hour
    # (x (1 + 1.302 / 3600)) = 93.784 h x $3.00 = $281.35 a run, x 3 attempts = $844.06
    hours = 93.75 * (1 + 93e6 * 14 / 1e9 / 3600)
    assert f"${3 * 3 * hours:,.2f}: ${3 * hours:,.2f} a run x 3 attempts at $3.00/h" in text
    # the step and where it came from: 6 x 93e6 x 16,384 tokens / (989.5e12 x 0.4) = 23.1 ms
    assert "A step of 23.1 ms at cluster.mfu 40 %" in text
    # waits on decode: 8 cores x 120 = 960 of 2,770.78 frames/s = 34.6 %; ceil(23.09) - 8 = 16 cores to add
    assert "Waits on decode (the accelerator is busy 34.6 %). Cheapest fix: add 16 CPU cores" in text
    assert "cluster.core_fps_1080p" in text and "cluster.mfu" in text


def test_more_cores_are_a_fix_only_where_they_pay_and_the_next_hop_is_named():
    """A 1,000-parameter model wants 2.15 M cores: their cost is above the idle accelerator they remove
    (net saving below 0), so the first screen does not call them a fix. At 1e6 parameters 2,140 cores pay,
    but the read (11.5 M tokens/s) is below the demand (66 M tokens/s), so it binds next, at 11.52 / 65.97 =
    17.5 % busy: named after the fix."""
    tiny = build_report(load_workload(None, ["model.params=1000"]))
    text = " ".join(" ".join(first_screen(tiny)).split())
    assert tiny["bill"]["add_cores"]["net_saving"] < 0
    assert "Cheapest fix" not in text and "costs more than the $0.275 of idle accelerator it removes" in text
    small = build_report(load_workload(None, ["model.params=1e6"]))
    text = " ".join(" ".join(first_screen(small)).split())
    assert "Cheapest fix: add 2,140 CPU cores" in text
    assert "With them read binds: the accelerator busy 17.5 %." in text


def test_a_run_that_does_not_fit_says_so_first():
    # 1e11 parameters x 16 bytes of state (bf16 + fp32 master and Adam) = 1.6 TB on one 80 GB card
    report = build_report(load_workload(None, ["model.params=1e11"]))
    text = " ".join(" ".join(first_screen(report)).split())
    assert "Fits? NO:" in text and "per device against 85.5 GB" in text


def _sections(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines()} & {"compute", "memory", "bill", "serving", "pipeline"}


def test_sections_that_do_not_apply_are_left_out():
    tokens = to_table(build_report(load_workload(None, ["data.kind=tokens", "training.tokens=2e9"])), width=80)
    assert "frames" not in tokens and _sections(tokens) == {"compute", "memory", "pipeline"}
    video = to_table(build_report(load_workload(None, [])), width=80)
    assert _sections(video) == {"compute", "memory", "pipeline", "bill"}
    asked = to_table(build_report(load_workload(None, ["serving.requests_per_day=5e6"])), width=80)
    assert "serving" in _sections(asked)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(point_workloads())
def test_no_nan_inf_exponent_or_none_in_text(sets):
    report = build_report(load_workload(None, sets))
    for text in (to_table(report, width=80), to_table(report, width=120, detail=True)):
        found = RAW.search(text.replace(report["assumptions"]["cluster.accelerator"]["source"], ""))
        assert found is None, (found.group(0), text[max(0, found.start() - 80):found.end() + 20])
    for detail in (False, True):  # both views fit an 80-column terminal
        assert max(len(line) for line in to_table(report, width=80, detail=detail).splitlines()) <= 80
    assert len(first_screen(report)) <= MAX_LINES


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(d for d in DIMENSIONS if d not in ("flag", "text"))),
       st.floats(allow_nan=True, allow_infinity=True, width=64))
def test_every_dimension_writes_every_float_without_raw_forms(dimension, value):
    text = format_figure(value, dimension)
    assert text and RAW.search(text) is None and len(text) <= 32, text


def test_json_writes_null_with_a_reason_where_a_figure_does_not_exist() -> None:
    """No decode cores: the decoders supply 0 frames/s, so busy is 0 and the wall time infinite; JSON
    writes null for it and says why beside it (null_reasons), and the key is still there."""
    import json

    from trainplan.present.render import to_json

    report = json.loads(to_json(build_report(load_workload(None, ["cluster.cores=0"]))))
    assert report["pipeline"]["busy"] == 0
    assert report["compute"]["wall_seconds"] is None
    assert report["null_reasons"]["compute.wall_seconds"].startswith("unbounded")
    # with 24 cores every figure exists except the tokenizer's capacity: token ids are packed ahead of
    # time (data.tokenize_online = false), so no tokenizer stage limits the pipeline
    reasons = build_report(load_workload(None, ["cluster.cores=24"]))["null_reasons"]
    assert list(reasons) == ["pipeline.stages.tokenize.tokens_per_second"]


def test_first_screen_fits_under_the_layout_it_is_given() -> None:
    """A 70 B model on 512 devices laid out TP 8 x PP 4: the first screen judges the fit per device
    of the layout (DP = 512 / (8 x 4) = 16), not of one whole replica, and states the pipeline
    bubble (p - 1) / (m v) = 3 / (16 micro-batches x 5 virtual stages) = 3.75 %."""
    from pathlib import Path

    from trainplan.present.summary import first_screen

    example = Path(__file__).resolve().parents[1] / "examples" / "llama3-70b-512gpu.toml"
    screen = "\n".join(first_screen(build_report(load_workload(example, []))))
    fits = next(line for line in screen.splitlines() if line.startswith("Fits?"))
    assert "under TP 8 x PP 4 x DP 16" in fits and "yes" in fits
    assert "pipeline bubble" in screen and "3.75 %" in screen
