"""The network tiers and node platforms of catalogue/interconnect.toml, as typed records."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from trainplan import catalogue
from trainplan import units
from trainplan.errors import UserError

BITS_PER_BYTE = 8.0


@dataclass(frozen=True)
class Tier:
    """One kind of link: bandwidth per device per direction (B/s), achieved share, latency per step (s)."""

    key: str
    name: str
    bandwidth: float
    efficiency: float
    latency: float
    source: str

    @property
    def bus_bandwidth(self) -> float:
        """What NCCL's bus bandwidth reaches on this tier at large messages."""
        return self.bandwidth * self.efficiency


@dataclass(frozen=True)
class Platform:
    """A node around an accelerator: devices per node, its two tiers, NICs per device."""

    key: str
    devices_per_node: int
    intra: Tier
    inter: Tier
    nics_per_device: int
    matmul_efficiency: float
    source: str


def _rate(value: Any, where: str) -> float:
    text = str(value)
    if "bit" in text.lower():
        return units.parse(text, "bit_rate", where) / BITS_PER_BYTE
    return units.parse(text, "byte_rate", where)


def _raw() -> dict[str, Any]:
    return catalogue.table("interconnect")


@lru_cache(maxsize=1)
def tiers() -> dict[str, Tier]:
    out = {}
    for key, t in _raw()["tiers"].items():
        where = f"interconnect.tiers.{key}"
        out[key] = Tier(key=key, name=str(t["name"]), bandwidth=_rate(t["bandwidth"], f"{where}.bandwidth"),
                        efficiency=float(t["efficiency"]), latency=units.parse(t["latency"], "time", where),
                        source=str(t["source"]))
    return out


def tier(key: str, where: str = "tier") -> Tier:
    known = tiers()
    if key not in known:
        raise UserError(where, f"expected one of {', '.join(known)}, got {key!r}")
    return known[key]


@lru_cache(maxsize=None)
def platform(accelerator_key: str) -> Platform:
    """The node platform of a catalogue accelerator; `default` for any other."""
    raw = _raw()["platforms"]
    key = accelerator_key if accelerator_key in raw else "default"
    p = raw[key]
    return Platform(key=key, devices_per_node=int(p["devices_per_node"]), intra=tier(p["intra"]),
                    inter=tier(p["inter"]), nics_per_device=int(p["nics_per_device"]),
                    matmul_efficiency=float(p["matmul_efficiency"]), source=str(p["source"]))
