"""Units and words of issue 28: every figure a person reads carries its unit; inputs too.

Expected texts derived by hand from the reference workload (docs/pipeline-and-bill.md):
stall threshold P* = mu Phi / (6 n S) = 0.4 x 989.5e12 / (6 x 256 x 8 cores x 120 frames/s) = 268.4 M
parameters; the overlap speed-up 89.8 ms / 66.7 ms = 1.35x; cluster.link 1.5e9 B/s = 1.5 GB/s;
data.bitrate 8e6 bit/s = 8 Mbit/s; cluster.runtime_buffers 2e9 B = 2 GB.
"""

from __future__ import annotations

import json

import pytest

from trainplan.quantities import format_assumption

from trainplan.units import format_figure
from trainplan.workload.schema import input_dimensions


def test_inputs_are_written_with_their_units() -> None:
    dims = input_dimensions()
    assert format_assumption("cluster.link", 1.5e9, dims) == "1.5 GB/s"
    assert format_assumption("data.bitrate", 8e6, dims) == "8 Mbit/s"
    assert format_assumption("cluster.runtime_buffers", 2e9, dims) == "2 GB"
    assert format_assumption("prices.accelerator_hour", 3.0, dims) == "$3.00/h"
    assert format_assumption("model.params", 93e6, dims) == "93 M parameters"
    assert format_assumption("cluster.accelerator", "h100-sxm", dims) == "h100-sxm"  # text stays text


@pytest.mark.parametrize(("value", "dimension", "text"), [
    (611.0, "per_month", "611 epochs a month"),
    (268.4e6, "parameters", "268 M parameters"),
    (1.346, "speedup", "1.35x"),
    (0.023, "dollars_per_gb_month", "$0.023/GB-month"),
])
def test_figures_name_what_they_count(value: float, dimension: str, text: str) -> None:
    assert format_figure(value, dimension) == text


def test_plan_all_shows_units_not_bare_prefixes(cli) -> None:  # noqa: ANN001 - the conftest fixture
    res = cli("plan", "--all")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "268 M parameters" in out and "1.35x" in out
    md = cli("plan", "--format", "markdown").stdout
    for key, text in (("cluster.link", "1.5 GB/s"), ("data.bitrate", "8 Mbit/s"), ("cluster.runtime_buffers", "2 GB")):
        assert f"| {key} | {text} |" in md


@pytest.mark.parametrize(("text", "count"), [("2 trillion", 2e12), ("7 billion parameters", 7e9),
                                             ("1.5 million tokens", 1.5e6), ("3 thousand", 3e3)])
def test_counts_in_words(text: str, count: float) -> None:
    from trainplan import units

    assert units.parse(text, "count") == count  # short scale: a billion is 10^9, a trillion 10^12


def test_two_trillion_tokens_plan(cli) -> None:  # noqa: ANN001
    res = cli("plan", "--set", "training.tokens=2 trillion", "-f", "json")
    assert res.returncode == 0, res.stderr
    import json

    assert json.loads(res.stdout)["workload"]["tokens"] == 2e12


def test_measure_line_names_assumptions_with_units(cli) -> None:  # noqa: ANN001
    # the reference workload assumes 120 frames/s of 1080p per core and an MFU of 0.4 (40 %)
    answer = json.loads(cli("plan", "-f", "json").stdout)["answer"]
    assert "cluster.core_fps_1080p (assumed 120 frames/s;" in answer["measure"]
    assert "cluster.mfu (assumed 40 %;" in answer["measure"]


def test_the_readme_quotes_the_first_screen_as_it_is(cli) -> None:  # noqa: ANN001
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    quoted = readme.split("For the reference workload:", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    out = cli("plan").stdout
    lines = [line for line in quoted.strip().splitlines() if line.strip()]
    assert len(lines) >= 5
    for line in lines:
        assert line in out, line


def test_a_number_keeps_its_unit_on_its_line() -> None:
    from trainplan.present.summary import _wrap

    # 68 columns of text after the 10-column label: "40 %" would have been cut after "40" at width 80
    text = "A step of 23.1 ms at cluster.mfu " + "x" * 33 + " 40 %."
    lines = _wrap("Time", text, 80)
    assert all(len(line) <= 80 for line in lines)
    assert not any(line.strip().startswith("%") for line in lines), lines
    assert " ".join(line.strip() for line in lines).endswith("40 %.")
    assert "\u00a0" not in "".join(lines)
