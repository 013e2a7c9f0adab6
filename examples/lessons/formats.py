"""Lesson figures: number formats, measured.

The same through the command line:
  trainplan formats 0.1 9.5 --params 6.97B --rounding truncate --channel 0.1,-0.2,0.3 --channel 9.5,1.0,-2.0
Run: PYTHONPATH=src python examples/lessons/formats.py
Held by tests/test_lessons.py::test_parameter_bytes, ::test_bit_layouts, ::test_stored_values_*.

bf16 note: a cast rounds to nearest and stores 0.1 as 0.1000976562 (numpy/ml_dtypes and torch agree);
the lessons' 0.0996093750 is bf16 by truncation, the top 16 bits of fp32's 0x3DCCCCCD, shown here too.
"""

from __future__ import annotations

from trainplan.accounts import formats

PARAMS = 6.97e9
# a tensor whose largest magnitude is 9.5: one shared int8 scale 9.5 / 127 = 0.074803
TENSOR = (0.1, 9.5)


def main() -> None:
    print(f"bytes of {PARAMS / 1e9:.2f} B parameters: " + ", ".join(
        f"{d} {formats.parameter_bytes(PARAMS, d) / 1e9:.1f} GB" for d in ("fp32", "bf16", "int8", "int4")))
    for d in ("fp32", "fp16", "bf16"):
        lay = formats.bit_layout(d)
        print(f"  {d}: {lay.sign} sign, {lay.exponent} exponent, {lay.fraction} fraction bits")
    rows = [formats.stored_values([0.1], d)[0] for d in ("fp32", "bf16")]
    rows.append(formats.stored_values([0.1], "bf16", "truncate")[0])
    rows += [formats.stored_values([0.1], d)[0] for d in ("fp8_e4m3", "fp8_e5m2")]
    rows.append(formats.stored_values(TENSOR, "int8")[0])
    for r in rows:
        scale = f" (shared scale {r.scale:.6f})" if r.scale is not None else ""
        print(f"  0.1 in {r.format:<16} {r.stored:.10f}  relative error {r.relative_error:.2e}{scale}")
    c = formats.compare_scales([[0.1, -0.2, 0.3], [9.5, 1.0, -2.0]], "int8")
    print(f"int8, a small row beside an outlier row: mean relative error {c.shared_mean_relative_error:.2%} with one "
          f"scale, {c.per_channel_mean_relative_error:.2%} with a scale per channel")


if __name__ == "__main__":
    main()
