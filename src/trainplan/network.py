"""Network account (SPEC §5): data-parallel gradient sync by ring all-reduce."""

from __future__ import annotations

from dataclasses import dataclass

# Below this share of the step the sync is reported negligible (a reporting threshold, not physics).
NEGLIGIBLE_SHARE_OF_STEP = 0.05


def ring_allreduce_bytes(message_bytes: float, participants: int) -> float:
    """Bytes each participant sends: 2 (N-1)/N M."""
    return 2.0 * (participants - 1) / participants * message_bytes


@dataclass(frozen=True)
class NetworkAccount:
    gradient_bytes: float
    ring_bytes_per_step: float
    link_rate: float
    floor_seconds_per_step: float
    step_seconds: float
    backward_seconds: float
    share_of_step: float
    verdict: str  # "none" | "negligible" | "overlap" | "bound"


def network_account(params: float, grad_bytes_per_param: float, participants: int, link_rate: float,
                    step_seconds: float, backward_share: float) -> NetworkAccount:
    message = params * grad_bytes_per_param
    ring = ring_allreduce_bytes(message, participants)
    floor = ring / link_rate
    backward = step_seconds * backward_share
    share = floor / step_seconds
    if participants == 1:
        verdict = "none"
    elif share <= NEGLIGIBLE_SHARE_OF_STEP:
        verdict = "negligible"
    elif floor <= backward:
        verdict = "overlap"  # must overlap with backward, and can hide there
    else:
        verdict = "bound"  # longer than backward: the step waits on the network
    return NetworkAccount(message, ring, link_rate, floor, step_seconds, backward, share, verdict)


VERDICT_TEXT = {
    "none": "one device: no gradient sync",
    "negligible": "the sync is a negligible share of the step",
    "overlap": "the sync must overlap with backward; it fits inside it",
    "bound": "the sync is longer than backward: the step waits on the network",
}
