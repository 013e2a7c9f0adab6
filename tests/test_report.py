"""The typed report: every figure declared once, formatted by its dimension, one evaluation path."""

from __future__ import annotations

import math

import pytest

from trainplan.planning.evaluate import build_report
from trainplan.planning.figures import DIMENSIONS, FIGURES
from trainplan.present.quantities import format_figure, json_safe, significant
from trainplan.present.render import flatten
from trainplan.workload.schema import load_workload

WORKLOADS = [
    [],
    ["data.kind=tokens", "training.tokens=2e9", "model.layers=16", "model.width=2048"],
    ["cluster.cores=4", "prices.data_hour=2"],
    ["cluster.count=8", "data.access=random"],
]


@pytest.mark.parametrize("sets", WORKLOADS)
def test_every_figure_of_the_report_is_declared(sets):
    report = build_report(load_workload(None, sets))
    undeclared = [k for k, v in flatten({s: v for s, v in report.items() if s not in ("assumptions", "verdict")}).items()
                  if k not in FIGURES and not isinstance(v, list)]
    assert undeclared == []


def test_declarations_are_complete():
    for f in FIGURES.values():
        assert f.dimension in DIMENSIONS and f.label and f.meaning, f


@pytest.mark.parametrize("value,dimension,text", [
    (9_484_010_905.6, "bytes", "9.48 GB"),  # memory.per_device_bytes of the default plan
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
