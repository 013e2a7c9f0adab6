"""Number formats: what a parameter costs in bytes, how its bits are laid out, and what value a
format really stores.

- Bytes of P parameters in a format = P x bytes per element (data/dtypes.toml: fp32 4, bf16 2,
  int8 1, int4 0.5).
- A floating-point format of b bits is 1 sign bit, e exponent bits and b - 1 - e fraction bits;
  the layout is read from the format's own description (numpy / ml_dtypes `finfo`), not typed in.
- The stored value of x is x cast to the format, measured by doing the cast (numpy for fp32 and
  fp16, ml_dtypes for bf16 and fp8). Casts round to the nearest representable value; `truncate`
  instead drops the low fraction bits of the fp32 pattern (bf16 = the top 16 bits of fp32), what
  some converters do and what a hand calculation by chopping bits gives.
- A symmetric integer format of b bits stores q = round(x / s), clipped to +-(2^(b-1) - 1), and
  reads back q s. The scale s = max|x| / (2^(b-1) - 1) is shared by a whole tensor, or computed per
  channel (row), so that one outlier costs only its own row precision.
- Relative error = |stored - x| / |x| (absolute error where x = 0).

Pure apart from the casts: plain floats in, frozen dataclasses out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from trainplan.catalogue import dtypes
from trainplan.errors import UserError

FLOAT_FORMATS = ("fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2")
"""Floating-point formats a value can be cast to (IEEE 754 binary32/binary16, bfloat16, and the
two OCP 8-bit formats E4M3 (no infinities, 'fn') and E5M2)."""

INTEGER_FORMATS = ("int8", "int4")
"""Symmetric integer formats with a scale (weight-only quantisation)."""

FORMATS = FLOAT_FORMATS + INTEGER_FORMATS

ROUNDINGS = ("nearest", "truncate")

BITS_PER_BYTE = 8


def _numpy_dtype(fmt: str) -> np.dtype:
    """The numpy dtype that does the cast (ml_dtypes for the formats numpy lacks)."""
    if fmt == "fp32":
        return np.dtype(np.float32)
    if fmt == "fp16":
        return np.dtype(np.float16)
    import ml_dtypes  # a base dependency: numpy's extension dtypes bfloat16 and float8

    table = {"bf16": ml_dtypes.bfloat16, "fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2}
    return np.dtype(table[fmt])


def check_format(fmt: str, key: str = "--dtype") -> str:
    if fmt not in FORMATS:
        raise UserError(key, f"expected one of {', '.join(FORMATS)}, got {fmt!r}")
    return fmt


def bytes_per_parameter(fmt: str) -> float:
    """Bytes one number takes: fp32 4, fp16/bf16 2, fp8/int8 1, int4 0.5 (data/dtypes.toml)."""
    check_format(fmt)
    return dtypes.bytes_per_element("fp8" if fmt.startswith("fp8") else fmt)


def parameter_bytes(params: float, fmt: str) -> float:
    """P x bytes per element."""
    if not (math.isfinite(params) and params > 0):
        raise UserError("--params", f"expected a positive parameter count, got {params!r}")
    return params * bytes_per_parameter(fmt)


@dataclass(frozen=True)
class BitLayout:
    name: str
    bits: int
    sign: int
    exponent: int  # 0 for an integer format
    fraction: int  # explicit fraction (mantissa) bits; value bits of an integer format
    largest: float  # largest finite value (integer formats: largest level, before the scale)
    epsilon: float  # gap between 1 and the next value (integer formats: 1 level)


def bit_layout(fmt: str) -> BitLayout:
    """Sign, exponent and fraction bits, read from the format's finfo / iinfo."""
    check_format(fmt)
    if fmt in INTEGER_FORMATS:
        bits = int(bytes_per_parameter(fmt) * BITS_PER_BYTE)
        return BitLayout(fmt, bits, 1, 0, bits - 1, float(integer_levels(fmt)), 1.0)
    import ml_dtypes

    info = ml_dtypes.finfo(_numpy_dtype(fmt))
    return BitLayout(fmt, int(info.bits), 1, int(info.nexp), int(info.nmant), float(info.max), float(info.eps))


def integer_levels(fmt: str) -> int:
    """Largest level of a symmetric b-bit integer: 2^(b-1) - 1 (127 for int8, 7 for int4)."""
    bits = int(bytes_per_parameter(fmt) * BITS_PER_BYTE)
    return 2 ** (bits - 1) - 1


def absmax_scale(values: Sequence[float], fmt: str = "int8") -> float:
    """max|x| / (2^(b-1) - 1): the scale that maps the largest magnitude to the top level."""
    top = max((abs(float(v)) for v in values), default=0.0)
    if top == 0.0:
        return 1.0  # all zeros: any scale stores them exactly
    scale = top / integer_levels(fmt)
    if scale == 0.0:  # below the smallest float64 once divided by the levels
        raise UserError("values", f"expected magnitudes above {integer_levels(fmt) * 5e-324:g} to scale, got {top!r}")
    return scale


