"""The bill of moving data (docs/pipeline-and-bill.md), in dollars per hour of data moved through training once.

Three terms, each linear in hours moved:
- bytes: the stored hour kept for `storage_months` months, plus reading it once (transfer);
- cores: the CPU cores fed to the accelerator, for as long as that hour takes to train on;
- idle accelerator: the wall time minus the useful time, at the accelerator-hour price.
Because every term is linear, transport per hour t is a fixed share t / p of any budget
spent on hours priced p, whatever the size of the budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from trainplan.units import SECONDS_PER_HOUR

GB = 1e9  # prices are quoted per decimal gigabyte


@dataclass(frozen=True)
class BillAccount:
    """Dollars per hour of data moved once (one epoch over that hour); numbers, or arrays
    when the arguments are arrays (trainplan sweep)."""

    accelerator_seconds: Any  # accelerator time one hour of data takes
    useful_seconds: Any  # of which training
    bytes: Any
    storage: Any
    transfer: Any
    cores: Any
    idle_accelerator: Any
    total: Any
    shares: dict[str, Any]


def bill_per_hour(*, frames_per_hour: Any, demand_fps: Any, busy: Any, cores: Any,
                  stored_bytes_per_hour: Any, read_bytes_per_hour: Any, accelerator_hour: Any,
                  core_hour: Any, storage_gb_month: Any, transfer_gb: Any,
                  storage_months: Any = 1.0) -> BillAccount:
    useful = frames_per_hour / demand_fps
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # inf is the answer at the extremes
        wall = np.where(busy > 0, useful / np.where(busy > 0, busy, 1.0), np.inf)
        storage = stored_bytes_per_hour / GB * storage_gb_month * storage_months
        transfer = read_bytes_per_hour / GB * transfer_gb
        # no cores and no supply: 0 x inf is NaN, an undefined cost, not a zero one
        core_cost = cores * wall / SECONDS_PER_HOUR * core_hour
        idle = (wall - useful) / SECONDS_PER_HOUR * accelerator_hour
        total = storage + transfer + core_cost + idle
        terms = {"bytes": storage + transfer, "cores": core_cost, "idle_accelerator": idle}
        shares = {k: np.where(total > 0, v / np.where(total > 0, total, 1.0), 0.0) for k, v in terms.items()}
    return BillAccount(wall, useful, storage + transfer, storage, transfer, core_cost, idle, total, shares)


def over_epochs(bill: BillAccount, epochs: float) -> float:
    """Dollars per hour of data trained on for `epochs` epochs: storage once, the rest each epoch."""
    return bill.storage + epochs * (bill.transfer + bill.cores + bill.idle_accelerator)


def transport_share(transport_per_hour: float, price_per_hour: float) -> float:
    """t / p: the share of a budget, spent on hours priced p, that moving them costs.
    Independent of the budget B: B buys B / p hours, whose transport costs t B / p."""
    return transport_per_hour / price_per_hour


def budget_split(budget: float, transport_per_hour: float, price_per_hour: float) -> dict[str, float]:
    """Hours bought with a budget and what their transport costs on top (shown linear in B)."""
    hours = budget / price_per_hour
    transport = transport_per_hour * hours
    return {"hours": hours, "transport": transport, "share": transport / budget}


def cost_per_useful_hour(price_per_hour: float, transport_per_hour: float, exchange_rate: float) -> float:
    """(p + t) / ρ: what one useful hour of a source costs, ρ useful hours per hour bought."""
    return (price_per_hour + transport_per_hour) / exchange_rate


def decoded_break_even_epochs_per_month(stored_bytes_per_hour: float, decoded_bytes_per_hour: float,
                                        storage_gb_month: float, decode_cost_per_epoch: float) -> float:
    """Epochs a month above which storing decoded frames (more bytes, no decoding) is cheaper than
    storing video and decoding it every epoch."""
    extra_storage = (decoded_bytes_per_hour - stored_bytes_per_hour) / GB * storage_gb_month
    return extra_storage / decode_cost_per_epoch if decode_cost_per_epoch > 0 else math.inf


def decode_cost_per_epoch(frames_per_hour: float, decoded_per_used: float, core_fps: float,
                          core_hour: float) -> float:
    """Core-hours to decode one hour of video once, in dollars."""
    return frames_per_hour * decoded_per_used / core_fps / SECONDS_PER_HOUR * core_hour


@dataclass(frozen=True)
class CoresDecision:
    cores_now: float
    cores_added: int
    busy_now: float
    busy_after: float
    extra_core_cost: float  # dollars per hour of data, per epoch
    idle_removed: float  # dollars per hour of data, per epoch
    net_saving: float
    bottleneck_after: str = "accelerator"  # what binds with the cores added (the pipeline account's bottleneck)


def add_cores_decision(bill_now: BillAccount, bill_after: BillAccount, cores_now: float, cores_added: int,
                       busy_now: float, busy_after: float, bottleneck_after: str = "accelerator") -> CoresDecision:
    extra = bill_after.cores - bill_now.cores
    removed = bill_now.idle_accelerator - bill_after.idle_accelerator
    return CoresDecision(cores_now, cores_added, busy_now, busy_after, extra, removed, removed - extra,
                         bottleneck_after)
