"""Bytes per element and per-parameter training state, read from data/dtypes.toml."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


@lru_cache(maxsize=1)
def _table() -> dict:
    from trainplan import catalogue

    return catalogue.table("dtypes")


def bytes_per_element(dtype: str) -> float:
    """Bytes one number takes in `dtype` (fp32 4, bf16 2, int8 1, int4 0.5)."""
    return float(_table()["bytes_per_element"][dtype])


@dataclass(frozen=True)
class StateBytes:
    """Persistent training state per parameter, in bytes."""

    weights: float
    grads: float
    master: float
    optimizer: float
    source: str

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.master + self.optimizer

    @property
    def restart(self) -> float:
        """What a checkpoint must hold to resume: everything but the gradients (14 for bf16 Adam)."""
        return self.weights + self.master + self.optimizer


def state_bytes_per_param(precision: str, optimizer: str) -> StateBytes:
    t = _table()
    s = t["training_state"][precision]
    return StateBytes(
        weights=float(s["weights"]),
        grads=float(s["grads"]),
        master=float(s["master"]),
        optimizer=float(t["optimizer_state"][optimizer]),
        source=f"{s['source']}; {t['optimizer_state']['source']}",
    )
