"""The roofline (docs/serving-scaling-energy.md; Williams, Waterman & Patterson 2009, "Roofline: an insightful visual
performance model", CACM 52(4)).

An operation of F FLOP that moves Q bytes to and from memory has arithmetic intensity I = F / Q
(FLOP per byte). A device of peak Phi FLOP/s and memory bandwidth BW attains min(Phi, I x BW);
the ridge I* = Phi / BW separates memory-bound (I < I*) from compute-bound work.

- Matmul (m x k) @ (k x n): F = 2 m n k, Q = (m k + k n + m n) x bytes; of side n: I = 2n / (3 bytes).
- Element-wise: F = flops per element x elements, Q = (inputs + outputs) x elements x bytes.
- A layer of W weights applied to a batch of B tokens: F = 2 B W, Q = W x bytes_w + B x
  (activation elements per token) x bytes_a. It turns compute-bound at
  B* = I* W bytes_w / (2 W - I* a bytes_a), about I* bytes_w / 2 when weights dominate.

Pure: plain floats in SI units (FLOP, bytes, FLOP/s, bytes/s), frozen dataclasses out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from trainplan.errors import UserError, require_positive

FLOP_PER_MULTIPLY_ADD = 2.0
"""A multiply-add is two FLOP (the convention of peak-FLOP datasheets and of 6ND)."""


@dataclass(frozen=True)
class Intensity:
    """FLOP, bytes moved, and their ratio (FLOP per byte)."""

    flops: float
    bytes: float
    intensity: float


def matmul_intensity(m: float, n: float, k: float, bytes_per_element: float = 2.0) -> Intensity:
    """(m x k) @ (k x n): 2 m n k FLOP over reading both operands and writing the result once."""
    for key, v in (("m", m), ("n", n), ("k", k), ("bytes_per_element", bytes_per_element)):
        require_positive(key, v)
    flops = FLOP_PER_MULTIPLY_ADD * m * n * k
    moved = (m * k + k * n + m * n) * bytes_per_element
    return Intensity(flops, moved, flops / moved)


def square_matmul_intensity(side: float, bytes_per_element: float = 2.0) -> Intensity:
    """n x n @ n x n: 2 n^3 FLOP over 3 n^2 elements, I = 2 n / (3 bytes)."""
    return matmul_intensity(side, side, side, bytes_per_element)


def elementwise_intensity(elements: float = 1.0, flops_per_element: float = 1.0, inputs: int = 2,
                          outputs: int = 1, bytes_per_element: float = 2.0) -> Intensity:
    """An element-wise op over `elements` elements (default: an add, c = a + b: 1 FLOP, 2 in, 1 out)."""
    require_positive("elements", elements)
    require_positive("bytes_per_element", bytes_per_element)
    if flops_per_element < 0 or inputs < 0 or outputs < 0 or inputs + outputs == 0:
        raise UserError("elementwise", "expected non-negative FLOP and at least one operand")
    flops = flops_per_element * elements
    moved = (inputs + outputs) * elements * bytes_per_element
    return Intensity(flops, moved, flops / moved)


def ridge_intensity(peak_flops: float, memory_bandwidth: float) -> float:
    """Phi / BW, FLOP per byte: the intensity at which the roofline bends."""
    require_positive("peak_flops", peak_flops)
    require_positive("memory_bandwidth", memory_bandwidth)
    return peak_flops / memory_bandwidth


def attainable_flops(intensity: float, peak_flops: float, memory_bandwidth: float) -> float:
    """min(Phi, I x BW): the roofline."""
    require_positive("intensity", intensity)
    return min(peak_flops, intensity * memory_bandwidth)


def bound(intensity: float, peak_flops: float, memory_bandwidth: float) -> Literal["compute", "memory"]:
    return "compute" if intensity >= ridge_intensity(peak_flops, memory_bandwidth) else "memory"


@dataclass(frozen=True)
class LayerRoofline:
    """Where a layer of `weights` parameters turns compute-bound on one device."""

    weights: float
    bytes_per_weight: float
    activation_elements_per_token: float
    bytes_per_activation: float
    peak_flops: float
    memory_bandwidth: float
    ridge_intensity: float  # FLOP per byte
    compute_bound_batch: float  # exact B*, tokens per weight read; inf if never
    compute_bound_batch_whole: int | None  # ceil(B*); None if never
    weights_only_batch: float  # I* bytes_w / 2, ignoring activation traffic


def layer_intensity(weights: float, batch: float, bytes_per_weight: float = 2.0,
                    activation_elements_per_token: float = 0.0, bytes_per_activation: float = 2.0) -> Intensity:
    """A layer of W weights applied to B tokens: 2 B W FLOP over W bytes_w + B a bytes_a bytes."""
    require_positive("weights", weights)
    require_positive("batch", batch)
    require_positive("bytes_per_weight", bytes_per_weight)
    if activation_elements_per_token < 0:
        raise UserError("activation_elements_per_token", "expected zero or more")
    flops = FLOP_PER_MULTIPLY_ADD * batch * weights
    moved = weights * bytes_per_weight + batch * activation_elements_per_token * bytes_per_activation
    return Intensity(flops, moved, flops / moved)


def compute_bound_batch(weights: float, peak_flops: float, memory_bandwidth: float,
                        bytes_per_weight: float = 2.0, activation_elements_per_token: float = 0.0,
                        bytes_per_activation: float = 2.0) -> LayerRoofline:
    """Solve 2 B W / (W bw + B a ba) = Phi / BW for B.

    For a d_in x d_out linear layer, W = d_in d_out and a = d_in + d_out (one input and one
    output vector per token). Leave a = 0 for the weights-only estimate I* bw / 2.
    """
    require_positive("weights", weights)
    require_positive("bytes_per_weight", bytes_per_weight)
    if activation_elements_per_token < 0:
        raise UserError("activation_elements_per_token", "expected zero or more")
    ridge = ridge_intensity(peak_flops, memory_bandwidth)
    denominator = FLOP_PER_MULTIPLY_ADD * weights - ridge * activation_elements_per_token * bytes_per_activation
    exact = ridge * weights * bytes_per_weight / denominator if denominator > 0 else math.inf
    return LayerRoofline(
        weights=weights, bytes_per_weight=bytes_per_weight,
        activation_elements_per_token=activation_elements_per_token, bytes_per_activation=bytes_per_activation,
        peak_flops=peak_flops, memory_bandwidth=memory_bandwidth, ridge_intensity=ridge,
        compute_bound_batch=exact,
        compute_bound_batch_whole=math.ceil(exact - 1e-9) if math.isfinite(exact) else None,
        weights_only_batch=ridge * bytes_per_weight / FLOP_PER_MULTIPLY_ADD,
    )




def compute_bound_power_of_two(layer: LayerRoofline) -> int | None:
    """The smallest power-of-two batch at which the layer is compute-bound: 2^ceil(log2 B*), the
    batch found by trying 1, 2, 4, ... (how batches are usually swept). None if never."""
    if not math.isfinite(layer.compute_bound_batch):
        return None
    return 2 ** max(0, math.ceil(math.log2(layer.compute_bound_batch) - 1e-12))
