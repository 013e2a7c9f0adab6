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
from dataclasses import dataclass, replace
from typing import Any

from trainplan.errors import UserError, comma_items, refuse_repeats
from trainplan.simulate.limits import MAX_BUFFER_FRAMES, MAX_CV, MAX_KEYFRAME_COST, MAX_SEED, MAX_SIMULATIONS
from trainplan.simulate.queue import QueueSpec, ServiceTimes, Variability, sample_service_times, simulate

QUEUE_KEYS = ("buffer", "cv", "read_cv", "read_ahead", "keyframe_cost", "seed")
ALIASES = {"data.buffer": "buffer", "cores": "cluster.cores"}
WHOLE_KEYS = ("buffer", "read_ahead", "seed")
ROW_FIGURES = ("busy", "formula_busy", "difference", "throughput_fps", "mean_buffer_frames", "bottleneck")
SIMULATIONS_ENV = "TRAINPLAN_MAX_SIMULATIONS"  # overrides limits.MAX_SIMULATIONS
# A queue's decoders cost a pointer to a float and one to a name each (queue_spec_from_pipeline repeats
# one float and one name object for a group): 16 B, in every workload combination's spec.
BYTES_PER_DECODER = 16
CHUNKS_PER_JOB = 4  # chunks handed to each worker: enough to even out, few enough to stay cheap


@dataclass(frozen=True)
class Vary:
    key: str  # canonical: a queue key or a workload key
    values: tuple[int | float, ...]


def max_simulations() -> int:
    """The most simulations one grid runs: limits.MAX_SIMULATIONS, or TRAINPLAN_MAX_SIMULATIONS."""
    from trainplan import machine

    return machine.limit(SIMULATIONS_ENV, MAX_SIMULATIONS)


def _number(key: str, text: str, whole: bool) -> int | float:
    """One value as written: a whole number exactly (a seed of 2^63 - 1 stays itself), else a float."""
    try:
        return int(text)
    except ValueError:
        pass
    value = float(text)  # ValueError: not a number (the caller says what was expected)
    if whole:
        if not math.isfinite(value) or value != int(value) or abs(value) > 2**53:
            raise UserError(f"--vary {key}", f"whole numbers, got {text!r}")
        return int(value)
    return value


def _ranges(key: str) -> tuple[float, float, bool, str] | None:
    """(lowest, highest, lowest included, in words) of a queue key, as `trainplan simulate` enforces them."""
    if key == "buffer":
        return 1, MAX_BUFFER_FRAMES, True, f"buffer sizes from 1 to {MAX_BUFFER_FRAMES:,} frames"
    if key == "read_ahead":
        return 0, MAX_BUFFER_FRAMES, True, f"read-ahead from 0 (unbounded) to {MAX_BUFFER_FRAMES:,} frames"
    if key == "seed":
        return 0, MAX_SEED, True, "seeds from 0 to 2^63-1"
    if key in ("cv", "read_cv"):
        return 0, MAX_CV, True, f"coefficients of variation from 0 to {MAX_CV:g}"
    if key == "keyframe_cost":
        return 0, MAX_KEYFRAME_COST, False, f"costs above 0 and at most {MAX_KEYFRAME_COST:g} (times an ordinary frame)"
    return None


def parse_vary(text: str) -> Vary:
    """'buffer=1,4,16' / 'cores=4:32:4' -> Vary. Values are checked against the ranges `simulate`
    enforces and counted before any list of them is built (`buffer=1:1e9` is refused, not allocated)."""
    key, sep, spec = text.partition("=")
    key = key.strip()
    if not sep or not key or not spec.strip():
        raise UserError("--vary", f"KEY=VALUES such as buffer=1,4,16,64 or cores=4:32:4, got {text!r}")
    key = ALIASES.get(key, key)
    if key not in QUEUE_KEYS and "." not in key:
        raise UserError("--vary", f"a queue key ({', '.join(QUEUE_KEYS)}), cores, or a workload key "
                        f"such as cluster.cores, got {key!r}")
    spec = spec.replace(" ", "")
    whole = key in WHOLE_KEYS
    cap = max_simulations()
    try:
        if ":" in spec:
            parts = [_number(key, p, True) for p in spec.split(":")]
            if len(parts) not in (2, 3):
                raise ValueError
            lo, hi = int(parts[0]), int(parts[1])
            step = int(parts[2]) if len(parts) == 3 else 1
            if step <= 0 or hi < lo:
                raise ValueError
            count = (hi - lo) // step + 1
            if count > cap:
                raise UserError(f"--vary {key}", f"at most {cap:,} values (the grid's limit of simulations, "
                                f"{SIMULATIONS_ENV} to change it), got {count:,} from {spec!r}")
            values: tuple[int | float, ...] = tuple(range(lo, hi + 1, step))
        else:
            items = comma_items(f"--vary {key}", spec, "numbers")
            if len(items) > cap:
                raise UserError(f"--vary {key}", f"at most {cap:,} values (the grid's limit of simulations, "
                                f"{SIMULATIONS_ENV} to change it), got {len(items):,}")
            values = tuple(_number(key, item, whole) for item in items)
            refuse_repeats(f"--vary {key}", values, spec)
    except ValueError:
        raise UserError(f"--vary {key}", f"numbers separated by commas, or LO:HI[:STEP] in whole numbers, "
                        f"got {spec!r}") from None
    if not values or not all(math.isfinite(v) for v in values):
        raise UserError(f"--vary {key}", f"at least one finite value, got {spec!r}")
    if whole and any(v != int(v) for v in values):
        raise UserError(f"--vary {key}", f"whole numbers, got {spec!r}")
    bounds = _ranges(key)
    if bounds is not None:
        low, high, closed, words = bounds
        bad = next((v for v in values if v > high or v < low or (v == low and not closed)), None)
        if bad is not None:
            raise UserError(f"--vary {key}", f"{words}, got {number(bad)}")
    return Vary(key, values)


