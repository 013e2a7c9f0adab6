"""The planning questions a plan ends on, turned into figures and sentences of the verdict.

- Sanity checks on a plan with a serving side:
  1. cost per request above what a request earns (`serving.revenue_per_request`): every request
     loses money, which ends the project as planned;
  2. serving passes the training bill inside a month (crossover < DAYS_PER_MONTH): serving, not
     training, is where optimisation pays;
  3. a training bill under RUN_IT_BELOW_DOLLARS: running it costs less than planning it further.
- Failed runs: the bill is one clean run x `prices.attempts`; the verdict says how many.
- Retraining: with `training.retrain_every` = T, training recurs DAYS_PER_YEAR / T times a year and
  costs budget x that a year, reported beside serving's cost a year (cost a day x DAYS_PER_YEAR).
- Data loading against compute, per step of load time l and compute time c:
  without overlap the step is l + c and the accelerator is busy c / (l + c); with overlap
  (prefetch) the step is max(l, c) and busy c / max(l, c); overlap speeds the step up by
  (l + c) / max(l, c), at most 2x (l = c). With l > c the loader is the ceiling.

Pure: plain numbers in, frozen dataclasses and sentences out; `decide` reads a workload and a
report dict (planning/evaluate.py) and returns the report's `decisions` section.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from trainplan.errors import UserError
from trainplan.units import format_figure
from trainplan.workload.schema import is_given

DAYS_PER_MONTH = 30.0
"""'Inside a month', the lessons' horizon for serving overtaking training: 30 days."""

DAYS_PER_YEAR = 365.0
SECONDS_PER_DAY = 86400.0

RUN_IT_BELOW_DOLLARS = 100.0
"""The lessons' rule: a training bill under $100 costs less than an afternoon of planning; run it."""


def dollars(x: float) -> str:
    """An amount as every report writes it (units.format_figure's dollars: $196,685, $12.35, $0.0000393)."""
    return format_figure(x, "dollars")


# ---------------------------------------------------------------- data loading against compute


@dataclass(frozen=True)
class Overlap:
    load_seconds: float  # per step
    compute_seconds: float  # per step
    serial_step_seconds: float  # l + c: load, then compute
    overlapped_step_seconds: float  # max(l, c): the next batch loads while this one computes
    serial_utilisation: float  # c / (l + c)
    overlapped_utilisation: float  # c / max(l, c)
    speedup: float  # (l + c) / max(l, c)
    ceiling: str  # "loader" when l > c, else "compute"


def overlap(load_seconds: float, compute_seconds: float) -> Overlap:
    """The step with and without overlapping the load with compute."""
    if not (math.isfinite(load_seconds) and load_seconds >= 0):
        raise UserError("load_seconds", f"expected zero or more seconds, got {load_seconds!r}")
    if not (math.isfinite(compute_seconds) and compute_seconds > 0):
        raise UserError("compute_seconds", f"expected a positive number of seconds, got {compute_seconds!r}")
    serial = load_seconds + compute_seconds
    overlapped = max(load_seconds, compute_seconds)
    return Overlap(
        load_seconds=load_seconds, compute_seconds=compute_seconds,
        serial_step_seconds=serial, overlapped_step_seconds=overlapped,
        serial_utilisation=compute_seconds / serial, overlapped_utilisation=compute_seconds / overlapped,
        speedup=serial / overlapped, ceiling="loader" if load_seconds > compute_seconds else "compute",
    )


NEGLIGIBLE_SPEEDUP = 1.01
"""Below a 1 % gain, overlapping load and compute is not worth a sentence of its own."""


def _ms(seconds: float) -> str:
    # each in its own prefix ("21.8 µs a step against 1.88 s"), not both in ms ("0.0218 ms ... 1,884 ms")
    return format_figure(seconds, "seconds")


