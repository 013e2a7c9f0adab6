"""The training bill: accelerator-hours x price, budgeted for the attempts a run really takes.

- Accelerator-hours for F FLOP on devices of dense peak Phi at MFU mu and scaling efficiency s
  (docs/accounts.md): the sustained rate on n devices is n Phi mu s, the wall time F / (n Phi mu s), and
  the device-hours n x that = F / (Phi mu s) / 3600, independent of n.
- Dollars of one attempt = accelerator-hours x price per accelerator-hour; the budget is that x
  an attempts multiplier for failed runs, restarts and ablations (default 3, FAILED_ATTEMPTS).
- A comparison of accelerators for one workload: hours, wall-clock days on n devices, dollars.

Pure apart from `price_table` (catalogue/accelerators.py reads catalogue/accelerator_prices.toml). Floats in SI units in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from trainplan.catalogue.accelerators import PriceRow, price_table  # noqa: F401 - the price table, read here
from trainplan.errors import UserError, require_fraction, require_non_negative, require_positive
from trainplan.units import SECONDS_PER_HOUR

FAILED_ATTEMPTS = 3.0
"""Budget multiplier over one clean run, for failed attempts, restarts and ablations. An
assumption (issue 5; the workload's `prices.attempts` has the same default): published
'training cost' figures usually count the final run only (e.g. DeepSeek-V3's report excludes
'prior research and ablation experiments'), and the whole spend is a multiple of it."""

SECONDS_PER_DAY = 86400.0


def accelerator_hours(flops: float, peak_flops: float, mfu: float, scaling_efficiency: float) -> float:
    """Device-hours to do `flops` FLOP: F / (Phi mu s) / 3600 (the same on any number of devices)."""
    require_positive("compute.flops", flops)
    require_positive("peak_flops", peak_flops)
    require_fraction("cluster.mfu", mfu)
    require_fraction("cluster.scaling_efficiency", scaling_efficiency)
    return flops / (peak_flops * mfu * scaling_efficiency) / SECONDS_PER_HOUR


@dataclass(frozen=True)
class TrainingBill:
    accelerator_hours: float
    dollars_per_accelerator_hour: float
    dollars_per_attempt: float  # one clean run
    attempts: float  # budget multiplier
    budget: float  # dollars_per_attempt x attempts


def training_bill(accelerator_hours_: float, dollars_per_accelerator_hour: float,
                  attempts: float) -> TrainingBill:
    """accelerator-hours x price, and that x `attempts` as the budget."""
    require_non_negative("accelerator_hours", accelerator_hours_)
    require_non_negative("prices.accelerator_hour", dollars_per_accelerator_hour)
    if not (math.isfinite(attempts) and attempts >= 1):
        raise UserError("prices.attempts", f"expected a multiplier of 1 or more, got {attempts!r}")
    one = accelerator_hours_ * dollars_per_accelerator_hour
    return TrainingBill(accelerator_hours_, dollars_per_accelerator_hour, one, attempts, one * attempts)


@dataclass(frozen=True)
class AcceleratorOption:
    """What the comparison needs of an accelerator; build it from a catalogue entry."""

    key: str
    peak_flops: float  # dense, in the training precision
    dollars_per_hour: float | None  # None: no price known
    price_source: str = ""
    name: str = ""  # the accelerator as its vendor names it (the key when none is given)


@dataclass(frozen=True)
class AcceleratorComparison:
    key: str
    devices: int
    accelerator_hours: float
    wall_seconds: float
    wall_days: float
    dollars_per_hour: float | None
    dollars_per_attempt: float | None
    budget: float | None  # x attempts
    price_source: str
    name: str = ""  # the accelerator as its vendor names it


def compare_accelerators(flops: float, options: Sequence[AcceleratorOption], devices: int, mfu: float,
                         scaling_efficiency: float, attempts: float) -> tuple[AcceleratorComparison, ...]:
    """One workload of `flops` FLOP on `devices` of each accelerator, same MFU and efficiency.
    Rows in the order given; rows without a price have no dollars."""
    if devices < 1:
        raise UserError("cluster.count", f"expected at least one device, got {devices}")
    rows = []
    for opt in options:
        hours = accelerator_hours(flops, opt.peak_flops, mfu, scaling_efficiency)
        wall = hours * SECONDS_PER_HOUR / devices
        if opt.dollars_per_hour is None:
            one = budget = None
        else:
            bill = training_bill(hours, opt.dollars_per_hour, attempts)
            one, budget = bill.dollars_per_attempt, bill.budget
        rows.append(AcceleratorComparison(
            key=opt.key, devices=devices, accelerator_hours=hours, wall_seconds=wall,
            wall_days=wall / SECONDS_PER_DAY, dollars_per_hour=opt.dollars_per_hour,
            dollars_per_attempt=one, budget=budget, price_source=opt.price_source, name=opt.name or opt.key,
        ))
    return tuple(rows)


def catalogue_options(precision: str, own_key: str | None = None,
                      own_price: float | None = None) -> tuple[AcceleratorOption, ...]:
    """Every catalogue accelerator with a peak in `precision`, priced from the price table;
    `own_key` (the workload's accelerator) is priced at `own_price` (its prices.accelerator_hour)."""
    from trainplan.catalogue import accelerators as catalogue

    prices = price_table()
    out = []
    for key, acc in catalogue.accelerators().items():
        if precision not in acc.peak_flops and "any" not in acc.peak_flops:
            continue
        if key == own_key and own_price is not None:
            price: float | None = own_price
            source = "prices.accelerator_hour of the workload"
        elif key in prices:
            price, source = prices[key].dollars_per_hour, prices[key].source
        else:
            price, source = None, "no price with a source in catalogue/accelerator_prices.toml"
        out.append(AcceleratorOption(key=key, peak_flops=acc.peak(precision), dollars_per_hour=price, name=acc.name,
                                     price_source=source))
    return tuple(out)
