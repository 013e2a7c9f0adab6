"""Compute account (SPEC §3): FLOPs, sustained rate, steps and time."""

from __future__ import annotations

import math
from dataclasses import dataclass

# FLOPs per parameter per token of each pass (Kaplan et al. 2020, §2.1): the forward
# pass is 2 (one multiply-add per weight), the backward pass twice the forward.
FORWARD_FLOPS_PER_PARAM_TOKEN = 2.0
BACKWARD_FLOPS_PER_PARAM_TOKEN = 4.0


def training_flops(params: float, tokens: float, recompute: str = "none") -> float:
    """F = 6 P D; full recomputation runs the forward pass twice: 8 P D.

    Selective recomputation re-runs only the attention core, whose FLOPs are not
    counted in 6PD (they scale with sequence length, not parameters), so it stays 6PD.
    """
    passes = FORWARD_FLOPS_PER_PARAM_TOKEN + BACKWARD_FLOPS_PER_PARAM_TOKEN
    if recompute == "full":
        passes += FORWARD_FLOPS_PER_PARAM_TOKEN
    return passes * params * tokens


def backward_share(recompute: str = "none") -> float:
    """Share of a training step spent in backward (where gradient sync can hide)."""
    return BACKWARD_FLOPS_PER_PARAM_TOKEN / training_flops(1.0, 1.0, recompute)


def inference_flops_per_token(params: float) -> float:
    """2 P per generated token."""
    return FORWARD_FLOPS_PER_PARAM_TOKEN * params


def sustained_flops(count: int, peak_flops: float, mfu: float, scaling_efficiency: float,
                    mfu_end_to_end: bool = False) -> float:
    """R = n Φ μ s. Scaling efficiency is the loss of going from one device to n, so it is
    1 on one device, and never applied on top of an MFU measured end to end on n devices."""
    s = 1.0 if (count == 1 or mfu_end_to_end) else scaling_efficiency
    return count * peak_flops * mfu * s


@dataclass(frozen=True)
class ComputeAccount:
    flops: float
    sustained_flops: float  # FLOP/s across the cluster
    tokens_per_step: float
    steps: int
    seconds: float
    seconds_per_step: float
    scaling_applied: bool


def compute_account(params: float, tokens: float, count: int, micro_batch: int, seq_len: int,
                    grad_accum: int, peak_flops: float, mfu: float, scaling_efficiency: float,
                    recompute: str = "none", mfu_end_to_end: bool = False) -> ComputeAccount:
    flops = training_flops(params, tokens, recompute)
    rate = sustained_flops(count, peak_flops, mfu, scaling_efficiency, mfu_end_to_end)
    tokens_per_step = float(count * micro_batch * seq_len * grad_accum)
    steps = math.ceil(tokens / tokens_per_step)
    seconds = flops / rate
    return ComputeAccount(
        flops=flops,
        sustained_flops=rate,
        tokens_per_step=tokens_per_step,
        steps=steps,
        seconds=seconds,
        seconds_per_step=training_flops(params, tokens_per_step, recompute) / rate,
        scaling_applied=not (count == 1 or mfu_end_to_end),
    )
