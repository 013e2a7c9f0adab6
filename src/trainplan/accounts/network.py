"""Network account (docs/accounts.md): data-parallel gradient sync by ring all-reduce."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# Below this share of the step the sync is reported negligible (a reporting threshold, not physics).
NEGLIGIBLE_SHARE_OF_STEP = 0.05


def ring_allreduce_bytes(message_bytes: float, participants: int) -> float:
    """Bytes each participant sends: 2 (N-1)/N M."""
    return 2.0 * (participants - 1) / participants * message_bytes


@dataclass(frozen=True)
class NetworkAccount:
    """Each field a number, or an array when the arguments are arrays (trainplan sweep)."""

    gradient_bytes: Any
    ring_bytes_per_step: Any
    link_rate: Any
    floor_seconds_per_step: Any
    step_seconds: Any
    backward_seconds: Any
    share_of_step: Any
    verdict: Any  # "none" | "negligible" | "overlap" | "bound"


def zero3_bytes(grad_message: Any, weight_message: Any, participants: Any, micro_steps: Any = 1) -> Any:
    """Bytes each participant sends per step under ZeRO-3/FSDP: every micro-step all-gathers the
    weights for forward and again for backward, and reduce-scatters the gradients, each
    (N-1)/N of its buffer (Rajbhandari et al. 2020: 1.5x the all-reduce of plain data parallelism)."""
    share = (participants - 1) / participants
    return micro_steps * share * (2.0 * weight_message + grad_message)


def network_account(params: Any, grad_bytes_per_param: float, participants: Any, link_rate: Any,
                    step_seconds: Any, backward_share: float, zero: int = 0, weight_bytes_per_param: float = 0.0,
                    micro_steps: Any = 1) -> NetworkAccount:
    message = params * grad_bytes_per_param
    ring = ring_allreduce_bytes(message, participants)
    if zero >= 3:
        # ZeRO-3's parameter all-gathers were not counted before (the ring of zero 0 and 3 was the same)
        ring = zero3_bytes(message, params * weight_bytes_per_param, participants, micro_steps)
    floor = ring / link_rate
    backward = step_seconds * backward_share
    share = floor / step_seconds
    verdict = np.select(
        [np.asarray(participants) == 1, share <= NEGLIGIBLE_SHARE_OF_STEP, floor <= backward],
        # overlap: must overlap with backward, and can hide there; bound: the step waits on the network
        ["none", "negligible", "overlap"], "bound")
    return NetworkAccount(message, ring, link_rate, floor, step_seconds, backward, share, verdict)


VERDICT_TEXT = {
    "none": "one device: no gradient sync",
    "negligible": "the sync is a negligible share of the step",
    "overlap": "the sync must overlap with backward; it fits inside it",
    "bound": "the sync is longer than backward: the step waits on the network",
}