def number(v: int | float) -> int | float:
    return int(v) if v == int(v) else v


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
    total = math.prod(len(v.values) for v in varies)
    cap = max_simulations()
    if total > cap:
        raise UserError("--vary", f"at most {cap:,} simulations in one grid ({SIMULATIONS_ENV} to change it), "
                        f"got {' x '.join(f'{len(v.values):,}' for v in varies)} = {total:,}")
    workload_vs = [v for v in varies if v.key not in QUEUE_KEYS]
    # buffer and read-ahead vary fastest: they reuse the sample of the configuration before
    rank = {"buffer": 3, "read_ahead": 2}
    queue_vs = sorted((v for v in varies if v.key in QUEUE_KEYS), key=lambda v: rank.get(v.key, 0))
    points: list[dict[str, int | float]] = []
    specs: list[QueueSpec] = []
    from trainplan import machine

    budget = machine.budget_bytes()
    held = 0  # decoders in the queues built so far (the queue keys' specs share their workload's)
    for wvals in itertools.product(*(v.values for v in workload_vs)):
        sets = [f"{v.key}={number(x)}" for v, x in zip(workload_vs, wvals)]
        spec0 = base_spec(sets)
        held += len(spec0.decoder_seconds_per_frame)
        if held * BYTES_PER_DECODER > budget:
            raise UserError("--vary", f"the grid's queues would hold more than {budget // BYTES_PER_DECODER:,} "
                            f"decoders ({BYTES_PER_DECODER} B each in half this machine's available memory; "
                            f"{machine.MEMORY_ENV} to change it): fewer workload values or fewer cores")
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
    """Simulate each spec (timeline off). The compiled engine draws each sample as it streams (a few MB,
    whatever the frames); the pure-Python one reuses the sample of consecutive specs that share it."""
    rows = []
    last: tuple[tuple[Any, ...], ServiceTimes] | None = None
    for spec in specs:
        if engine == "compiled":
            r = simulate(spec, None, timeline_limit=0, engine=engine)
            rows.append({k: getattr(r, k) for k in ROW_FIGURES})
            continue
        key = _sample_key(spec)
        if last is None or last[0] != key:
            last = (key, sample_service_times(spec))
        times = last[1]
        if times.step_seconds != spec.step_seconds_per_frame:
            times = replace(times, step_seconds=float(spec.step_seconds_per_frame))
        r = simulate(spec, times, timeline_limit=0, engine=engine)
        rows.append({k: getattr(r, k) for k in ROW_FIGURES})
    return rows


class _Terminated(BaseException):
    """SIGTERM arrived while the workers ran."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated()


_STOPPING = frozenset({2, 15})  # SIGINT, SIGTERM (numbered as POSIX does; signal imported where used)


def _worker_signals() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; no traceback from each worker
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPPING)  # forked while the parent held them


def _run_indexed(job: tuple[int, list[QueueSpec], str]) -> tuple[int, list[dict[str, Any]]]:
    i, chunk, engine = job
    return i, run_chunk(chunk, engine)


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
    import signal
    import threading

    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else None)
    results: list[list[dict[str, Any]] | None] = [None] * len(chunks)
    # SIGINT (the parent's KeyboardInterrupt) and SIGTERM stop the workers at once, not after the grid
    # (issue 29): the workers ignore SIGINT (a terminal sends it to all of them) and die on SIGTERM,
    # and the parent terminates them on any exception, then dies of SIGTERM itself if that was it.
    in_main = threading.current_thread() is threading.main_thread()
    masking = in_main and hasattr(signal, "pthread_sigmask")
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if in_main else None
    terminated = False
    if masking:  # held while the workers are forked: a signal then is delivered once the pool is ours to stop
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)
    try:
        pool = ctx.Pool(jobs, initializer=_worker_signals)
    except BaseException:
        if masking:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPPING)
        if in_main:
            signal.signal(signal.SIGTERM, previous)
        raise
    try:
        if masking:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPPING)
        for i, rows in pool.imap_unordered(_run_indexed, [(i, chunk, engine) for i, chunk in enumerate(chunks)]):
            results[i] = rows
            advance(len(chunks[i]))
        pool.close()
    except _Terminated:
        terminated = True
        pool.terminate()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
        if in_main:
            signal.signal(signal.SIGTERM, previous)
    if terminated:
        os.kill(os.getpid(), signal.SIGTERM)  # the handler before ours (by default: exit as terminated)
    return [row for chunk in results for row in (chunk or [])]
