"""Fuzz target for the unit parser (issue 8): `python fuzz/fuzz_units.py -max_total_time=60` or `-runs=N`.

Any text, for any dimension, must either parse to a finite float or raise
trainplan.errors.UserError naming the key; what parses must format and parse
back. Anything else (another exception, a non-finite number, a round trip that
fails) is a crash. The loop, the corpus and crash files are fuzz/_harness.py's.
"""

from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import Harness, atheris, chooser  # noqa: E402

if atheris is not None:
    with atheris.instrument_imports():
        from trainplan import units
        from trainplan.errors import UserError
else:
    from trainplan import units
    from trainplan.errors import UserError

DIMENSIONS = ["count", "bytes", "byte_rate", "bit_rate", "flop_rate", "flops", "time", "power", "fraction",
              "frequency", "dollars"]
# Pieces a person writes, so the mutator reaches the unit tables quickly.
PIECES = ["", " ", "1", "0", "-", "+", ".", "e", "E", "_", "nan", "inf", "$", "%", "/s", "ps", "B", "b", "bit",
          "bits", "byte", "bytes", "k", "K", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "FLOPS", "FLOP/s", "flops",
          "FLOP", "W", "h", "min", "s", "ms", "d", "fps", "Hz", "USD", ",", "1,234", "9" * 400, "\u00a0", "\x00"]

# Issue 29's classes: integers past float range and past Python's 4,300-digit cap on int(str),
# subnormals, minus zero, and their text.
NUMBERS: list[object] = [0.0, -0.0, 1e308, -1e308, 5e-324, -5e-324, 2.2e-308, float("nan"), float("inf"), 2**70, -3,
                         True, 10**400, -(10**400), 2**53 + 1, 2**1024, 10**5000, "1" + "0" * 400, "1" + "0" * 5000,
                         "5e-324", "-0", "-0.0", "1e308 EB", "1e-320 GB", "0x10", "1_0" * 200]


def one_input(data: bytes) -> None:
    if data[:1] == b"=":  # direct: the bytes are the text, the second byte the dimension (no hash between)
        value: object = data[2:].decode("utf-8", "replace")
        check(value, DIMENSIONS[data[1] % len(DIMENSIONS)] if len(data) > 1 else "count")
        return
    rng = chooser(data)
    dimension = rng.choice(DIMENSIONS)
    if rng.random() < 0.15:
        check(rng.choice(NUMBERS), dimension)
        return
    if rng.random() < 0.7:
        value: object = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 8)))
    elif rng.random() < 0.8:
        value = data.decode("utf-8", "replace")
    else:
        value = rng.choice(NUMBERS)
    check(value, dimension)


def check(value: object, dimension: str) -> None:
    try:
        number = units.parse(value, dimension, "fuzz.key")
    except UserError as err:
        if err.where != "fuzz.key":
            raise AssertionError(f"UserError names {err.where!r}, not the key") from None
        return
    if not isinstance(number, float) or not math.isfinite(number):
        raise AssertionError(f"parse({units.shown(value)}, {dimension}) = {number!r}, not a finite float")
    if number != 0 and abs(number) < sys.float_info.min:
        raise AssertionError(f"parse({units.shown(value)}, {dimension}) = {number!r}, a subnormal")
    if math.copysign(1.0, number) < 0 and number == 0:
        raise AssertionError(f"parse({units.shown(value)}, {dimension}) = -0.0")
    text = units.format_quantity(number, dimension, digits=6)
    back = units.parse(text, dimension, "fuzz.key")  # a UserError here is a crash: we wrote that text
    if dimension not in ("fraction", "dollars") and not math.isclose(back, number, rel_tol=1e-5, abs_tol=1e-300):
        raise AssertionError(f"{number!r} -> {text!r} -> {back!r}")



if __name__ == "__main__":
    Harness("units", one_input, max_len=64).main()
