"""Time of a training step's operations from their shapes (issue 23).

The pieces the step-time part of accounts/parallel.py is built from:

- a GEMM of (m x k) by (k x n): 2 m n k FLOPs at an efficiency that depends on its
  arithmetic intensity I = m n k / (m n + n k + m k) through the accelerator's curve
  (catalogue/kernel_efficiency.toml)  efficiency = gemm_max x I / (I + gemm_half_intensity).
  The intensity is symmetric in m, n, k, so the two backward GEMMs of a forward GEMM (the
  input gradient and the weight gradient, each a permutation of the same three sizes) run
  at the forward GEMM's efficiency;
- attention: without a fused kernel, Q K^T and (scores) V as batched GEMMs of inner size
  head_dim on the same curve, with the softmax and dropout over the a s x s scores as
  element-wise traffic; with a fused (flash) kernel, its FLOPs at the catalogue's flash
  efficiency and no scores in memory;
- element-wise work: bytes / (HBM bandwidth x elementwise efficiency);
- a collective: NCCL's bus bytes over the tier's bus bandwidth at the message's size,
  bus bandwidth(M) = large-message bus bandwidth x M / (M + half_bytes)
  (catalogue/collective_efficiency.toml), plus the algorithm's steps x the tier's latency.

Everything works on numpy arrays (the layout search evaluates a grid at once).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from trainplan import catalogue, units
from trainplan.accounts import collectives
from trainplan.catalogue.frameworks import PARALLELISMS, ZERO_STAGES, offers

FLOPS_PER_MULTIPLY_ADD = 2.0
BACKWARD_GEMMS_PER_FORWARD = 2.0  # input gradient and weight gradient


@dataclass(frozen=True)
class KernelEfficiency:
    """One accelerator's kernel efficiencies (catalogue/kernel_efficiency.toml)."""

    key: str
    gemm_max: float
    gemm_half_intensity: float  # FLOPs per element moved (over 2) at which half of gemm_max is reached
    flash_efficiency: float
    elementwise_efficiency: float
    source: str

    def with_values(self, **values: Any) -> "KernelEfficiency":
        """The same accelerator with some constants replaced (the validation's fit; arrays allowed)."""
        return replace(self, **values)

    def with_flash_kernel(self, kernel: str) -> "KernelEfficiency":
        """The same accelerator running the fused attention kernel `kernel` (catalogue [flash_kernels]): its
        speed against FlashAttention-2, whose share of peak `flash_efficiency` is."""
        return replace(self, flash_efficiency=self.flash_efficiency * flash_kernel_speed(kernel))

    def scaled(self, share: Any) -> "KernelEfficiency":
        """What a framework reaching `share` of these efficiencies runs at (GEMM, flash, element-wise)."""
        return replace(self, gemm_max=self.gemm_max * share, flash_efficiency=self.flash_efficiency * share,
                       elementwise_efficiency=self.elementwise_efficiency * share)


@dataclass(frozen=True)
class Framework:
    """A training framework's overlaps and efficiency (catalogue/kernel_efficiency.toml [frameworks])."""

    key: str
    dp_overlap: bool
    zero3_prefetch: int
    overlap_cost: float  # the catalogue's overlap_cost where the framework overlaps, else 0
    efficiency: float
    source: str
    zero_stages: tuple[int, ...] = ZERO_STAGES  # the ZeRO stages it offers
    pipeline_zero_stages: tuple[int, ...] = ZERO_STAGES  # those it offers with pipeline parallelism
    checkpoint: str = "reentrant"  # how its full recomputation re-runs a layer (catalogue/checkpoint_tail.toml)
    parallelisms: tuple[str, ...] = PARALLELISMS  # the model-parallel degrees it offers beside data parallelism
    # whether its data-parallel collectives use every NIC of a node (NCCL's ring per NIC, each of the group's
    # ranks on the node driving its own) or run at one device's NIC rate; the sets that choice was read from
    dp_node_links: bool = True
    dp_links_chosen_on: tuple[str, ...] = ()
    zero3_sharding: str = "zero3"  # the state its stage 3 keeps (training_state.SHARDING): DeepSpeed's, or its own


