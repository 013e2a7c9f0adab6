"""Compute account (docs/accounts.md): FLOPs, sustained rate, steps and time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# FLOPs per parameter per token of each pass (Kaplan et al. 2020, §2.1): the forward
# pass is 2 (one multiply-add per weight), the backward pass twice the forward.
FORWARD_FLOPS_PER_PARAM_TOKEN = 2.0
BACKWARD_FLOPS_PER_PARAM_TOKEN = 4.0


def training_flops(params: float, tokens: float, recompute: str) -> float:
    """F = 6 P D; full recomputation runs the forward pass twice: 8 P D.

    Selective recomputation re-runs only the attention core, whose FLOPs are not
    counted in 6PD (they scale with sequence length, not parameters), so it stays 6PD.
    """
    passes = FORWARD_FLOPS_PER_PARAM_TOKEN + BACKWARD_FLOPS_PER_PARAM_TOKEN
    if recompute == "full":
        passes += FORWARD_FLOPS_PER_PARAM_TOKEN
    return passes * params * tokens


def backward_share(recompute: str) -> float:
    """Share of a training step spent in backward (where gradient sync can hide)."""
    return BACKWARD_FLOPS_PER_PARAM_TOKEN / training_flops(1.0, 1.0, recompute)


def inference_flops_per_token(params: float) -> float:
    """2 P per generated token."""
    return FORWARD_FLOPS_PER_PARAM_TOKEN * params


def scaling_applies(count: Any, mfu_end_to_end: bool) -> Any:
    """Scaling efficiency is the loss of going from one device to n: none on one device, and
    never on top of an MFU measured end to end on n devices. Works on arrays."""
    return (np.asarray(count) != 1) & (not mfu_end_to_end)


def sustained_flops(count: Any, peak_flops: Any, mfu: Any, scaling_efficiency: Any,
                    mfu_end_to_end: bool) -> Any:
    """R = n Φ μ s, with s applied only where `scaling_applies`. Works on arrays."""
    s = np.where(scaling_applies(count, mfu_end_to_end), scaling_efficiency, 1.0)
    return count * peak_flops * mfu * s


@dataclass(frozen=True)
class ComputeAccount:
    """Each field a number, or an array when the arguments are arrays (trainplan sweep)."""

    flops: Any
    sustained_flops: Any  # FLOP/s across the cluster
    tokens_per_step: Any
    steps: Any  # whole steps: ceil(D / batch)
    seconds: Any
    seconds_per_step: Any
    scaling_applied: Any


def compute_account(params: Any, tokens: Any, count: Any, micro_batch: Any, seq_len: Any,
                    grad_accum: Any, peak_flops: Any, mfu: Any, scaling_efficiency: Any,
                    recompute: str, mfu_end_to_end: bool) -> ComputeAccount:
    flops = training_flops(params, tokens, recompute)
    rate = sustained_flops(count, peak_flops, mfu, scaling_efficiency, mfu_end_to_end)
    tokens_per_step = np.asarray(count * micro_batch * seq_len * grad_accum, dtype=np.float64)
    return ComputeAccount(
        flops=flops,
        sustained_flops=rate,
        tokens_per_step=tokens_per_step,
        steps=np.ceil(tokens / tokens_per_step),
        seconds=flops / rate,
        seconds_per_step=training_flops(params, tokens_per_step, recompute) / rate,
        scaling_applied=scaling_applies(count, mfu_end_to_end),
    )
