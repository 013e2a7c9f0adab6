"""Simulation sweeps: the queue over a grid (`trainplan simulate --vary KEY=VALUES`).

Every combination of the varied keys is one simulation of the same length and seed,
run in parallel across CPU cores (forked worker processes; each gets whole chunks of the
grid), with the compiled engine when it is installed. Keys:

- queue keys: `buffer` (decoded frames the buffer holds; `data.buffer` is the same),
  `cv` (coefficient of variation of decode times, lognormal; 0 is deterministic),
  `read_cv`, `read_ahead` (0: unbounded), `keyframe_cost`, `seed`;
- `cores` (CPU decode cores per accelerator, `cluster.cores`) and any other workload key
  with a dot (`cluster.video_decoders`, `data.side`, `training.micro_batch` ...): the
  workload is rebuilt with `--set KEY=VALUE` and the queue taken from its pipeline.

Values: a comma list (`1,4,16,64`), or `LO:HI` (whole numbers LO..HI inclusive), or
`LO:HI:STEP`. The sample of service times depends only on the variability, the read
time, the frames and the seed, so configurations that differ only in buffer, read-ahead
or decoders reuse one sample (the grid is ordered so that they come together).
"""

from __future__ import annotations

import itertools
import math
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from trainplan.errors import UserError
from trainplan.simulate.queue import QueueSpec, ServiceTimes, Variability, sample_service_times, simulate

QUEUE_KEYS = ("buffer", "cv", "read_cv", "read_ahead", "keyframe_cost", "seed")
ALIASES = {"data.buffer": "buffer", "cores": "cluster.cores"}
WHOLE_KEYS = ("buffer", "read_ahead", "seed")
ROW_FIGURES = ("busy", "formula_busy", "difference", "throughput_fps", "mean_buffer_frames", "bottleneck")
CHUNKS_PER_JOB = 4  # chunks handed to each worker: enough to even out, few enough to stay cheap


@dataclass(frozen=True)
class Vary:
    key: str  # canonical: a queue key or a workload key
    values: tuple[float, ...]


#: Ranges of the queue keys, (lowest, highest, lowest included); the command passes the ones `simulate`
#: enforces on its flags (interfaces/commands/simulate.py), so a grid refuses what a single run refuses.
Ranges = dict[str, tuple[float, float, bool]]


