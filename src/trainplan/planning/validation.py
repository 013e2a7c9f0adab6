"""`trainplan validate-against megatron`: plan the eight published Megatron-LM runs and compare.

The runs (catalogue/megatron_runs.toml) are planned with the same account as any workload
(accounts/parallel.py), on the catalogue's A100 and its node platform, with the platform's
one matmul efficiency: nothing is set per run.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from trainplan.accounts import parallel
from trainplan.catalogue.accelerators import resolve_accelerator
from trainplan.catalogue.dtypes import bytes_per_element, state_bytes_per_param
from trainplan.catalogue.interconnect import platform
from trainplan.errors import UserError
from trainplan.workload.schema import ClusterSection

# The standard GPT block (Narayanan et al. 2021): 12 h^2 weights and 13 h biases and layer-norm
# gains per layer; learned position embeddings s x h beside the vocabulary's V x h.
BLOCK_WEIGHTS_PER_WIDTH_SQUARED = 12.0
BLOCK_VECTORS_PER_WIDTH = 13.0

SUITES = ("megatron",)


@lru_cache(maxsize=1)
def megatron_runs() -> dict[str, Any]:
    text = resources.files("trainplan.catalogue").joinpath("megatron_runs.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


@dataclass(frozen=True)
class ValidationRow:
    name: str
    devices: int
    tensor: int
    pipeline: int
    interleave: int
    recompute: str
    sequence_parallel: bool
    predicted_seconds: float
    measured_seconds: float
    error: float  # (predicted - measured) / measured
    predicted_mfu: float
    bubble_share: float
    compute_seconds: float
    memory_bound_seconds: float
    tensor_seconds: float
    pipeline_send_seconds: float
    bubble_seconds: float
    optimizer_seconds: float
    per_device_bytes: float
    fits: bool


@dataclass(frozen=True)
class Validation:
    suite: str
    rows: list[ValidationRow]
    mean_abs_error: float
    max_abs_error: float
    matmul_efficiency: float
    source: str

    def as_dict(self) -> dict[str, Any]:
        return {"suite": self.suite, "rows": [asdict(r) for r in self.rows], "mean_abs_error": self.mean_abs_error,
                "max_abs_error": self.max_abs_error, "matmul_efficiency": self.matmul_efficiency,
                "source": self.source}


def gpt_shape(width: int, heads: int, layers: int, vocab: int, seq_len: int) -> parallel.ModelShape:
    """A Megatron GPT model: tied embeddings, learned positions."""
    layer = BLOCK_WEIGHTS_PER_WIDTH_SQUARED * width**2 + BLOCK_VECTORS_PER_WIDTH * width
    embedding = vocab * width
    params = layers * layer + embedding + seq_len * width
    return parallel.ModelShape(layers=layers, width=width, heads=heads, kv_heads=heads, vocab=vocab,
                               seq_len=seq_len, params=params, active_params=params - seq_len * width,
                               embedding_params=embedding, tied=True)


def hardware_of(accelerator_key: str, precision: str, matmul_efficiency: float | None = None) -> parallel.Hardware:
    acc = resolve_accelerator(accelerator_key)
    plat = platform(acc.key)
    defaults = ClusterSection()
    return parallel.Hardware(
        peak_flops=acc.peak(precision),
        matmul_efficiency=plat.matmul_efficiency if matmul_efficiency is None else matmul_efficiency,
        memory_bandwidth=acc.memory_bandwidth, device_memory=acc.memory,
        runtime_buffers=defaults.runtime_buffers, headroom=defaults.headroom,
        devices_per_node=plat.devices_per_node,
        intra_bus_bandwidth=acc.interconnect * plat.intra.efficiency, intra_latency=plat.intra.latency,
        inter_bus_bandwidth=plat.inter.bus_bandwidth * plat.nics_per_device, inter_latency=plat.inter.latency)


def validate(suite: str = "megatron", matmul_efficiency: float | None = None) -> Validation:
    if suite not in SUITES:
        raise UserError("suite", f"expected one of {', '.join(SUITES)}, got {suite!r}")
    doc = megatron_runs()
    common = doc["common"]
    precision = str(common["precision"])
    hw = hardware_of(str(common["accelerator"]), precision, matmul_efficiency)
    state = state_bytes_per_param(precision, "adam")
    rows = []
    for run in doc["runs"]:
        shape = gpt_shape(int(run["width"]), int(run["heads"]), int(run["layers"]), int(common["vocab"]),
                          int(common["seq_len"]))
        t, p = int(run["tensor"]), int(run["pipeline"])
        d = int(run["devices"]) // (t * p)
        m = int(run["global_batch"]) // (int(run["micro_batch"]) * d)
        acct = parallel.parallel_account(
            shape, hw, tensor=t, pipeline=p, interleave=int(run["interleave"]), data=d,
            sequence_parallel=bool(run["sequence_parallel"]), micro_batch=int(run["micro_batch"]), micro_batches=m,
            recompute=str(run["recompute"]), zero=0,
            schedule="interleaved" if int(run["interleave"]) > 1 else "1f1b",
            attention="flash" if bool(common["flash_attention"]) else "eager",
            # the paper's own per-layer bytes of the GPT block it trained
            activations=parallel.LayerActivations.korthikanti(
                shape.width, shape.heads, shape.seq_len, shape.vocab, not bool(common["flash_attention"]),
                bytes_per_element(precision)),
            activation_bytes_per_value=bytes_per_element(precision), weight_bytes=state.weights,
            grad_bytes=state.grads, state_of=parallel.default_state())
        predicted = float(acct.step_seconds)
        measured = float(run["measured_seconds"])
        rows.append(ValidationRow(
            name=str(run["name"]), devices=int(run["devices"]), tensor=t, pipeline=p,
            interleave=int(run["interleave"]), recompute=str(run["recompute"]),
            sequence_parallel=bool(run["sequence_parallel"]), predicted_seconds=predicted,
            measured_seconds=measured, error=(predicted - measured) / measured, predicted_mfu=float(acct.mfu),
            bubble_share=float(acct.bubble_share), compute_seconds=float(acct.compute_seconds),
            memory_bound_seconds=float(acct.memory_bound_seconds), tensor_seconds=float(acct.tensor_seconds),
            pipeline_send_seconds=float(acct.pipeline_send_seconds), bubble_seconds=float(acct.bubble_seconds),
            optimizer_seconds=float(acct.optimizer_seconds), per_device_bytes=float(acct.per_device_bytes),
            fits=bool(acct.fits)))
    errors = np.abs([r.error for r in rows])
    return Validation(suite=suite, rows=rows, mean_abs_error=float(errors.mean()), max_abs_error=float(errors.max()),
                      matmul_efficiency=hw.matmul_efficiency, source=str(common["source"]))