def overlap_sentence(o: Overlap) -> str:
    if o.speedup < NEGLIGIBLE_SPEEDUP:
        return (f"Loading ({_ms(o.load_seconds)} a step) is negligible against {_ms(o.compute_seconds)} of "
                f"compute: overlapping them gains under 1 %.")
    text = (f"Loading takes {_ms(o.load_seconds)} a step against {_ms(o.compute_seconds)} of "
            f"compute: without overlap a step is {_ms(o.serial_step_seconds)} and the accelerator "
            f"{o.serial_utilisation * 100:.0f} % busy; overlapping them makes it "
            f"{_ms(o.overlapped_step_seconds)} ({o.speedup:.2g}x faster, "
            f"{o.overlapped_utilisation * 100:.0f} % busy).")
    if o.ceiling == "loader":
        text += " The loader is the ceiling: only a faster loader speeds this up further."
    return text


# ---------------------------------------------------------------- sanity checks


@dataclass(frozen=True)
class Check:
    name: str
    applies: bool  # the check could be made (its figures are known)
    triggered: bool
    sentence: str  # empty when not triggered


def revenue_check(cost_per_request: float | None, revenue_per_request: float | None) -> Check:
    """A request that costs more than it earns ends the project."""
    if cost_per_request is None or revenue_per_request is None:  # revenue is optional
        return Check("cost_above_revenue", False, False, "")
    hit = cost_per_request > revenue_per_request
    sentence = (f"Serving costs {dollars(cost_per_request)} a request, more than the {dollars(revenue_per_request)} a "
                f"request earns: every request loses money, which ends the project as planned." if hit else "")
    return Check("cost_above_revenue", True, hit, sentence)


def crossover_check(crossover_days: float | None) -> Check:
    """Serving that passes training inside a month: optimise serving first."""
    if crossover_days is None or not math.isfinite(crossover_days):
        return Check("serving_passes_training_within_a_month", False, False, "")
    hit = crossover_days < DAYS_PER_MONTH
    hours = crossover_days * 24
    after = (f"{crossover_days:,.1f} days" if crossover_days >= 1 else f"{hours:.2g} hours" if hours >= 1
             else f"{hours * 60:.2g} minutes")
    sentence = (f"Serving passes the training bill after {after}, inside a month: optimise "
                f"serving (smaller, distilled or quantised model, bigger batches) before training." if hit else "")
    return Check("serving_passes_training_within_a_month", True, hit, sentence)


def small_bill_check(training_budget: float | None) -> Check:
    """A bill under $100: stop planning and run it."""
    if training_budget is None or not math.isfinite(training_budget):
        return Check("training_under_100_dollars", False, False, "")
    hit = training_budget < RUN_IT_BELOW_DOLLARS
    sentence = (f"Training costs {dollars(training_budget)} in all, under ${RUN_IT_BELOW_DOLLARS:,.0f}: stop planning "
                f"and run it." if hit else "")
    return Check("training_under_100_dollars", True, hit, sentence)


def attempts_sentence(dollars_per_attempt: float, attempts: float, budget: float) -> str:
    return (f"The training bill budgets {attempts:g} attempts for failed runs and restarts "
            f"(prices.attempts): {dollars(dollars_per_attempt)} for one clean run, {dollars(budget)} in all.")


# ---------------------------------------------------------------- recurring costs


@dataclass(frozen=True)
class Recurring:
    retrain_every_seconds: float | None  # None: trained once
    trainings_per_year: float
    training_per_year: float  # dollars
    serving_per_year: float | None  # dollars; None without a serving side
    total_per_year: float | None


def recurring(training_budget: float, retrain_every_seconds: float | None,
              serving_cost_per_day: float | None) -> Recurring:
    """Training as a recurring cost: budget x (a year / retrain_every), beside serving x 365 days."""
    if retrain_every_seconds is None:
        per_year = 0.0
    else:
        if not (math.isfinite(retrain_every_seconds) and retrain_every_seconds > 0):
            raise UserError("training.retrain_every", f"expected a positive duration, got {retrain_every_seconds!r}")
        per_year = DAYS_PER_YEAR * SECONDS_PER_DAY / retrain_every_seconds
    serving = None if serving_cost_per_day is None or not math.isfinite(serving_cost_per_day) \
        else serving_cost_per_day * DAYS_PER_YEAR
    training = training_budget * per_year
    return Recurring(retrain_every_seconds, per_year, training, serving,
                     None if serving is None else training + serving)