def parse_vary(text: str, ranges: Ranges | None = None, max_values: int | None = None) -> Vary:
    """'buffer=1,4,16' / 'cores=4:32:4' -> Vary. Each value passes the numeric boundary (units.number:
    finite, in float range, whole where the key counts) and, for a queue key, its range in `ranges`;
    a range of more than `max_values` values is refused before it is listed."""
    from trainplan import units

    key, sep, spec = text.partition("=")
    key = key.strip()
    if not sep or not key or not spec.strip():
        raise UserError("--vary", f"KEY=VALUES such as buffer=1,4,16,64 or cores=4:32:4, got {text!r}")
    key = ALIASES.get(key, key)
    if key not in QUEUE_KEYS and "." not in key:
        raise UserError("--vary", f"a queue key ({', '.join(QUEUE_KEYS)}), cores, or a workload key "
                        f"such as cluster.cores, got {key!r}")
    spec = spec.replace(" ", "")
    where = f"--vary {key}"
    expected = "numbers separated by commas, or LO:HI[:STEP] in whole numbers"
    whole = key in WHOLE_KEYS

    def read(item: str) -> float | int:
        if not item:
            raise UserError(where, f"{expected}, got an empty item in {spec!r}")
        value = units.number(item, where)
        if whole or ":" in spec:
            if value != math.floor(value):
                raise UserError(where, f"whole numbers, got {item!r}")
            exact = int(item) if item.lstrip("+-").isdigit() else int(value)  # 2^64 stays 2^64, not a float
            units.number(exact, where, whole=key != "seed")  # a seed may reach 2^63-1, as --seed
            return exact
        return value

    if ":" in spec:
        parts = [read(p) for p in spec.split(":")]
        if len(parts) not in (2, 3):
            raise UserError(where, f"{expected}, got {spec!r}")
        lo, hi = int(parts[0]), int(parts[1])
        step = int(parts[2]) if len(parts) == 3 else 1
        if step <= 0 or hi < lo:
            raise UserError(where, f"LO:HI[:STEP] with LO <= HI and STEP > 0, got {spec!r}")
        count = (hi - lo) // step + 1
        if max_values is not None and count > max_values:
            raise UserError(where, f"at most {max_values:,} values (a simulation each), got {count:,} in {spec!r}")
        raw: list[float | int] = list(range(lo, hi + 1, step))
    else:
        items = spec.split(",")
        if max_values is not None and len(items) > max_values:
            raise UserError(where, f"at most {max_values:,} values (a simulation each), got {len(items):,}")
        raw = [read(v) for v in items]
    for value in raw:
        if key in (ranges or {}):
            low, high, low_included = (ranges or {})[key]
            if not ((low <= value if low_included else low < value) and value <= high):
                raise UserError(where, f"values from {low:g} ({'included' if low_included else 'excluded'}) to "
                                f"{high:g}, as `simulate` takes them, got {units.shown(value)}")
        elif key == "buffer" and value < 1:
            raise UserError("--vary buffer", "buffer sizes >= 1 frame")
        elif key in ("cv", "read_cv", "read_ahead", "seed") and value < 0:
            raise UserError(where, "values >= 0")
        elif key == "keyframe_cost" and value <= 0:
            raise UserError("--vary keyframe_cost", "costs > 0 (times an ordinary frame)")
    values = tuple(v if isinstance(v, int) and key == "seed" else float(v) for v in raw)
    return Vary(key, values)


def number(v: float) -> int | float:
    return v if isinstance(v, int) else (int(v) if v == int(v) else v)


def _apply_queue(spec: QueueSpec, key: str, value: float, gop: int) -> QueueSpec:
    if key == "buffer":
        return replace(spec, buffer_frames=int(value))
    if key == "read_ahead":
        return replace(spec, read_ahead_frames=int(value) or None)
    if key == "seed":
        return replace(spec, seed=int(value))
    v = spec.variability or Variability()
    if key == "cv":
        if v.decode not in ("deterministic", "lognormal"):
            raise UserError("--vary cv", f"lognormal decode times (the decode distribution is {v.decode})")
        v = replace(v, decode="lognormal" if value > 0 else "deterministic", decode_cv=float(value))
    elif key == "read_cv":
        v = replace(v, read_cv=float(value))
    elif key == "keyframe_cost":
        v = replace(v, keyframe_cost=float(value), keyframe_interval=v.keyframe_interval or gop)
    return replace(spec, variability=None if v.is_off else v)


def grid_specs(
    base_spec: Callable[[list[str]], QueueSpec],
    varies: Sequence[Vary],
    gop: int,
) -> tuple[list[dict[str, int | float]], list[QueueSpec]]:
    """Every combination, as (values by key, spec). `base_spec(sets)` builds the queue of the
    workload with extra `KEY=VALUE` overrides (one call per combination of workload keys)."""
    seen = set()
    for v in varies:
        if v.key in seen:
            raise UserError("--vary", f"{v.key} given twice")
        seen.add(v.key)
    workload_vs = [v for v in varies if v.key not in QUEUE_KEYS]
    # buffer and read-ahead vary fastest: they reuse the sample of the configuration before
    rank = {"buffer": 3, "read_ahead": 2}
    queue_vs = sorted((v for v in varies if v.key in QUEUE_KEYS), key=lambda v: rank.get(v.key, 0))
    points: list[dict[str, int | float]] = []
    specs: list[QueueSpec] = []
    for wvals in itertools.product(*(v.values for v in workload_vs)):
        sets = [f"{v.key}={number(x)}" for v, x in zip(workload_vs, wvals)]
        spec0 = base_spec(sets)
        for qvals in itertools.product(*(v.values for v in queue_vs)):
            spec = spec0
            for v, x in zip(queue_vs, qvals):
                spec = _apply_queue(spec, v.key, x, gop)
            point = {v.key: number(x) for v, x in zip(workload_vs, wvals)}
            point |= {v.key: number(x) for v, x in zip(queue_vs, qvals)}
            points.append({v.key: point[v.key] for v in varies})
            specs.append(spec)
    return points, specs


