"""Fuzz target for the workload loader (issue 8): `python fuzz/fuzz_workload.py -max_total_time=60` or `-runs=N`.

Each input becomes a workload file (raw bytes, or TOML built from the schema's own keys
with hostile values: nan, inf, negatives, zero, huge, wrong units, wrong types, tables)
plus `--set` overrides, loaded with `load_workload` as `trainplan plan` does; a workload
that loads is then planned with `build_report` and rendered to JSON. A crash is any
exception other than trainplan.errors.UserError, or a JSON report with a non-finite number.
Uses atheris (the `fuzz` extra) when installed, else a plain random loop. Prints the
number of inputs tried at the end.
"""

from __future__ import annotations

import atexit
import json
import os
import random
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

try:
    import atheris
except ImportError:  # the optional extra is not installed: fall back to a random loop
    atheris = None

import tomli_w

if atheris is not None:
    with atheris.instrument_imports():
        from trainplan.planning import evaluate as plan
        from trainplan.present import render
        from trainplan.workload import schema as workload
        from trainplan.errors import UserError
else:
    from trainplan.planning import evaluate as plan
    from trainplan.present import render
    from trainplan.workload import schema as workload
    from trainplan.errors import UserError

warnings.simplefilter("ignore")  # numpy overflow warnings on extreme but valid inputs are not crashes

# model.hf_config names a file to read: a fuzzed path could be /dev/zero; the loader of config.json
# has its own tests (tests/test_params.py), so that key is left out here.
KEYS = [k for k in workload.leaf_keys() if k != "model.hf_config"] + [
    "cluster.accelerator.peak_flops", "cluster.accelerator.memory", "cluster.accelerator.name",
    "cluster.accelerator.video_decoders", "cluster.accelerator.tdp", "model.bogus", "bogus.key"]
VALUES: list[object] = [0, 1, -1, 2, 3, 7, 14, 224, 300, 2**63 - 1, -(2**63), 0.0, 0.5, 1.5, -0.5, 1e-300, 1e300,
                        float("nan"), float("inf"), float("-inf"), True, False, "", "x", "nan", "inf", "-inf",
                        "1e400", "7B", "93M", "8 Mbit/s", "8 MB", "32 GB", "1.5 GB/s", "200 TFLOPS", "1 h",
                        "25 %", "150 %", "$3", "$1,234.50", "700 W", "h100-sxm", "h200", "cpu-core", "video",
                        "tokens", "decoded", "random", "full", "selective", "sgd", "fp32", "llama", "\x00",
                        [], [1, 2], {}, {"peak_flops": "1 FLOPS", "memory": "1 B"}, {"name": "h100-sxm"}]
SET_VALUES = ["0", "-1", "nan", "inf", "1e999", '"8 Mbit/s"', "true", "[1]", "{a=1}", "x y", '"', "", "1.5",
              '"h100-sxm"', "3", "300"]

tried = 0
crashed = False
_DIR = tempfile.mkdtemp(prefix="fuzz_workload.")
_FILE = os.path.join(_DIR, "w.toml")


def _structured(pick) -> tuple[bytes, list[str]]:  # noqa: ANN001 - pick(n) -> int in [0, n)
    doc: dict = {}
    for _ in range(pick(8)):
        key = KEYS[pick(len(KEYS))]
        value = VALUES[pick(len(VALUES))]
        try:
            workload.set_path(doc, key.split("."), value, key)
        except UserError:
            pass
    sets = []
    for _ in range(pick(3)):
        sets.append(f"{KEYS[pick(len(KEYS))]}={SET_VALUES[pick(len(SET_VALUES))]}")
    if pick(4) == 0:
        sets.append(["=", "a=1", "a.=1", ".b=1", "data.bitrate", "model..params=1"][pick(6)])
    try:
        text = tomli_w.dumps(doc)
    except (TypeError, ValueError):
        text = ""
    return text.encode("utf-8"), sets


def one_input(data: bytes) -> None:
    global tried, crashed
    tried += 1
    if atheris is not None:
        fdp = atheris.FuzzedDataProvider(data)
        if fdp.ConsumeBool():
            body, sets = _structured(lambda n: fdp.ConsumeIntInRange(0, n - 1) if n > 1 else 0)
        else:
            body, sets = fdp.ConsumeBytes(fdp.remaining_bytes()), []
    else:
        rng = random.Random(data)
        body, sets = _structured(lambda n: rng.randrange(n)) if rng.random() < 0.8 else (data, [])
    if b"hf_config" in body:
        return
    try:
        check(body, sets)
    except BaseException:
        crashed = True
        print(f"input file: {body!r}\n--set: {sets!r}", file=sys.stderr)
        raise


def _refuse(name: str) -> float:
    raise AssertionError(f"the JSON report holds {name}")


def check(body: bytes, sets: list[str]) -> None:
    with open(_FILE, "wb") as fh:
        fh.write(body)
    try:
        w = workload.load_workload(_FILE, sets)
        report = plan.build_report(w)
    except UserError:
        return
    json.loads(render.to_json(report), parse_constant=_refuse)


def _report() -> None:
    verdict = "CRASHED (see the exception above)" if crashed else "no crash"
    print(f"fuzz_workload: {tried} inputs tried in {time.monotonic() - START:.1f} s, {verdict}", flush=True)


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
        print("fuzz_workload: atheris not installed, a plain random loop", flush=True)
        atexit.register(_report)
        rng = random.Random(0)
        while _budget_left():
            one_input(rng.randbytes(rng.randint(0, 400)))
        return
    atheris.Setup(argv, _counted)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