FRAMEWORKS: tuple[str, ...] = tuple(catalogue.table("kernel_efficiency")["frameworks"])


FLASH_KERNELS: tuple[str, ...] = tuple(catalogue.table("kernel_efficiency")["flash_kernels"])


def flash_kernel_speed(kernel: str) -> float:
    """A fused attention kernel's speed against FlashAttention-2's (catalogue [flash_kernels])."""
    return float(catalogue.table("kernel_efficiency")["flash_kernels"][kernel]["speed"])


def overlap_cost() -> float:
    """Share of an overlapped exchange that still lands on the step, for a framework that no validation
    set measures (catalogue, fitted on the overlapping frameworks' sets together)."""
    return float(catalogue.table("kernel_efficiency")["overlap_cost"])


def framework(key: str) -> Framework:
    """One framework's row (UserError naming `framework` when unknown)."""
    table = catalogue.table("kernel_efficiency")["frameworks"]
    if key not in table:
        from trainplan.errors import UserError

        raise UserError("framework", f"expected one of {', '.join(table)}, got {key!r}")
    e = table[key]
    has = offers(key)
    return Framework(key=key, dp_overlap=bool(e["dp_overlap"]), zero3_prefetch=int(e["zero3_prefetch"]),
                     overlap_cost=float(e.get("overlap_cost", overlap_cost())) if e["dp_overlap"] else 0.0,
                     efficiency=float(e["efficiency"]),
                     source=str(e["source"]), zero_stages=has.zero_stages,
                     pipeline_zero_stages=has.pipeline_zero_stages, checkpoint=str(e["checkpoint"]),
                     parallelisms=has.parallelisms, dp_node_links=str(e.get("dp_links", "node")) == "node",
                     dp_links_chosen_on=tuple(str(x) for x in e.get("dp_links_chosen_on", ())),
                     zero3_sharding=str(e.get("zero3_sharding", "zero3")))


def flat_efficiency(matmul_efficiency: float) -> KernelEfficiency:
    """One efficiency for every GEMM and attention kernel, element-wise work at full bandwidth."""
    return KernelEfficiency(key="flat", gemm_max=matmul_efficiency, gemm_half_intensity=0.0,
                            flash_efficiency=matmul_efficiency, elementwise_efficiency=1.0,
                            source="one given matmul efficiency")


@lru_cache(maxsize=None)
def kernel_efficiency(accelerator_key: str) -> KernelEfficiency:
    """The accelerator's row, else the catalogue's `default` row."""
    table = catalogue.table("kernel_efficiency")["accelerators"]
    key = accelerator_key if accelerator_key in table else "default"
    entry = table[key]
    return KernelEfficiency(key=key, gemm_max=float(entry["gemm_max"]),
                            gemm_half_intensity=float(entry["gemm_half_intensity"]),
                            flash_efficiency=float(entry["flash_efficiency"]),
                            elementwise_efficiency=float(entry["elementwise_efficiency"]), source=str(entry["source"]))


def fit_sets() -> tuple[str, ...]:
    """The validation sets the catalogue's fitted kernel constants were fitted on."""
    return tuple(str(s) for s in catalogue.table("kernel_efficiency")["fit_sets"])


@lru_cache(maxsize=None)
def half_bytes(tier_key: str, op: str = "all_reduce") -> float:
    """Message size (bytes) at which `op` on this tier reaches half its large-message bus bandwidth
    (a ring collective's, or a point-to-point send's)."""
    entry = catalogue.table("collective_efficiency")["tiers"][tier_key]
    name = "send_half_bytes" if op == "send" else "half_bytes"
    return units.parse(str(entry[name]), "bytes", f"collective_efficiency.{tier_key}.{name}")


# ---------------------------------------------------------------- GEMMs