def _sample_key(spec: QueueSpec) -> tuple[Any, ...]:
    return (spec.read_seconds_per_frame, spec.frames, spec.seed, spec.variability)


def run_chunk(specs: Sequence[QueueSpec], engine: str) -> list[dict[str, Any]]:
    """Simulate each spec (timeline off); consecutive specs sharing a sample reuse it."""
    rows = []
    last: tuple[tuple[Any, ...], ServiceTimes] | None = None
    for spec in specs:
        key = _sample_key(spec)
        if last is None or last[0] != key:
            last = (key, sample_service_times(spec))
        times = last[1]
        if times.step_seconds != spec.step_seconds_per_frame:
            times = replace(times, step_seconds=float(spec.step_seconds_per_frame))
        r = simulate(spec, times, timeline_limit=0, engine=engine)
        rows.append({k: getattr(r, k) for k in ROW_FIGURES})
    return rows


def default_jobs() -> int:
    """CPU cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def run_grid(
    specs: Sequence[QueueSpec],
    engine: str,
    jobs: int,
    advance: Callable[[int], None] = lambda n: None,
) -> list[dict[str, Any]]:
    """Rows of figures for `specs`, in order; across `jobs` worker processes when jobs > 1."""
    if not specs:
        return []
    from trainplan.simulate.queue import _check, _window

    for spec in specs:  # bad input is refused here, in this process, before any worker starts
        _check(spec)
        _window(spec)
    jobs = max(1, min(jobs, len(specs)))
    if jobs == 1:
        rows: list[dict[str, Any]] = []
        for spec in specs:
            rows += run_chunk([spec], engine)
            advance(1)
        return rows
    if engine in ("auto", "compiled"):
        from trainplan.simulate import fast

        if engine == "compiled" or fast.worth_it(sum(int(s.frames) for s in specs)):
            from trainplan.simulate.queue import _engine

            _engine("compiled", 0)  # load once here (or say why not): forked workers inherit the code
            engine = "compiled"
    size = max(1, math.ceil(len(specs) / (jobs * CHUNKS_PER_JOB)))
    chunks = [list(specs[i:i + size]) for i in range(0, len(specs), size)]
    import multiprocessing

    ctx = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
    results: list[list[dict[str, Any]] | None] = [None] * len(chunks)
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_signals)
    try:
        futures: dict[Future[list[dict[str, Any]]], int] = {
            pool.submit(run_chunk, chunk, engine): i for i, chunk in enumerate(chunks)}
        from concurrent.futures import as_completed

        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            advance(len(chunks[i]))
    except BaseException:
        # Ctrl-C, SIGTERM (raised by cli.main) or a failed chunk: stop the workers now, not after
        # the chunks still queued (the pool's own exit waits for them) (issue 29)
        stop_pool(pool)
        raise
    pool.shutdown(wait=True)
    return [row for chunk in results for row in (chunk or [])]


def _worker_signals() -> None:
    """In a worker: Ctrl-C is the parent's to handle (it stops the pool), and SIGTERM ends the worker
    at once (the parent's handler, inherited by fork, would raise it into the pool's loop)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started, terminate the worker processes and reap them."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():  # pragma: no cover - a worker that ignores SIGTERM
            process.kill()
            process.join(timeout=5)
