"""Catalogues shipped as data (src/trainplan/data/*.toml), read into typed records."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from trainplan import units
from trainplan.errors import UserError, did_you_mean

PRECISIONS = ("bf16", "fp16", "fp32", "tf32", "fp8", "int8")


@dataclass(frozen=True)
class Accelerator:
    """One accelerator kind. All figures in SI units (FLOP/s, bytes, bytes/s, W)."""

    key: str
    name: str
    peak_flops: dict[str, float]  # dense peak per precision
    memory: float
    memory_bandwidth: float
    interconnect: float  # bytes/s per direction per device
    video_decoders: int
    tdp: float
    source: str
    overridden: tuple[str, ...] = field(default=())  # figures replaced by the user

    def peak(self, precision: str) -> float:
        """Dense peak FLOP/s in `precision`; an inline accelerator has one figure for all."""
        if precision in self.peak_flops:
            return self.peak_flops[precision]
        if "any" in self.peak_flops:
            return self.peak_flops["any"]
        raise UserError("training.precision", f"{self.key} has no peak figure for {precision!r}; "
                        f"it has {', '.join(sorted(self.peak_flops))}")


@lru_cache(maxsize=1)
def accelerators() -> dict[str, Accelerator]:
    from trainplan import catalogue

    raw = catalogue.table("accelerators")
    return {key: _accelerator_from_table(key, table, where="catalogue") for key, table in raw.items()}


def _accelerator_from_table(key: str, table: dict[str, Any], where: str) -> Accelerator:
    peaks = {
        p: units.parse(table[f"peak_flops_{p}"], "flop_rate", f"{where}.peak_flops_{p}")
        for p in PRECISIONS
        if f"peak_flops_{p}" in table
    }
    return Accelerator(
        key=key,
        name=str(table.get("name", key)),
        peak_flops=peaks,
        memory=units.parse(table["memory"], "bytes", f"{where}.memory"),
        memory_bandwidth=units.parse(table["memory_bandwidth"], "byte_rate", f"{where}.memory_bandwidth"),
        interconnect=units.parse(table["interconnect"], "byte_rate", f"{where}.interconnect"),
        video_decoders=int(table["video_decoders"]),
        tdp=units.parse(table["tdp"], "power", f"{where}.tdp"),
        source=str(table["source"]),
    )


# Figures a user may set on an accelerator (inline table or --set cluster.accelerator.X=...)
ACCELERATOR_FIGURES: dict[str, units.Dimension] = {
    "peak_flops": "flop_rate",
    "memory": "bytes",
    "memory_bandwidth": "byte_rate",
    "interconnect": "byte_rate",
    "tdp": "power",
    "video_decoders": "count",
}

# Plausible ranges of those figures (issue 16), inclusive, in SI units. Below the lows a device
# is not an accelerator (1 MB of memory would "fit" a model on billions of devices); the highs
# are 10^4 x today's largest (B200: 2.25e15 FLOP/s dense bf16, 192 GB, 8 TB/s, 1.8 TB/s
# NVLink, 1 kW; 14 video decoders on a Hopper/Blackwell board).
PLAUSIBLE_FIGURES: dict[str, tuple[float, float]] = {
    "peak_flops": (1e9, 1e20),
    "memory": (1e8, 1e16),
    "memory_bandwidth": (1e6, 1e17),
    "interconnect": (1e3, 1e17),
    "tdp": (1.0, 1e7),
    "video_decoders": (0, 1024),
}
ACCELERATOR_UNITS = {"peak_flops": "FLOP/s", "memory": "B", "memory_bandwidth": "B/s", "interconnect": "B/s",
                     "tdp": "W", "video_decoders": "engines"}

# What an inline accelerator assumes for the figures it does not give.
INLINE_DEFAULTS = {
    "memory_bandwidth": (2e12, "assumed: 2 TB/s, an A100-class HBM figure"),
    "interconnect": (25e9, "assumed: 25 GB/s, a 200 Gbit/s network card per device"),
    "tdp": (400.0, "assumed: 400 W, an A100-class board"),
    "video_decoders": (0, "assumed: no video-decode engines"),
}


def resolve_accelerator(spec: str | dict[str, Any], key: str = "cluster.accelerator") -> Accelerator:
    """A catalogue name, or a table: {name = "h100-sxm", memory = "64 GB"} overrides figures of an
    entry; {peak_flops = "200 TFLOPS", memory = "32 GB"} without a name is a custom device."""
    catalogue = accelerators()
    if isinstance(spec, str):
        name = spec.strip().lower()
        if name not in catalogue:
            raise UserError(key, f"unknown accelerator {spec!r}{did_you_mean(name, catalogue)}; "
                            f"known: {', '.join(catalogue)}")
        return catalogue[name]
    if not isinstance(spec, dict):
        raise UserError(key, "expected a catalogue name or a table with peak_flops and memory")
    unknown = set(spec) - set(ACCELERATOR_FIGURES) - {"name"}
    if unknown:
        field_name = sorted(unknown)[0]
        near = difflib.get_close_matches(field_name, list(ACCELERATOR_FIGURES) + ["name"], n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise UserError(f"{key}.{field_name}", f"unknown accelerator figure{hint}; "
                        f"expected one of name, {', '.join(ACCELERATOR_FIGURES)}")
    figures = {
        # a size given without its unit is refused below a megabyte ("80 bytes? write 80 GB")
        f: (units.parse_size(v, f"{key}.{f}") if ACCELERATOR_FIGURES[f] == "bytes"
            else units.parse(v, ACCELERATOR_FIGURES[f], f"{key}.{f}"))
        for f, v in spec.items() if f != "name"
    }
    for f, v in figures.items():
        if v <= 0 and f != "video_decoders":
            raise UserError(f"{key}.{f}", f"expected a positive value, got {v:g}")
        if v < 0:
            raise UserError(f"{key}.{f}", f"expected zero or more, got {v:g}")
        low, high = PLAUSIBLE_FIGURES[f]
        if not low <= v <= high:
            raise UserError(f"{key}.{f}", f"expected a value from {low:g} to {high:g} "
                            f"{ACCELERATOR_UNITS[f]} (a plausible range), got {v:g}")
        if f == "video_decoders" and v != int(v):
            raise UserError(f"{key}.{f}", f"expected a whole number, got {v:g}")
    if "name" in spec:
        base = resolve_accelerator(str(spec["name"]), key)  # the key a person writes: cluster.accelerator
        changes: dict[str, Any] = {}
        for f, v in figures.items():
            if f == "peak_flops":
                changes["peak_flops"] = {p: v for p in base.peak_flops} | {"any": v}
            elif f == "video_decoders":
                changes[f] = int(v)
            else:
                changes[f] = v
        return replace(base, **changes, overridden=tuple(sorted(figures)))
    missing = [f for f in ("peak_flops", "memory") if f not in figures]
    if missing:
        raise UserError(f"{key}.{missing[0]}", "a custom accelerator needs peak_flops and memory "
                        "(or name = a catalogue entry to start from)")
    return Accelerator(
        key="custom",
        name="custom accelerator",
        peak_flops={"any": figures["peak_flops"]},
        memory=figures["memory"],
        memory_bandwidth=figures.get("memory_bandwidth", INLINE_DEFAULTS["memory_bandwidth"][0]),
        interconnect=figures.get("interconnect", INLINE_DEFAULTS["interconnect"][0]),
        video_decoders=int(figures.get("video_decoders", INLINE_DEFAULTS["video_decoders"][0])),
        tdp=figures.get("tdp", INLINE_DEFAULTS["tdp"][0]),
        source="workload file (inline accelerator); unspecified figures: "
        + "; ".join(f"{k}: {s}" for k, (_, s) in INLINE_DEFAULTS.items() if k not in figures),
        overridden=tuple(sorted(figures)),
    )


@dataclass(frozen=True)
class PriceRow:
    """One dated, sourced on-demand price per accelerator-hour (catalogue/accelerator_prices.toml)."""

    key: str
    dollars_per_hour: float
    as_of: str
    retrieved: str
    source: str


@lru_cache(maxsize=1)
def price_table() -> dict[str, PriceRow]:
    """Indicative on-demand prices by catalogue key (catalogue/accelerator_prices.toml)."""
    from trainplan import catalogue

    return catalogue.rows("accelerator_prices", PriceRow)