def gemm_intensity(m: Any, n: Any, k: Any) -> Any:
    """m n k / (m n + n k + m k): FLOPs per element moved, over 2."""
    m, n, k = (np.asarray(x, dtype=np.float64) for x in (m, n, k))
    with np.errstate(divide="ignore"):
        return np.where((m > 0) & (n > 0) & (k > 0), 1.0 / (1.0 / m + 1.0 / n + 1.0 / k), 0.0)


def gemm_efficiency(m: Any, n: Any, k: Any, curve: KernelEfficiency) -> Any:
    """Achieved share of dense peak of an (m x k) by (k x n) GEMM."""
    intensity = gemm_intensity(m, n, k)
    denominator = intensity + curve.gemm_half_intensity
    return curve.gemm_max * np.where(denominator > 0, intensity / np.where(denominator > 0, denominator, 1.0), 0.0)


def gemm_seconds(m: Any, n: Any, k: Any, peak_flops: float, curve: KernelEfficiency, count: Any = 1.0) -> Any:
    """`count` GEMMs of (m x k) by (k x n): 2 m n k FLOPs each at the curve's efficiency."""
    flops = FLOPS_PER_MULTIPLY_ADD * np.asarray(m, dtype=np.float64) * n * k * count
    return gemm_seconds_of_flops(flops, m, n, k, peak_flops, curve)


def gemm_seconds_of_flops(flops: Any, m: Any, n: Any, k: Any, peak_flops: float, curve: KernelEfficiency) -> Any:
    """`flops` spent in GEMMs of the shape (m, n, k): at that shape's efficiency (none for an empty GEMM)."""
    flops = np.asarray(flops, dtype=np.float64)
    rate = peak_flops * gemm_efficiency(m, n, k, curve)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(flops > 0, flops / np.where(rate > 0, rate, 1.0), 0.0)


# ---------------------------------------------------------------- attention


def attention_core_seconds(batch_heads: Any, s_q: Any, s_kv: Any, head_dim: Any, peak_flops: float,
                           curve: KernelEfficiency, flash: bool) -> Any:
    """Forward time of the attention core of `batch_heads` (sequences x heads on this device) heads:
    Q K^T and (scores) V, 2 x 2 s_q s_kv head_dim FLOPs per head.

    Without a fused kernel, two batched GEMMs of shapes (s_q, s_kv, head_dim) and (s_q, head_dim, s_kv)
    on the GEMM curve (the softmax and dropout are element-wise work, charged by the caller);
    with one (flash), the FLOPs at the accelerator's flash efficiency."""
    flops = 2.0 * FLOPS_PER_MULTIPLY_ADD * np.asarray(batch_heads, dtype=np.float64) * s_q * s_kv * head_dim
    if flash:
        return flops / (peak_flops * curve.flash_efficiency)
    return gemm_seconds_of_flops(flops, s_q, s_kv, head_dim, peak_flops, curve)


# ---------------------------------------------------------------- element-wise


def elementwise_seconds(traffic_bytes: Any, memory_bandwidth: float, curve: KernelEfficiency) -> Any:
    """Memory-bound work: bytes read and written at the achieved share of HBM bandwidth."""
    return np.asarray(traffic_bytes, dtype=np.float64) / (memory_bandwidth * curve.elementwise_efficiency)


# ---------------------------------------------------------------- collectives


def bus_efficiency(message_bytes: Any, half: Any) -> Any:
    """Share of the tier's large-message bus bandwidth reached at this message size: M / (M + half)."""
    m = np.asarray(message_bytes, dtype=np.float64)
    return np.where(m > 0, m / np.maximum(m + half, 1e-300), 1.0)


def collective_seconds(op: str, message_bytes: Any, ranks: Any, bus_bandwidth: Any, latency: Any,
                       half: Any) -> Any:
    """NCCL's bus bytes at the size-dependent bus bandwidth, plus steps x latency; zero on one rank."""
    effective = np.asarray(bus_bandwidth, dtype=np.float64) * bus_efficiency(message_bytes, half)
    return collectives.collective_seconds(op, message_bytes, ranks, effective, latency)
