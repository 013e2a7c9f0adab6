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


def network_account(params: Any, grad_bytes_per_param: float, participants: Any, link_rate: Any,
                    step_seconds: Any, backward_share: float) -> NetworkAccount:
    message = params * grad_bytes_per_param
    ring = ring_allreduce_bytes(message, participants)
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
