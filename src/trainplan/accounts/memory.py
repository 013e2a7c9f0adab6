"""Device-memory account (docs/accounts.md): persistent state, activations, buffers, headroom."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trainplan.catalogue.dtypes import StateBytes


@dataclass(frozen=True)
class MemoryAccount:
    """Each field a number, or an array when the arguments are arrays (trainplan sweep)."""

    weights_bytes: Any
    grads_bytes: Any
    optimizer_bytes: Any  # fp32 master + moments
    state_bytes: Any
    activation_bytes: Any
    runtime_buffers: Any
    headroom_bytes: Any
    per_device_bytes: Any
    device_memory: Any
    fits: Any
    devices_to_run: Any  # 0: buffers and headroom alone fill the card
    devices_to_train: Any  # NaN: activations alone overflow the card


def sharded_state(params: float, state: StateBytes, zero: int, data_parallel: int) -> tuple[float, float, float]:
    """Per-device (weights, grads, optimizer) bytes under ZeRO stage `zero`:
    1 shards the optimizer state (fp32 master included), 2 also the gradients, 3 also the weights."""
    optimizer = params * (state.master + state.optimizer)
    grads = params * state.grads
    weights = params * state.weights
    if zero >= 1:
        optimizer /= data_parallel
    if zero >= 2:
        grads /= data_parallel
    if zero >= 3:
        weights /= data_parallel
    return weights, grads, optimizer


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


def usable_memory(device_memory: float, runtime_buffers: float, headroom: float) -> float:
    """What is left for state and activations once buffers and headroom are set aside."""
    return device_memory / (1.0 + headroom) - runtime_buffers


def memory_account(params: Any, state: StateBytes, zero: int, data_parallel: Any, activations: Any,
                   runtime_buffers: Any, headroom: Any, device_memory: Any) -> MemoryAccount:
    weights, grads, optimizer = sharded_state(params, state, zero, data_parallel)
    state_total = weights + grads + optimizer
    before_headroom = state_total + activations + runtime_buffers
    per_device = before_headroom * (1.0 + headroom)
    usable = usable_memory(device_memory, runtime_buffers, headroom)
    room = usable - activations
    with np.errstate(divide="ignore", invalid="ignore"):
        # To run (inference): the weights alone, split over as many cards as needed.
        devices_to_run = np.where(usable > 0, np.maximum(1, np.ceil(params * state.weights / usable)), 0)
        # To train: full sharding (ZeRO-3) over n devices is the fewest any data-parallel layout needs.
        devices_to_train = np.where(room > 0, np.maximum(1, np.ceil(params * state.total / room)), np.nan)
    return MemoryAccount(
        weights_bytes=weights,
        grads_bytes=grads,
        optimizer_bytes=optimizer,
        state_bytes=state_total,
        activation_bytes=activations,
        runtime_buffers=runtime_buffers,
        headroom_bytes=per_device - before_headroom,
        per_device_bytes=per_device,
        device_memory=device_memory,
        fits=per_device <= device_memory,
        devices_to_run=devices_to_run,
        devices_to_train=devices_to_train,
    )


def memory_account_from_state(weights: Any, grads: Any, optimizer: Any, gathered: Any, params: Any,
                              weights_per_param: float, state_per_param: float, activations: Any,
                              runtime_buffers: Any, headroom: Any, device_memory: Any) -> MemoryAccount:
    """memory_account with the state already sharded (accounts/training_state.py); ZeRO-3/FSDP's
    gathered layer buffers count with the optimizer state."""
    optimizer_total = optimizer + gathered
    state_total = weights + grads + optimizer_total
    before_headroom = state_total + activations + runtime_buffers
    per_device = before_headroom * (1.0 + headroom)
    usable = usable_memory(device_memory, runtime_buffers, headroom)
    room = usable - activations
    with np.errstate(divide="ignore", invalid="ignore"):
        devices_to_run = np.where(usable > 0, np.maximum(1, np.ceil(params * weights_per_param / usable)), 0)
        devices_to_train = np.where(room > 0, np.maximum(1, np.ceil(params * state_per_param / room)), np.nan)
    return MemoryAccount(
        weights_bytes=weights, grads_bytes=grads, optimizer_bytes=optimizer_total, state_bytes=state_total,
        activation_bytes=activations, runtime_buffers=runtime_buffers, headroom_bytes=per_device - before_headroom,
        per_device_bytes=per_device, device_memory=device_memory, fits=per_device <= device_memory,
        devices_to_run=devices_to_run, devices_to_train=devices_to_train,
    )
