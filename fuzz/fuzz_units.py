"""Fuzz target for the unit parser (issue 8): `python fuzz/fuzz_units.py -max_total_time=60` or `-runs=N`.

Any text, for any dimension, must either parse to a finite float or raise
trainplan.errors.UserError naming the key; what parses must format and parse
back. Anything else (another exception, a non-finite number, a round trip that
fails) is a crash. Uses atheris (the `fuzz` extra) when installed, else a plain
random loop over the same harness. Prints the number of inputs tried at the end.
"""

from __future__ import annotations

import atexit
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

try:
    import atheris
except ImportError:  # the optional extra is not installed: fall back to a random loop
    atheris = None

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

tried = 0
crashed = False


def one_input(data: bytes) -> None:
    global tried
    tried += 1
    if atheris is not None:
        fdp = atheris.FuzzedDataProvider(data)
        dimension = DIMENSIONS[fdp.ConsumeIntInRange(0, len(DIMENSIONS) - 1)]
        if fdp.ConsumeBool():
            text = "".join(PIECES[fdp.ConsumeIntInRange(0, len(PIECES) - 1)] for _ in range(fdp.ConsumeIntInRange(0, 8)))
        else:
            text = fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes())
        value: object = text if fdp.ConsumeIntInRange(0, 3) else fdp.ConsumeRegularFloat()
    else:
        rng = random.Random(data)
        dimension = rng.choice(DIMENSIONS)
        value = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 8))) if rng.random() < 0.8 \
            else data.decode("utf-8", "replace")
    try:
        check(value, dimension)
    except BaseException:
        global crashed
        crashed = True
        raise


def check(value: object, dimension: str) -> None:
    try:
        number = units.parse(value, dimension, "fuzz.key")
    except UserError as err:
        if err.where != "fuzz.key":
            raise AssertionError(f"UserError names {err.where!r}, not the key") from None
        return
    if not isinstance(number, float) or not math.isfinite(number):
        raise AssertionError(f"parse({value!r}, {dimension}) = {number!r}, not a finite float")
    text = units.format_quantity(number, dimension, digits=6)
    back = units.parse(text, dimension, "fuzz.key")  # a UserError here is a crash: we wrote that text
    if dimension not in ("fraction", "dollars") and not math.isclose(back, number, rel_tol=1e-5, abs_tol=1e-300):
        raise AssertionError(f"{number!r} -> {text!r} -> {back!r}")


def _report() -> None:
    verdict = "CRASHED (see the exception above)" if crashed else "no crash"
    print(f"fuzz_units: {tried} inputs tried in {time.monotonic() - START:.1f} s, {verdict}", flush=True)


START = time.monotonic()
RUNS = -1  # -runs=N
LIMIT = 0.0  # -max_total_time=S


def _budget_left() -> bool:
    return (RUNS < 0 or tried < RUNS) and (LIMIT <= 0 or time.monotonic() - START < LIMIT)


def _counted(data: bytes) -> None:
    """libFuzzer ends the process with exit(), past Python's atexit, so the budget is kept here."""
    if not _budget_left():
        _report()
        os._exit(0)
    one_input(data)


def main() -> None:
    global RUNS, LIMIT, START
    argv, rest = [sys.argv[0]], []
    for arg in sys.argv[1:]:
        if arg.startswith("-runs="):
            RUNS = int(arg.split("=", 1)[1])
        elif arg.startswith("-max_total_time="):
            LIMIT = float(arg.split("=", 1)[1])
        else:
            argv.append(arg)
    if RUNS < 0 and LIMIT <= 0:
        LIMIT = 60.0
    START = time.monotonic()
    if atheris is None:
        print("fuzz_units: atheris not installed, a plain random loop", flush=True)
        atexit.register(_report)
        rng = random.Random(0)
        while _budget_left():
            one_input(rng.randbytes(rng.randint(0, 64)))
        return
    atheris.Setup(argv, _counted)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
