"""The plan at the ends of a sample's intervals (issue 26): `[measured_interval]` carried to busy,
cores, wall time and budget, on the first screen and in every format.

The expected ratios are derived by hand from the pipeline formulas (docs/accounts.md): decode
cost is proportional to the pixels of a frame, so the cores needed scale with data.pixels_per_frame;
while decode binds, busy = supply / demand scales with 1 / pixels_per_frame, the tokens trained
scale with data.hours, and the wall time (tokens / rate / busy) and the budget (wall time x devices
x price x attempts) with hours x pixels_per_frame."""

from __future__ import annotations

import json

import pytest

LOW_PIXELS, PIXELS, HIGH_PIXELS = 1.5e6, 2.0e6, 2.5e6
LOW_HOURS, HOURS, HIGH_HOURS = 900.0, 1000.0, 1100.0
WORKLOAD = f"""[data]
pixels_per_frame = {PIXELS}
hours = {HOURS}

[measured]
"data.pixels_per_frame" = "a sample"
"data.hours" = "a sample"

[measured_interval]
"data.pixels_per_frame" = [{LOW_PIXELS}, {HIGH_PIXELS}]
"data.hours" = [{LOW_HOURS}, {HIGH_HOURS}]
"""


@pytest.fixture
def sampled(tmp_path):
    path = tmp_path / "w.toml"
    path.write_text(WORKLOAD)
    return path


def test_the_range_scales_as_the_formulas_say(plan_json, sampled):
    report = plan_json(str(sampled))
    r = report["sample_range"]
    assert r["keys"] == "data.hours, data.pixels_per_frame" and r["corners"] == 4
    assert r["confidence"] == 0.95 and r["joint_confidence"] == pytest.approx(0.90)
    p = report["pipeline"]
    assert p["bottleneck"] == "decode"  # the premise of the ratios below
    assert r["cores_needed_low"] == pytest.approx(p["cores_needed"] * LOW_PIXELS / PIXELS, rel=1e-9)
    assert r["cores_needed_high"] == pytest.approx(p["cores_needed"] * HIGH_PIXELS / PIXELS, rel=1e-9)
    assert r["busy_low"] == pytest.approx(p["busy"] * PIXELS / HIGH_PIXELS, rel=1e-9)
    assert r["busy_high"] == pytest.approx(p["busy"] * PIXELS / LOW_PIXELS, rel=1e-9)
    wall, budget = report["compute"]["wall_seconds"], report["training_cost"]["budget"]
    low, high = LOW_HOURS * LOW_PIXELS / (HOURS * PIXELS), HIGH_HOURS * HIGH_PIXELS / (HOURS * PIXELS)
    assert r["wall_seconds_low"] == pytest.approx(wall * low, rel=1e-9)
    assert r["wall_seconds_high"] == pytest.approx(wall * high, rel=1e-9)
    assert r["budget_low"] == pytest.approx(budget * low, rel=1e-9)
    assert r["budget_high"] == pytest.approx(budget * high, rel=1e-9)


def test_the_low_high_line_is_on_the_first_screen_and_in_every_format(cli, sampled):
    screen = cli("plan", str(sampled))
    assert screen.returncode == 0, screen.stderr
    lines = [ln for ln in screen.stdout.splitlines() if ln.startswith("Sampled")]
    assert lines and "95 % intervals of data.hours, data.pixels_per_frame" in lines[0]
    head = screen.stdout.split("Accounts below")[0]
    assert "cores needed" in head and "budget $" in head
    report = json.loads(cli("plan", str(sampled), "--format", "json").stdout)
    assert report["answer"]["range"].startswith("95 % intervals")
    md = cli("plan", str(sampled), "--format", "markdown").stdout
    assert "**Sampled** 95 % intervals" in md
    html = cli("plan", str(sampled), "--format", "html").stdout
    assert "Sampled" in html and "95 % intervals of data.hours" in html


def test_a_key_set_on_the_command_line_has_no_interval(plan_json, sampled):
    r = plan_json(str(sampled), "--set", "data.hours=2000")["sample_range"]
    assert r["keys"] == "data.pixels_per_frame" and r["corners"] == 2
    plain = plan_json(str(sampled), "--set", "data.hours=2000", "--set", "data.pixels_per_frame=2e6")
    assert "sample_range" not in plain and "range" not in plain["answer"]


@pytest.mark.parametrize("table,key,expected", [
    ('"data.hours" = [1100.0, 900.0]', "measured_interval.data.hours", "low <= high"),
    ('"data.hours" = [0.0, 900.0]', "measured_interval.data.hours", "above 0"),
    ('"data.hours" = "wide"', "measured_interval.data.hours", "[low, high]"),
    ('"cluster.mfu" = [0.3, 0.5]', "measured_interval.cluster.mfu", "data.hours"),
])
def test_a_bad_interval_is_one_line_naming_the_key(cli, tmp_path, table, key, expected):
    path = tmp_path / "w.toml"
    path.write_text(f"[data]\nhours = 1000.0\n\n[measured_interval]\n{table}\n")
    res = cli("plan", str(path))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and key in res.stderr and expected in res.stderr
