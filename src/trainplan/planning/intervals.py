"""The plan at the ends of a sample's intervals (issue 26): busy, cores, wall time and budget, low and high.

A workload written by a sampled `trainplan data inspect` carries, beside each corpus figure it
measured, that figure's interval (`[measured_interval]`, workload.schema.INTERVAL_KEYS). The plan is
evaluated at every corner of the box the intervals span (2^k points for k keys, one vectorised
evaluation: planning.evaluate.evaluate with arrays, as a sweep is) and each figure's least and
greatest value over the corners is its range. Every figure here is monotone in each corpus key
(more bits, pixels or hours never make decode cheaper or the run shorter), so the corners bound
it over the whole box. Each key's interval holds at the stated confidence on its own; the box
holds all of them at once with at least 1 - k (1 - confidence) (Bonferroni), which the line says.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from trainplan.workload.schema import INTERVAL_CONFIDENCE, INTERVAL_KEYS

if TYPE_CHECKING:
    from trainplan.planning.evaluate import PlanContext

#: The figures given a range, as (name in the section, figure of the evaluation).
RANGED: tuple[tuple[str, str], ...] = (("busy", "pipeline.busy"), ("cores_needed", "pipeline.cores_needed"),
                                       ("wall_seconds", "compute.wall_seconds"))


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def sample_range(ctx: PlanContext) -> dict[str, Any] | None:
    """The section `sample_range`: each ranged figure's low and high over the intervals' corners;
    None when no key of the workload came from a sample."""
    from trainplan.planning import evaluate as plan_mod
    from trainplan.planning.inputs import PlanInputs

    w = ctx.workload
    keys = [k for k in INTERVAL_KEYS if k in w.intervals]
    if not keys:
        return None
    corners = list(itertools.product(*(w.intervals[k] for k in keys)))
    arrays = {k: np.array([c[i] for c in corners], dtype=float) for i, k in enumerate(keys)}
    values = plan_mod.evaluate(PlanInputs.of(w, arrays), [figure for _, figure in RANGED])
    out: dict[str, Any] = {"confidence": INTERVAL_CONFIDENCE,
                           "joint_confidence": max(0.0, 1.0 - len(keys) * (1.0 - INTERVAL_CONFIDENCE)),
                           "keys": ", ".join(keys), "corners": len(corners)}
    for name, figure in RANGED:
        v = np.broadcast_to(np.asarray(values[figure], dtype=float), (len(corners),))
        out[f"{name}_low"], out[f"{name}_high"] = _finite_or_none(v.min()), _finite_or_none(v.max())
    walls = np.broadcast_to(np.asarray(values["compute.wall_seconds"], dtype=float), (len(corners),))
    if ctx.report.get("training_cost", {}).get("budget") is not None and np.isfinite(walls).all():
        budgets = [plan_mod.training_bill_for(w, float(s)).budget for s in walls]
        out["budget_low"], out["budget_high"] = min(budgets), max(budgets)
    return out
