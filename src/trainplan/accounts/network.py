"""Network thresholds (docs/accounts.md). The collectives of a step and their time are the
execution model's (accounts/parallel.py with accounts/collectives.py)."""

from __future__ import annotations

# Below this share of the step the sync is reported negligible (a reporting threshold, not physics).
NEGLIGIBLE_SHARE_OF_STEP = 0.05

VERDICT_TEXT = {
    "none": "one device: no gradient sync",
    "negligible": "the sync is a negligible share of the step",
    "overlap": "the sync must overlap with backward; it fits inside it",
    "bound": "the sync is longer than backward: the step waits on the network",
}
