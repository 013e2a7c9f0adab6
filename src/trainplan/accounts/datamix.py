"""Data (docs/serving-scaling-energy.md): epochs of each source in a mixture, and human time per demonstration.

- A mixture reads `total_tokens` tokens, a share w_i of them from source i (weights are
  normalised to sum to 1). Tokens read from i = w_i x total; epochs of i = tokens read /
  tokens available. A source read more than once is repeated; Muennighoff et al. (2023)
  find up to about 4 epochs of repetition nearly as good as fresh data, and rapidly less
  beyond, so sources past that are flagged.
- Demonstrations (robot teleoperation, annotation): person-hours for N of them = N x (seconds
  per task + seconds per reset) / 3600 / success rate, since failed attempts cost the same time.

Pure: plain floats in, frozen dataclasses out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from trainplan.errors import UserError
from trainplan.units import SECONDS_PER_HOUR

USEFUL_REPEAT_EPOCHS = 4.0
"""Epochs of repeated data worth about as much as unique data (Muennighoff et al. 2023,
'Scaling Data-Constrained Language Models', §5: up to ~4 epochs, negligible loss change)."""



@dataclass(frozen=True)
class Source:
    """One source of a mixture: tokens available and its weight (share of tokens read)."""

    name: str
    tokens_available: float
    weight: float


@dataclass(frozen=True)
class SourceEpochs:
    name: str
    share: float  # normalised weight, 0-1
    tokens_available: float
    tokens_read: float
    epochs: float  # tokens read / tokens available
    repeated_beyond_useful: bool  # epochs > USEFUL_REPEAT_EPOCHS


@dataclass(frozen=True)
class MixtureEpochs:
    total_tokens: float
    sources: tuple[SourceEpochs, ...]
    max_epochs: float
    most_repeated: str
    unique_tokens_read: float  # sum of min(read, available)


def mixture_epochs(sources: Sequence[Source], total_tokens: float) -> MixtureEpochs:
    """Per-source epochs for a run of `total_tokens` tokens drawn by the mixture weights."""
    if not sources:
        raise UserError("sources", "expected at least one source")
    if not (math.isfinite(total_tokens) and total_tokens > 0):
        raise UserError("training.tokens", f"expected a positive token count, got {total_tokens!r}")
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise UserError(f"sources.{dup}", "expected each source named once")
    for s in sources:
        if not (math.isfinite(s.weight) and s.weight >= 0):
            raise UserError(f"sources.{s.name}.weight", f"expected zero or a positive weight, got {s.weight!r}")
        if not (math.isfinite(s.tokens_available) and s.tokens_available > 0):
            raise UserError(f"sources.{s.name}.tokens", f"expected a positive token count, got {s.tokens_available!r}")
    weight_sum = sum(s.weight for s in sources)
    if weight_sum <= 0:
        raise UserError("sources", "expected at least one source with a positive weight")
    rows = []
    for s in sources:
        share = s.weight / weight_sum
        read = share * total_tokens
        epochs = read / s.tokens_available
        rows.append(SourceEpochs(s.name, share, s.tokens_available, read, epochs, epochs > USEFUL_REPEAT_EPOCHS))
    top = max(rows, key=lambda r: r.epochs)
    return MixtureEpochs(
        total_tokens=total_tokens,
        sources=tuple(rows),
        max_epochs=top.epochs,
        most_repeated=top.name,
        unique_tokens_read=sum(min(r.tokens_read, r.tokens_available) for r in rows),
    )


@dataclass(frozen=True)
class DemonstrationTime:
    demonstrations: int
    seconds_per_task: float
    seconds_per_reset: float
    success_rate: float
    attempts: float  # demonstrations / success rate
    seconds: float
    person_hours: float
    operators: int
    wall_hours: float  # person-hours / operators


def demonstration_hours(demonstrations: int, seconds_per_task: float, seconds_per_reset: float,
                        success_rate: float = 1.0, operators: int = 1) -> DemonstrationTime:
    """Person-hours to collect `demonstrations` kept demonstrations: each attempt costs a task and
    a reset, and 1 / success_rate attempts are needed per kept one."""
    if demonstrations < 0:
        raise UserError("demonstrations", f"expected zero or more, got {demonstrations}")
    for key, v in (("seconds_per_task", seconds_per_task), ("seconds_per_reset", seconds_per_reset)):
        if not (math.isfinite(v) and v >= 0):
            raise UserError(key, f"expected zero or more seconds, got {v!r}")
    if not 0 < success_rate <= 1:
        raise UserError("success_rate", f"expected a fraction in (0, 1], got {success_rate!r}")
    if operators < 1:
        raise UserError("operators", f"expected at least one operator, got {operators}")
    attempts = demonstrations / success_rate
    seconds = attempts * (seconds_per_task + seconds_per_reset)
    hours = seconds / SECONDS_PER_HOUR
    return DemonstrationTime(
        demonstrations=demonstrations, seconds_per_task=seconds_per_task, seconds_per_reset=seconds_per_reset,
        success_rate=success_rate, attempts=attempts, seconds=seconds, person_hours=hours,
        operators=operators, wall_hours=hours / operators,
    )


def demonstrations_per_person_hour(seconds_per_task: float, seconds_per_reset: float,
                                   success_rate: float = 1.0) -> float:
    """Kept demonstrations one person collects in an hour: 3600 x success / (task + reset)."""
    one = demonstration_hours(1, seconds_per_task, seconds_per_reset, success_rate)
    if one.person_hours == 0:
        raise UserError("seconds_per_task", "expected a task or a reset that takes some time")
    return 1.0 / one.person_hours


def person_hours_for(examples: float, examples_per_person_hour: float) -> float:
    """Person-hours for `examples` examples from a source yielding `examples_per_person_hour`."""
    if not (math.isfinite(examples) and examples >= 0):
        raise UserError("examples", f"expected zero or more, got {examples!r}")
    if not (math.isfinite(examples_per_person_hour) and examples_per_person_hour > 0):
        raise UserError("examples_per_person_hour", f"expected a positive rate, got {examples_per_person_hour!r}")
    return examples / examples_per_person_hour