def recurring_sentence(r: Recurring) -> str:
    if r.retrain_every_seconds is None:
        return ""
    days = r.retrain_every_seconds / SECONDS_PER_DAY
    text = (f"Retrained every {days:,.4g} days ({r.trainings_per_year:,.3g} times a year), training costs "
            f"${r.training_per_year:,.0f} a year")
    if r.serving_per_year is not None:
        text += f" beside ${r.serving_per_year:,.0f} a year of serving"
    return text + "."


# ---------------------------------------------------------------- the report's section


def _finite(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def has_serving_side(w: Any) -> bool:
    """Whether the workload plans serving at all: some serving.* key written in the file, on the
    command line or measured (the defaults alone describe no serving side)."""
    return any(key.startswith("serving.") and is_given(prov) for key, prov in w.provenance.items())


def decide(w: Any, report: dict[str, Any]) -> dict[str, Any]:
    """The `decisions` section of a plan report: checks, attempts, recurring cost, overlap, sentences."""
    out: dict[str, Any] = {}
    sentences: list[str] = []
    tc = report.get("training_cost", {})
    budget = _finite(tc.get("budget"))
    if budget is not None:
        out["attempts"] = {"attempts": tc["attempts"], "dollars_per_attempt": tc["dollars_per_attempt"],
                           "budget": budget}
        sentences.append(attempts_sentence(float(tc["dollars_per_attempt"]), float(tc["attempts"]), budget))

    sv = report.get("serving", {})
    serving = has_serving_side(w) and "skipped" not in sv and sv.get("fits") is True
    checks = []
    if serving:
        per_day = _finite(sv.get("serving_cost_per_day"))
        demand = _finite(sv.get("requests_per_day"))
        # what is paid per request at the planned demand (whole replicas all day), at least the
        # full-load figure
        paid = per_day / demand if per_day is not None and demand else _finite(sv.get("cost_per_request"))
        out["cost_per_request_paid"] = paid
        checks = [revenue_check(paid, w.serving.revenue_per_request),
                  crossover_check(_finite(sv.get("crossover_days")))]
    checks.append(small_bill_check(budget))
    out["checks"] = [asdict(c) for c in checks]
    sentences += [c.sentence for c in checks if c.triggered]

    if budget is not None:
        r = recurring(budget, w.training.retrain_every,
                      _finite(sv.get("serving_cost_per_day")) if serving else None)
        out["recurring"] = asdict(r)
        if recurring_sentence(r):
            sentences.append(recurring_sentence(r))

    o = plan_overlap(report, w.cluster.count)
    if o is not None:
        out["loading"] = asdict(o)
        sentences.append(overlap_sentence(o))
    out["sentences"] = sentences
    return out


def plan_overlap(report: dict[str, Any], devices: int = 1) -> Overlap | None:
    """Load and compute time of one step, where the plan knows both: a device's tokens per step over
    the input pipeline's supply, against the compute account's seconds per step."""
    comp, pipe = report.get("compute", {}), report.get("pipeline", {})
    compute_s = _finite(comp.get("seconds_per_step"))
    supply = _finite(pipe.get("supply_tokens_per_second"))
    tokens = _finite(comp.get("tokens_per_step"))
    if compute_s is None or compute_s <= 0 or supply is None or supply <= 0 or tokens is None:
        return None  # an unlimited (or absent) supply: no load time to weigh
    load = tokens / devices / supply
    if not math.isfinite(load):
        return None  # a supply so small the load time overflows: the pipeline verdict says it binds
    return overlap(load, compute_s)


def sentences(report: dict[str, Any]) -> list[str]:
    """The decisions' sentences of a report (empty when it has none): the renderer's hook."""
    return list(report.get("decisions", {}).get("sentences", []))
