"""Roofline: intensities and the compute-bound batch derived by hand (Williams et al. 2009)."""

from __future__ import annotations

import math

import pytest

from trainplan.accounts import roofline
from trainplan.errors import UserError

H100_PEAK = 989.5e12
H100_BW = 3.35e12


def test_square_matmul_intensity() -> None:
    n = 4096
    i = roofline.square_matmul_intensity(n, 2)
    assert i.flops == 2 * n**3
    assert i.bytes == 3 * n**2 * 2
    assert i.intensity == pytest.approx(2 * n / (3 * 2))  # 1365.3 FLOP/byte
    assert roofline.square_matmul_intensity(n, 4).intensity == pytest.approx(2 * n / 12)


def test_rectangular_matmul() -> None:
    i = roofline.matmul_intensity(1, 4096, 4096, 2)  # one token through a 4096x4096 layer
    assert i.intensity == pytest.approx(2 * 4096 * 4096 / ((4096 + 4096 * 4096 + 4096) * 2))
    assert i.intensity < 1.0  # a matrix-vector product is memory-bound everywhere


def test_elementwise_intensity() -> None:
    add = roofline.elementwise_intensity(1e6)  # c = a + b in bf16
    assert add.intensity == pytest.approx(1 / 6)
    gelu = roofline.elementwise_intensity(1e6, flops_per_element=8, inputs=1, outputs=1, bytes_per_element=4)
    assert gelu.intensity == pytest.approx(8 / 8)


def test_ridge_and_attainable() -> None:
    ridge = roofline.ridge_intensity(H100_PEAK, H100_BW)
    assert ridge == pytest.approx(295.37, abs=0.01)
    assert roofline.attainable_flops(1 / 6, H100_PEAK, H100_BW) == pytest.approx(H100_BW / 6)
    assert roofline.attainable_flops(1365.3, H100_PEAK, H100_BW) == H100_PEAK
    assert roofline.bound(1365.3, H100_PEAK, H100_BW) == "compute"
    assert roofline.bound(1 / 6, H100_PEAK, H100_BW) == "memory"


def test_compute_bound_batch_weights_only() -> None:
    layer = roofline.compute_bound_batch(4096 * 4096, H100_PEAK, H100_BW, bytes_per_weight=2)
    assert layer.compute_bound_batch == pytest.approx(H100_PEAK / H100_BW * 2 / 2)  # ~295 tokens
    assert layer.compute_bound_batch_whole == 296
    assert layer.weights_only_batch == pytest.approx(layer.compute_bound_batch)
    # int8 weights halve the bytes read, so half the batch suffices
    int8 = roofline.compute_bound_batch(4096 * 4096, H100_PEAK, H100_BW, bytes_per_weight=1)
    assert int8.compute_bound_batch == pytest.approx(layer.compute_bound_batch / 2)


def test_compute_bound_batch_with_activations_is_where_intensity_meets_the_ridge() -> None:
    w, a = 4096 * 4096, 4096 + 4096
    layer = roofline.compute_bound_batch(w, H100_PEAK, H100_BW, 2, a, 2)
    ridge = H100_PEAK / H100_BW
    assert layer.compute_bound_batch == pytest.approx(ridge * w * 2 / (2 * w - ridge * a * 2))
    at = roofline.layer_intensity(w, layer.compute_bound_batch, 2, a, 2)
    assert at.intensity == pytest.approx(ridge)
    assert layer.compute_bound_batch > layer.weights_only_batch


def test_a_small_layer_never_turns_compute_bound() -> None:
    layer = roofline.compute_bound_batch(64 * 64, H100_PEAK, H100_BW, 2, 64 + 64, 2)
    assert math.isinf(layer.compute_bound_batch) and layer.compute_bound_batch_whole is None


def test_catalogue_figures() -> None:
    catalogue = pytest.importorskip("trainplan.catalogue.accelerators")
    h100 = catalogue.accelerators()["h100-sxm"]
    assert roofline.ridge_intensity(h100.peak("bf16"), h100.memory_bandwidth) == pytest.approx(295.37, abs=0.01)


def test_bad_input() -> None:
    with pytest.raises(UserError, match="peak_flops"):
        roofline.ridge_intensity(0, 1)
    with pytest.raises(UserError, match="weights"):
        roofline.compute_bound_batch(-1, 1, 1)
