"""Device-memory helpers (docs/accounts.md): the b S d L k activation figure and the card's usable room.

Memory per device is the execution model's (accounts/parallel.py through planning/execution.py):
the training state (accounts/training_state.py) and the activations of the fullest stage."""

from __future__ import annotations

from typing import Any


def retained_tensors(saved_tensors_per_layer: float, recompute: str, selective_keep: float) -> float:
    """Width-sized tensors kept per token per layer: k without recomputation, a share of k
    with selective recomputation, one hidden state with full recomputation (docs/accounts.md)."""
    if recompute == "full":
        return 1.0
    if recompute == "selective":
        return saved_tensors_per_layer * selective_keep
    return saved_tensors_per_layer


def activation_bytes(micro_batch: int, seq_len: int, width: int, layers: int, bytes_per_value: float,
                     tensors_per_layer: float) -> float:
    """b S d bytes L k."""
    return micro_batch * seq_len * width * bytes_per_value * layers * tensors_per_layer


def usable_memory(device_memory: Any, runtime_buffers: Any, headroom: Any) -> Any:
    """What is left for state and activations once buffers and headroom are set aside."""
    return device_memory / (1.0 + headroom) - runtime_buffers
