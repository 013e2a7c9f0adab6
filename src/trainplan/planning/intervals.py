"""The plan at the ends of a sample's intervals (issue 26): busy, cores, wall time and budget, low and high.

A workload written by a sampled `trainplan data inspect` carries, beside each corpus figure it
measured, that figure's interval (`[measured_interval]`, workload.schema.INTERVAL_KEYS). The plan is
evaluated at every corner of the box the intervals span (2^k points for k keys, one vectorised
evaluation: planning.evaluate.evaluate with arrays, as a sweep is; its section builder,
evaluate.sample_range_section, calls it) and each figure's least and greatest value over the corners
is its range. Every figure here is monotone in each corpus key (more bits, pixels or hours never
make decode cheaper or the run shorter), so the corners bound it over the whole box. Each key's
interval holds at the stated confidence on its own; the box holds all of them at once with at
least 1 - k (1 - confidence) (Bonferroni), which the section says.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping

import numpy as np

from trainplan.workload.schema import INTERVAL_CONFIDENCE, INTERVAL_KEYS

#: The figures given a range, as (name in the section, figure of the evaluation); the budget's range
#: comes from the wall times (evaluate.training_bill_for).
RANGED: tuple[tuple[str, str], ...] = (("busy", "pipeline.busy"), ("cores_needed", "pipeline.cores_needed"),
                                       ("wall_seconds", "compute.wall_seconds"))


def corners(intervals: Mapping[str, tuple[float, float]]) -> dict[str, np.ndarray]:
    """Every corner of the intervals' box, one array a key (INTERVAL_KEYS order); {} for none."""
    keys = [k for k in INTERVAL_KEYS if k in intervals]
    points = list(itertools.product(*(intervals[k] for k in keys)))
    return {k: np.array([p[i] for p in points], dtype=float) for i, k in enumerate(keys)}


def section(arrays: Mapping[str, np.ndarray], values: Mapping[str, Any],
            budgets: list[float] | None) -> dict[str, Any]:
    """The section `sample_range` from the corners and the figures evaluated there (the cleaner
    turns a non-finite bound, a run that never ends, into null)."""
    n = len(next(iter(arrays.values())))  # corners
    out: dict[str, Any] = {"confidence": INTERVAL_CONFIDENCE,
                           "joint_confidence": max(0.0, 1.0 - len(arrays) * (1.0 - INTERVAL_CONFIDENCE)),
                           "keys": ", ".join(arrays), "corners": n}
    for name, figure in RANGED:
        v = np.broadcast_to(np.asarray(values[figure], dtype=float), (n,))
        out[f"{name}_low"], out[f"{name}_high"] = float(v.min()), float(v.max())
    if budgets is not None:
        out["budget_low"], out["budget_high"] = min(budgets), max(budgets)
    return out