def cast(values: Sequence[float], fmt: str, rounding: str = "nearest") -> np.ndarray:
    """Values as a floating-point format stores them, read back as float64."""
    if fmt not in FLOAT_FORMATS:
        raise UserError("--dtype", f"expected a floating-point format ({', '.join(FLOAT_FORMATS)}), got {fmt!r}")
    if rounding not in ROUNDINGS:
        raise UserError("--rounding", f"expected one of {', '.join(ROUNDINGS)}, got {rounding!r}")
    x = np.asarray(values, dtype=np.float64)
    if rounding == "truncate" and fmt != "fp32":
        if fmt != "bf16":
            raise UserError("--rounding", "truncate is defined for bf16 only (the top 16 bits of fp32)")
        # bf16 by chopping: keep the top 16 bits of the fp32 pattern (sign, 8 exponent, 7 fraction)
        bits = x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
        return bits.view(np.float32).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(_numpy_dtype(fmt)).astype(np.float64)


def quantize(values: Sequence[float], scale: float, fmt: str = "int8") -> tuple[np.ndarray, np.ndarray]:
    """(levels, stored values) of a symmetric integer format: q = clip(round(x / s)), stored q s.
    Rounds half to even, as torch.quantize_per_tensor does."""
    if fmt not in INTEGER_FORMATS:
        raise UserError("--dtype", f"expected an integer format ({', '.join(INTEGER_FORMATS)}), got {fmt!r}")
    if not (math.isfinite(scale) and scale > 0):
        raise UserError("--scale", f"expected a positive scale, got {scale!r}")
    top = integer_levels(fmt)
    q = np.clip(np.rint(np.asarray(values, dtype=np.float64) / scale), -top, top)
    return q, q * scale


@dataclass(frozen=True)
class StoredValue:
    value: float
    format: str
    stored: float | None  # None: out of the format's range (overflow)
    absolute_error: float | None
    relative_error: float | None  # None where value is 0 or out of range
    scale: float | None = None  # integer formats
    level: int | None = None  # integer formats
    overflow: bool = False


def _row(value: float, fmt: str, stored: float, scale: float | None = None,
         level: float | None = None) -> StoredValue:
    if not math.isfinite(stored):  # beyond the largest value: inf, or nan in the fp8 'fn' format
        return StoredValue(value, fmt, None, None, None, scale, None, overflow=True)
    err = abs(stored - value)
    rel = err / abs(value) if value != 0 else None
    return StoredValue(value, fmt, stored, err, rel, scale, None if level is None else int(level))


def stored_values(values: Sequence[float], fmt: str, rounding: str = "nearest",
                  scale: float | None = None) -> list[StoredValue]:
    """What `fmt` stores for each value. Integer formats use `scale`, or the absmax scale of `values`
    (one scale shared by all of them)."""
    check_format(fmt)
    vals = [float(v) for v in values]
    for v in vals:
        if not math.isfinite(v):
            raise UserError("values", f"expected finite numbers, got {v!r}")
    if fmt in INTEGER_FORMATS:
        s = absmax_scale(vals, fmt) if scale is None else scale
        q, out = quantize(vals, s, fmt)
        return [_row(v, fmt, float(o), s, lv) for v, o, lv in zip(vals, out, q)]
    out = cast(vals, fmt, rounding)
    return [_row(v, f"{fmt} ({rounding})" if rounding != "nearest" else fmt, float(o)) for v, o in zip(vals, out)]


@dataclass(frozen=True)
class ScaleComparison:
    """One matrix (rows = output channels) in an integer format, one scale versus one per row."""

    format: str
    shared_scale: float
    channel_scales: tuple[float, ...]
    shared: tuple[tuple[float, ...], ...]  # stored values, shared scale
    per_channel: tuple[tuple[float, ...], ...]  # stored values, a scale per row
    shared_mean_relative_error: float  # over the non-zero values
    per_channel_mean_relative_error: float
    shared_zeroed: int  # non-zero values stored as 0
    per_channel_zeroed: int


def compare_scales(rows: Sequence[Sequence[float]], fmt: str = "int8") -> ScaleComparison:
    """Quantise every row with the tensor's absmax scale and with its own: the per-channel scale
    keeps small rows precise when another row holds an outlier."""
    if fmt not in INTEGER_FORMATS:
        raise UserError("--dtype", f"expected an integer format ({', '.join(INTEGER_FORMATS)}), got {fmt!r}")
    if not rows or any(len(r) == 0 for r in rows):
        raise UserError("--channel", "expected at least one non-empty row of values")
    flat = [float(v) for r in rows for v in r]
    shared_s = absmax_scale(flat, fmt)
    shared, per, scales = [], [], []
    for r in rows:
        shared.append(tuple(float(v) for v in quantize(r, shared_s, fmt)[1]))
        s = absmax_scale(r, fmt)
        scales.append(s)
        per.append(tuple(float(v) for v in quantize(r, s, fmt)[1]))

    def mean_rel(stored: list[tuple[float, ...]]) -> tuple[float, int]:
        errs, zeroed = [], 0
        for r, st in zip(rows, stored):
            for v, o in zip(r, st):
                if v != 0:
                    errs.append(abs(o - v) / abs(v))
                    zeroed += o == 0
        return (sum(errs) / len(errs) if errs else 0.0), zeroed

    shared_err, shared_zero = mean_rel(shared)
    per_err, per_zero = mean_rel(per)
    return ScaleComparison(fmt, shared_s, tuple(scales), tuple(shared), tuple(per), shared_err, per_err,
                           shared_zero, per_zero)
