"""The training bill: device-hours = F / (Phi mu s) / 3600, dollars = hours x price x attempts."""

from __future__ import annotations

import pytest

from trainplan.accounts import training_cost as tc
from trainplan.errors import UserError

# 7 B example model from its shape alone (32 layers, width 4,096, vocabulary 128,000)
PARAMS_7B = 12 * 4096**2 * 32 + 128_000 * 4096
TOKENS = 1e12
FLOPS = 6 * PARAMS_7B * TOKENS


def test_accelerator_hours_by_hand() -> None:
    hours = tc.accelerator_hours(FLOPS, 989.5e12, 0.4, 0.9)
    assert hours == pytest.approx(6 * PARAMS_7B * TOKENS / (989.5e12 * 0.4 * 0.9) / 3600)
    assert hours == pytest.approx(32_600, rel=0.01)


def test_bill_has_a_named_attempts_multiplier() -> None:
    assert tc.FAILED_ATTEMPTS == 3.0
    bill = tc.training_bill(1000.0, 3.0, attempts=3.0)
    assert bill.dollars_per_attempt == 3000.0 and bill.attempts == 3.0 and bill.budget == 9000.0
    assert tc.training_bill(1000.0, 3.0, attempts=1).budget == 3000.0
    with pytest.raises(UserError, match="prices.attempts"):
        tc.training_bill(1.0, 1.0, attempts=0.5)


def test_comparison_by_hand() -> None:
    options = [tc.AcceleratorOption("fast", 1000e12, 4.0), tc.AcceleratorOption("slow", 250e12, 1.0),
               tc.AcceleratorOption("unpriced", 500e12, None)]
    rows = tc.compare_accelerators(FLOPS, options, devices=64, mfu=0.4, scaling_efficiency=0.9, attempts=3.0)
    fast, slow, unpriced = rows
    assert fast.accelerator_hours == pytest.approx(FLOPS / (1000e12 * 0.36) / 3600)
    assert slow.accelerator_hours == pytest.approx(4 * fast.accelerator_hours)
    assert fast.wall_days == pytest.approx(fast.accelerator_hours / 64 / 24)
    assert fast.dollars_per_attempt == pytest.approx(fast.accelerator_hours * 4.0)
    assert fast.budget == pytest.approx(3 * fast.dollars_per_attempt)
    assert slow.dollars_per_attempt == pytest.approx(fast.dollars_per_attempt)  # 4x the hours at 1/4 the price
    assert unpriced.dollars_per_attempt is None and unpriced.budget is None


def test_catalogue_comparison() -> None:
    pytest.importorskip("trainplan.catalogue.accelerators")
    options = tc.catalogue_options("bf16", own_key="h100-sxm", own_price=2.5)
    keys = [o.key for o in options]
    assert "h100-sxm" in keys and "a100-sxm-80gb" in keys
    h100 = options[keys.index("h100-sxm")]
    assert h100.dollars_per_hour == 2.5 and h100.peak_flops == 989.5e12
    a100 = options[keys.index("a100-sxm-80gb")]
    assert a100.dollars_per_hour == tc.price_table()["a100-sxm-80gb"].dollars_per_hour
    rows = tc.compare_accelerators(FLOPS, options, 8, 0.4, 1.0, 3.0)
    by_key = {r.key: r for r in rows}
    assert by_key["a100-sxm-80gb"].accelerator_hours == pytest.approx(
        by_key["h100-sxm"].accelerator_hours * 989.5 / 312)


def test_price_table_is_sourced() -> None:
    for row in tc.price_table().values():
        assert row.dollars_per_hour > 0 and row.source and row.retrieved


def test_bad_input() -> None:
    with pytest.raises(UserError, match="cluster.mfu"):
        tc.accelerator_hours(1e20, 1e15, 0, 1.0)
    with pytest.raises(UserError, match="cluster.count"):
        tc.compare_accelerators(1e20, [], 0, 0.4, 1.0, 3.0)


def test_an_unpriced_workload_is_billed_at_its_own_accelerators_catalogue_price() -> None:
    # prices.accelerator_hour left out: the dated row of the accelerator named (CoreWeave's GB200 NVL72 at
    # $42.00/h for 4 GPUs), not the $3.00 H100 figure; the Cost line and the assumption say which
    from trainplan.workload.load import load_workload

    w = load_workload(None, ["cluster.accelerator=gb200"])
    assert w.prices.accelerator_hour == pytest.approx(42.00 / 4)
    assert "catalogue price of gb200" in w.provenance["prices.accelerator_hour"].source
    given = load_workload(None, ["cluster.accelerator=gb200", "prices.accelerator_hour=7"])
    assert given.prices.accelerator_hour == 7.0
    # no sourced row (Gaudi 3): the assumed figure stays, and its source says there is none
    g = load_workload(None, ["cluster.accelerator=gaudi3"])
    assert g.prices.accelerator_hour == 3.0
    assert "no sourced price for gaudi3" in g.provenance["prices.accelerator_hour"].source
    # an accelerator given as a table of figures is not a catalogue row: the assumed figure stays
    inline = load_workload(None, ['cluster.accelerator={peak_flops = "200 TFLOPS", memory = "32 GB"}'])
    assert inline.prices.accelerator_hour == 3.0


def test_the_cost_line_multiplies_the_catalogue_price() -> None:
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "trainplan", "plan", "--format", "json", "--set",
                          "cluster.accelerator=h100-nvl"], capture_output=True, text=True, check=True)
    plan = json.loads(out.stdout)
    hours = plan["training_cost"]["accelerator_hours"]
    assert plan["training_cost"]["dollars_per_attempt"] == pytest.approx(hours * 3.19, rel=1e-6)
