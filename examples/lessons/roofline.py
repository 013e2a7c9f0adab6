"""Lesson figures: the roofline of an example accelerator of 400 TFLOPS and 2 TB/s.

Run: PYTHONPATH=src python examples/lessons/roofline.py
Held by tests/test_lessons.py::test_roofline.
"""

from __future__ import annotations

from trainplan.accounts import roofline as roofline_mod

PEAK = 400e12
BANDWIDTH = 2e12
BF16 = 2.0


def figures() -> dict:
    layer = roofline_mod.compute_bound_batch(4096 * 4096, PEAK, BANDWIDTH, BF16, 4096 + 4096, BF16)
    return {
        "ridge": roofline_mod.ridge_intensity(PEAK, BANDWIDTH),
        "matmul_1024": roofline_mod.square_matmul_intensity(1024, BF16).intensity,
        "matmul_16384": roofline_mod.square_matmul_intensity(16384, BF16).intensity,
        "add": roofline_mod.elementwise_intensity(1.0, bytes_per_element=BF16).intensity,
        "layer_exact_batch": layer.compute_bound_batch,
        "layer_power_of_two_batch": roofline_mod.compute_bound_power_of_two(layer),
    }


def main() -> None:
    f = figures()
    print(f"ridge {f['ridge']:.0f} FLOP/byte")
    print(f"square bf16 matmul: {f['matmul_1024']:,.0f} FLOP/byte at side 1,024, {f['matmul_16384']:,.0f} at 16,384")
    print(f"adding two grids: {f['add']:.2f} FLOP/byte")
    print(f"a 4,096 x 4,096 bf16 layer turns compute-bound at a batch of {f['layer_power_of_two_batch']} "
          f"(trying powers of two; exactly {f['layer_exact_batch']:.1f} with activation traffic)")


if __name__ == "__main__":
    main()
