"""What every fuzz target shares (issue 16): arguments, the corpus, the loop, crash files.

    python fuzz/fuzz_X.py [-runs=N] [-max_total_time=S] [-seed=S] [-artifact_prefix=DIR/]

A target is a function `one_input(data: bytes)` that raises on a crash (any exception that is
not the refusal the target expects). The harness

- first replays the fixed corpus, fuzz/corpus/<target>/* (inputs that once crashed, and
  hand-written hostile ones), so a fixed bug stays fixed;
- then feeds generated inputs until -runs or -max_total_time is reached: with atheris (the
  `fuzz` extra) coverage-guided by libFuzzer, else a plain random loop whose seed is -seed,
  or a fresh random seed printed at the start (so a crash can be replayed);
- on a crash, saves the input to <artifact_prefix>crash-<sha1 of the input> and exits 1
  with the exception, so CI fails with the input kept.

Structured choices come from `random.Random(data)`: the same bytes give the same input in
both modes, and a saved crash file replays exactly (`python fuzz/fuzz_X.py CRASH_FILE`).
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

try:
    import atheris
except ImportError:  # the optional extra is not installed: a plain random loop
    atheris = None

CORPUS = Path(__file__).resolve().parent / "corpus"


class Harness:
    def __init__(self, name: str, one_input: Callable[[bytes], None], max_len: int = 400) -> None:
        self.name, self.one_input, self.max_len = name, one_input, max_len
        self.tried = 0
        self.runs = -1
        self.limit = 0.0
        self.seed: int | None = None
        self.prefix = ""
        self.replay: list[Path] = []
        self.start = time.monotonic()

    def _parse(self, args: list[str]) -> list[str]:
        passed = [sys.argv[0]]
        for arg in args:
            if arg.startswith("-runs="):
                self.runs = int(arg.split("=", 1)[1])
            elif arg.startswith("-max_total_time="):
                self.limit = float(arg.split("=", 1)[1])
            elif arg.startswith("-seed="):
                self.seed = int(arg.split("=", 1)[1])
                passed.append(arg)
            elif arg.startswith("-artifact_prefix="):
                self.prefix = arg.split("=", 1)[1]
                passed.append(arg)
            elif not arg.startswith("-"):
                self.replay.append(Path(arg))
            else:
                passed.append(arg)
        if self.runs < 0 and self.limit <= 0:
            self.limit = 60.0
        return passed

    def _budget_left(self) -> bool:
        return (self.runs < 0 or self.tried < self.runs) and (
            self.limit <= 0 or time.monotonic() - self.start < self.limit)

    def check(self, data: bytes) -> None:
        """One input; on a crash, save it and end the process with status 1."""
        self.tried += 1
        try:
            self.one_input(data)
        except BaseException:  # noqa: BLE001 - any escape is a crash, KeyboardInterrupt aside
            if sys.exc_info()[0] is KeyboardInterrupt:
                raise
            traceback.print_exc()
            path = f"{self.prefix}crash-{hashlib.sha1(data).hexdigest()}"
            try:
                Path(path).write_bytes(data)
                saved = f"input saved to {path}"
            except OSError as err:
                saved = f"input not saved ({err}): {data!r}"
            print(f"fuzz_{self.name}: CRASH after {self.tried} inputs; {saved}", file=sys.stderr, flush=True)
            os._exit(1)

    def report(self) -> None:
        print(f"fuzz_{self.name}: {self.tried} inputs tried in {time.monotonic() - self.start:.1f} s, no crash",
              flush=True)

    def _counted(self, data: bytes) -> None:
        """libFuzzer ends the process with exit(), past Python's atexit, so the budget is kept here."""
        if not self._budget_left():
            self.report()
            os._exit(0)
        self.check(data)

    def main(self, args: list[str] | None = None) -> None:
        passed = self._parse(sys.argv[1:] if args is None else args)
        self.start = time.monotonic()
        corpus = sorted((CORPUS / self.name).glob("*")) if (CORPUS / self.name).is_dir() else []
        for path in [*corpus, *self.replay]:
            self.check(path.read_bytes())
        if self.replay:  # replaying given files only
            self.report()
            return
        if atheris is not None:
            atheris.Setup(passed, self._counted)
            atheris.Fuzz()
            return
        seed = self.seed if self.seed is not None else random.SystemRandom().randrange(2**32)
        print(f"fuzz_{self.name}: atheris not installed, a plain random loop, -seed={seed}", flush=True)
        rng = random.Random(seed)
        while self._budget_left():
            self.check(rng.randbytes(rng.randint(0, self.max_len)))
        self.report()


def chooser(data: bytes) -> random.Random:
    """Structured choices from the input's bytes: the same bytes, the same choices."""
    return random.Random(hashlib.sha256(data).digest())
