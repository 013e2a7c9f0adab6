"""Fuzz target for the calibration loader (issue 16): `python fuzz/fuzz_calibration.py -max_total_time=60`.

Each input becomes a calibration file: raw bytes, or TOML in the file's own shape (format,
machine, probes.NAME.settings/results, [[values]]) with hostile values in every place
(wrong types, tables for text, lists for tables, nan, inf, 1e308, huge integers, negative
numbers, terminal escapes, unknown keys), read as `trainplan plan --calibration` reads it:
calibration.load, check_compatible and load_workload. A crash is any exception other than
trainplan.errors.UserError, a refusal that is not one printable line, or a measured source
text that holds a control character. The loop, corpus and crash files are fuzz/_harness.py's.
"""

from __future__ import annotations

import atexit
import copy
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import Harness, atheris, chooser  # noqa: E402

import tomli_w  # noqa: E402

if atheris is not None:
    with atheris.instrument_imports():
        from trainplan.errors import UserError
        from trainplan.workload import calibration
        from trainplan import limits
        from trainplan.workload.load import load_workload
else:
    from trainplan.errors import UserError
    from trainplan.workload import calibration
    from trainplan import limits
    from trainplan.workload.load import load_workload

KEYS = [*calibration.KNOWN_KEYS, "cluster.cores", "model.hf_config", "bogus", ""]
ANY: list[object] = [0, 1, -1, 2, 1.5, 120.0, 1e12, 1e308, -1e308, 5e-324, float("nan"), float("inf"), 2**63 - 1,
                     True, False, "", "abc", "\x1b[31mred\x1b[0m", "x\x1b]0;title\x07y", "\u202e", "h264", "hevc",
                     1920, 1080, 3840, [], [1, 2], {}, {"a": 1}, {"width": "abc"}, [{"key": 1}]]
PLACES = ["format", "updated", "machine", "machine.hostname", "probes", "probes.decode", "probes.decode.settings",
          "probes.decode.settings.width", "probes.decode.settings.height", "probes.decode.settings.codec",
          "probes.decode.results", "probes.decode.date", "probes.read", "values", "bogus"]
ENTRY_FIELDS = ["key", "value", "unit", "probe", "date", "hostname", "cpu_model", "note", "extra"]
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

_DIR = tempfile.mkdtemp(prefix="fuzz_calibration.")
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)  # each run's scratch folder, not left in /tmp
_FILE = os.path.join(_DIR, "cal.toml")


def _set(doc: dict, dotted: str, value: object) -> None:
    node = doc
    parts = dotted.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value


def _structured(rng) -> bytes:  # noqa: ANN001 - a random.Random
    doc: dict = {"format": 1}
    for _ in range(rng.randrange(5)):
        _set(doc, rng.choice(PLACES), copy.deepcopy(rng.choice(ANY)))
    if not isinstance(doc.get("values"), list) or rng.random() < 0.7:
        entries = []
        for _ in range(rng.randrange(4)):
            entry = {"key": rng.choice(KEYS), "value": copy.deepcopy(rng.choice(ANY))}
            for _ in range(rng.randrange(3)):
                entry[rng.choice(ENTRY_FIELDS)] = copy.deepcopy(rng.choice(ANY))
            entries.append(entry)
        doc["values"] = entries
    try:
        return tomli_w.dumps(doc).encode("utf-8")
    except (TypeError, ValueError):
        return b"format = 1\n"


def one_input(data: bytes) -> None:
    rng = chooser(data)
    # a corpus file that starts with #raw is the calibration file itself
    body = data if data.startswith(b"#raw") or rng.random() >= 0.85 else _structured(rng)
    with open(_FILE, "wb") as fh:
        fh.write(body)
    try:
        with limits.only_files([_FILE]):
            measured = calibration.load(_FILE)
            for m in measured.values():
                if CONTROL.search(m.source):
                    raise AssertionError(f"a measured source with a control character: {m.source!r}")
            load_workload(None, [], _FILE)
    except UserError as err:
        if CONTROL.search(str(err)) or "\n" in str(err):
            raise AssertionError(f"a refusal that is not one printable line: {str(err)!r}") from None


if __name__ == "__main__":
    Harness("calibration", one_input).main()
