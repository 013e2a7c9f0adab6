"""Energy and emissions (docs/serving-scaling-energy.md): kWh = watts x hours x PUE; kg CO2 = kWh x grid intensity.

Watts are the IT power drawn (per device x devices; the accelerator's TDP by default, an upper
bound on what a busy board draws). PUE (power usage effectiveness) scales IT power to the
facility's. Grid intensity comes from a small dated table with a source per row
(data/grid_intensity.toml) or from the user, in grams of CO2(e) per kWh — the unit
`energy.grid_intensity` is parsed into.

Where codecarbon is installed, `measure_emissions` runs a callable under its tracker and
returns what it measured instead of what the formula assumes.

Pure apart from `grid_intensity_table` (reads the shipped table) and `measure_emissions`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from trainplan.errors import UserError, did_you_mean, require_non_negative
from trainplan.units import SECONDS_PER_HOUR

JOULES_PER_KWH = 3.6e6
"""1 kWh = 1,000 W x 3,600 s (definition)."""

GRAMS_PER_KG = 1000.0


@dataclass(frozen=True)
class GridIntensity:
    """One row of data/grid_intensity.toml."""

    region: str
    g_per_kwh: float
    year: int
    retrieved: str
    verified: bool
    scope: str  # "lifecycle" or "combustion"
    source: str


@lru_cache(maxsize=1)
def grid_intensity_table() -> dict[str, GridIntensity]:
    """The shipped table, by region key (ISO 3166 alpha-2 lower case, or 'world')."""
    from trainplan import catalogue

    return catalogue.rows("grid_intensity", GridIntensity, key_field="region")


REGION_ALIASES = {"uk": "gb", "usa": "us", "global": "world"}


def grid_intensity(region: str, key: str = "energy.region") -> GridIntensity:
    """The table's row for `region` (case-insensitive; 'uk' means 'gb')."""
    table = grid_intensity_table()
    name = region.strip().lower()
    name = REGION_ALIASES.get(name, name)
    if name not in table:
        raise UserError(key, f"unknown region {region!r}{did_you_mean(name, table)}; "
                        f"known: {', '.join(sorted(table))}")
    return table[name]


@dataclass(frozen=True)
class EnergyEstimate:
    """Energy of a job and its emissions. kWh and joules both; kg CO2(e)."""

    it_watts: float  # power drawn by the devices
    hours: float
    pue: float
    facility_watts: float  # it_watts x pue
    kwh: float
    joules: float
    grid_g_per_kwh: float
    kg_co2: float
    grid_source: str


def energy_estimate(watts: float, hours: float, pue: float, grid_g_per_kwh: float,
                    grid_source: str = "given") -> EnergyEstimate:
    """kWh = W x h x PUE / 1000; kg CO2 = kWh x g/kWh / 1000."""
    require_non_negative("energy.watts", watts)
    require_non_negative("hours", hours)
    if not (isinstance(pue, (int, float)) and math.isfinite(pue) and pue >= 1):
        raise UserError("energy.pue", f"expected a PUE of 1 or more, got {pue!r}")
    require_non_negative("energy.grid_intensity", grid_g_per_kwh)
    facility = watts * pue
    joules = facility * hours * SECONDS_PER_HOUR
    kwh = joules / JOULES_PER_KWH
    return EnergyEstimate(
        it_watts=watts, hours=hours, pue=pue, facility_watts=facility, kwh=kwh, joules=joules,
        grid_g_per_kwh=grid_g_per_kwh, kg_co2=kwh * grid_g_per_kwh / GRAMS_PER_KG, grid_source=grid_source,
    )


def training_energy(watts_per_device: float, devices: int, hours: float, pue: float,
                    grid_g_per_kwh: float | None, region: str) -> EnergyEstimate:
    """Energy of `devices` accelerators drawing `watts_per_device` for `hours` wall-clock hours.
    The grid figure is `grid_g_per_kwh` if given, else the table's row for `region`."""
    if devices < 1:
        raise UserError("cluster.count", f"expected at least one device, got {devices}")
    if grid_g_per_kwh is None:
        row = grid_intensity(region)
        grid_g_per_kwh = row.g_per_kwh
        source = f"{row.region}, {row.year}, {row.scope}: {row.source}"
    else:
        source = "energy.grid_intensity"
    return energy_estimate(watts_per_device * devices, hours, pue, grid_g_per_kwh, source)


@dataclass(frozen=True)
class MeasuredEnergy:
    """What codecarbon measured while a callable ran."""

    seconds: float
    kwh: float
    joules: float
    kg_co2: float
    source: str
    result: Any = None


def measure_emissions(fn: Callable[[], Any], project: str = "trainplan") -> MeasuredEnergy:
    """Run `fn()` under codecarbon's EmissionsTracker (which reads RAPL / NVML where it can and
    the grid intensity of its own location table) and return its energy and emissions."""
    try:
        from codecarbon import EmissionsTracker  # type: ignore[import-not-found]
    except ImportError:
        raise UserError("energy.measured", "codecarbon installed for a measured mode "
                        "(pip install 'trainplan[carbon]')") from None
    import codecarbon  # type: ignore[import-not-found]

    tracker = EmissionsTracker(project_name=project, save_to_file=False, log_level="error")
    start = time.perf_counter()
    tracker.start()
    try:
        result = fn()
    finally:
        kg = tracker.stop()
    seconds = time.perf_counter() - start
    data = getattr(tracker, "final_emissions_data", None)
    kwh = float(getattr(data, "energy_consumed", math.nan)) if data is not None else math.nan
    return MeasuredEnergy(
        seconds=seconds, kwh=kwh, joules=kwh * JOULES_PER_KWH, kg_co2=float(kg or 0.0),
        source=f"measured by codecarbon {getattr(codecarbon, '__version__', '?')}", result=result,
    )


