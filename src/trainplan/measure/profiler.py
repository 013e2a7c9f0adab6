"""Watch a running training loop: does the accelerator wait on data? (issue 6)

A small library API:

    from trainplan.measure import profiler as profile

    prof = profile.Profiler(warmup=5)
    for batch in prof.wrap(loader):          # times each blocking fetch
        with prof.step():                    # optional: times the step itself
            loss = train_step(batch)
    result = prof.result(predicted=plan)     # busy fraction, slowest hop, cores needed

and, anywhere in the loader (in DataLoader worker processes too):

    with profile.hop("decode", frames=len(clip)):
        frames = decode(clip)

`wrap` alone is enough: the time between the end of one fetch and the start of the
next is the step. `step()` narrows it to the step proper (the rest of the loop body is
reported as `other`). Busy fraction = step time / wall time of the counted steps.

On a GPU the CPU runs ahead of the device, so wall-clock step times lie. Two honest
ways, chosen by `sync`: "cuda-sync" calls torch.cuda.synchronize() before each fetch
(the fetch then measures only the device's idle wait, at the cost of one sync a step);
"cuda-events" records CUDA events at each step's start and end and measures busy on the
device's own timeline, Σ(end_k − start_k) / (end_last − start_first), with no sync in
the loop. "auto" picks cuda-events when this process has initialised CUDA, else wall.

Hop timers measure CPU-seconds (thread CPU time) and wall seconds per frame for each
named hop (read, decode, tokenize, transfer, ...). Worker processes started after the
Profiler is created find its directory in the environment (TRAINPLAN_PROFILE_DIR) and
leave their figures there; rates, not totals, are what is reported, so a worker that
is stopped before its last flush changes nothing that matters.

Cores needed (Little's law, L = λ τ, docs/pipeline-and-bill.md): the demand in frames/s times the CPU
seconds the hops spend per frame; without hop timers, the loader's workers divided by
the busy fraction (each worker a core, supply proportional to workers).
"""

from __future__ import annotations

import json
import math
import multiprocessing.util
import os
import statistics
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Literal

ENV_DIR = "TRAINPLAN_PROFILE_DIR"
FLUSH_EVERY_S = 0.5  # how often a process writes its hop figures for the profiler to read

Sync = Literal["auto", "none", "cuda-sync", "cuda-events"]


# ---------------------------------------------------------------- hop timers (any process)


class _HopRegistry:
    """Per-process accumulators: name -> [wall seconds, CPU seconds, calls, frames]."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.totals: dict[str, list[float]] = {}
        self.lock = threading.Lock()
        self.last_flush = 0.0
        self.finalizer_registered = False

    def reset(self) -> None:
        with self.lock:
            self.pid = os.getpid()
            self.totals = {}
            self.last_flush = 0.0
            self.finalizer_registered = False

    def add(self, name: str, wall: float, cpu: float, frames: float) -> None:
        if os.getpid() != self.pid:  # a forked child: what it inherited belongs to its parent
            self.reset()
        with self.lock:
            t = self.totals.setdefault(name, [0.0, 0.0, 0.0, 0.0])
            t[0] += wall
            t[1] += cpu
            t[2] += 1
            t[3] += frames
        directory = os.environ.get(ENV_DIR)
        if directory and os.getpid() != _MAIN_PID.get(directory, -1):
            if not self.finalizer_registered:
                # DataLoader workers are multiprocessing children; their exit runs these finalizers
                multiprocessing.util.Finalize(None, self.flush, args=(directory,), exitpriority=10)
                self.finalizer_registered = True
            now = time.monotonic()
            if now - self.last_flush >= FLUSH_EVERY_S:
                self.flush(directory)
                self.last_flush = now

    def snapshot(self) -> dict[str, list[float]]:
        with self.lock:
            return {k: list(v) for k, v in self.totals.items()}

    def flush(self, directory: str) -> None:
        path = Path(directory) / f"hops-{os.getpid()}.json"
        tmp = path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(self.snapshot()))
            os.replace(tmp, path)
        except OSError:
            pass  # the profiler has gone (its directory removed): nothing to report to


_REGISTRY = _HopRegistry()
_MAIN_PID: dict[str, int] = {}  # profile directory -> pid of the process that owns it


@contextmanager
def hop(name: str, frames: float = 1.0) -> Iterator[None]:
    """Time one pass through a named hop that handled `frames` frames (CPU and wall seconds)."""
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    try:
        yield
    finally:
        _REGISTRY.add(name, time.perf_counter() - wall0, time.thread_time() - cpu0, frames)


def record(name: str, wall_seconds: float, cpu_seconds: float, frames: float) -> None:
    """Add a measurement to a named hop directly (when a context manager does not fit the code)."""
    _REGISTRY.add(name, wall_seconds, cpu_seconds, frames)


def timed(name: str, frames: float = 1.0) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator form of `hop`."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def inner(*args: Any, **kwargs: Any) -> Any:
            with hop(name, frames):
                return fn(*args, **kwargs)

        inner.__name__ = getattr(fn, "__name__", "timed")
        inner.__doc__ = fn.__doc__
        return inner

    return wrap


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class HopStats:
    name: str
    processes: int
    calls: int
    frames: float
    wall_seconds: float
    cpu_seconds: float
    cpu_seconds_per_frame: float
    wall_seconds_per_frame: float
    frames_per_cpu_second: float  # what one core does in this hop alone
    cpu_share: float  # CPU-seconds / wall seconds in the hop: below 1 when it waited for a core (or I/O)


@dataclass(frozen=True)
class ProfileResult:
    """What a profiled loop measured; seconds and frames/s, fractions 0-1."""

    timing: str  # wall | cuda-sync | cuda-events
    steps: int  # counted (after warm-up)
    warmup: int
    frames: float
    frames_per_batch: float
    workers: int | None
    wall_seconds: float
    step_seconds: float
    fetch_seconds: float
    other_seconds: float
    busy: float  # step / wall: the accelerator's busy fraction
    wait_share: float  # fetch / wall: the share spent blocked on data
    demand_fps: float  # frames per second of step time: what it trains on when data is ready
    delivered_fps: float  # frames per second of wall time: what it got
    step_cpu_seconds: float  # thread CPU-seconds of the stepping thread during the steps
    step_cpu_share: float  # step CPU / step wall: below 1 when the step waited for a core or a device
    mean_step_seconds: float
    mean_fetch_seconds: float
    p95_fetch_seconds: float
    hops: dict[str, HopStats]
    slowest_hop: str | None  # the hop with the most CPU-seconds per frame
    cpu_seconds_per_frame: float | None  # all hops together
    cores_needed: float | None
    cores_needed_basis: str
    predicted: dict[str, Any] | None = None
    busy_relative_error: float | None = None  # (measured - predicted) / predicted
    # issue 14: the wait split (DS-Analyzer's fetch and prep stalls), fractions of wall time
    au: float | None = None  # MLPerf Storage's accelerator utilisation: compute time / total time (= busy here)
    # fetch (I/O), prep (CPU), total, other; split (False with a reason where the wait could not be split)
    stall: dict[str, Any] = field(default_factory=dict)
    stall_basis: str = ""
    cores_needed_prep: float | None = None  # cores that remove the prep stall (Little's law over the prep hops)

    def to_dict(self) -> dict[str, Any]:
        from trainplan.quantities import json_safe

        return json_safe(asdict(self))

    def mfu(self, flops_per_frame: float, peak_flops: float, devices: int = 1) -> float:
        """End-to-end MFU of the measured step: demand × FLOPs per frame / (devices × peak)."""
        return self.demand_fps * flops_per_frame / (devices * peak_flops)


def predicted_from(plan: Any) -> dict[str, Any]:
    """The plan's pipeline figures the profile is compared with: a PipelineAccount, a report's
    `pipeline` dict, or a plain dict with at least `busy`."""
    keys = ("busy", "bottleneck", "cores_needed", "demand_fps", "supply_fps", "core_fps", "cores",
            "decoded_per_used", "tokens_per_frame")
    if isinstance(plan, dict):
        src = plan.get("pipeline", plan)
        out = {}
        for k in keys:
            if k in src:
                v = src[k]
                out[k] = v["value"] if isinstance(v, dict) and "value" in v else v
        return out
    return {k: getattr(plan, k) for k in keys if hasattr(plan, k)}


# ---------------------------------------------------------------- the profiler


def _batch_frames(batch: Any) -> float:
    """Frames in a batch: the leading dimension of its first tensor-like element, else 1."""
    item = batch
    for _ in range(4):
        if isinstance(item, dict) and item:
            item = next(iter(item.values()))
        elif isinstance(item, (list, tuple)) and item:
            if all(isinstance(x, (int, float)) for x in item):
                return float(len(item))
            item = item[0]
        else:
            break
    shape = getattr(item, "shape", None)
    if shape is not None and len(shape) > 0:
        return float(shape[0])
    return 1.0


class Profiler:
    """Times a data iterator's blocking fetches against the steps of the loop that consumes it."""

    def __init__(self, *, warmup: int = 2, sync: Sync | Callable[[], None] = "auto",
                 frames_per_batch: float | Callable[[Any], float] | None = None,
                 workers: int | None = None, replay: bool = False) -> None:
        if warmup < 0:
            raise ValueError("warmup must be >= 0")
        self.warmup = warmup
        # replay: after the warm-up, hand the loop the last batch fetched again and again instead of
        # fetching (DS-Analyzer's synthetic pass: no fetch and no prep, the ingestion ceiling)
        self.replay = replay
        self._replayed: Any = None
        self._replay_left: float = math.inf
        self._sync_mode = sync
        self.frames_per_batch = frames_per_batch
        self.workers = workers
        self._dir = tempfile.mkdtemp(prefix="trainplan-profile-")
        _MAIN_PID[self._dir] = os.getpid()
        self._previous_env = os.environ.get(ENV_DIR)
        os.environ[ENV_DIR] = self._dir
        _REGISTRY.reset()
        self._fetches: list[float] = []
        self._steps: list[float] = []  # step seconds (explicit step() or the loop body)
        self._bodies: list[float] = []  # loop body seconds (end of fetch to next fetch)
        self._frames: list[float] = []
        self._events: list[tuple[Any, Any]] = []
        self._explicit: float | None = None
        self._explicit_cpu = 0.0
        self._step_cpu: list[float] = []  # thread CPU-seconds of the same steps
        self._index = 0  # batches fetched so far, warm-up included
        self._mode: str | None = None
        self._workers_clock = WorkerClock()  # the loader processes over the counted window (issue 25)
        self._fetch_cpu: list[tuple[float, float]] = []  # (CPU, run-queue wait) of this thread in each fetch

    @property
    def fetched(self) -> int:
        """Batches fetched so far, warm-up included."""
        return self._index

    @property
    def counted(self) -> int:
        """Batches fetched after the warm-up: the steps the result will count."""
        return max(0, self._index - self.warmup)

    # -- timing mode

    def _resolve_mode(self) -> str:
        if self._mode is not None:
            return self._mode
        mode = self._sync_mode
        if callable(mode):
            self._mode = "custom-sync"
        elif mode == "auto":
            torch = _torch_if_imported()
            cuda = torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized()
            self._mode = "cuda-events" if cuda else "wall"
        elif mode == "none":
            self._mode = "wall"
        elif mode in ("cuda-sync", "cuda-events"):
            torch = _torch_if_imported() or _import_torch()
            if not torch.cuda.is_available():
                raise RuntimeError(f"profile: sync={mode!r} needs a CUDA device, and torch sees none")
            self._mode = mode
        else:
            raise ValueError(f"profile: sync must be auto, none, cuda-sync, cuda-events or a callable, got {mode!r}")
        return self._mode

    def _sync(self) -> None:
        mode = self._resolve_mode()
        if mode == "cuda-sync":
            _import_torch().cuda.synchronize()
        elif mode == "custom-sync":
            self._sync_mode()  # type: ignore[operator]

    def _event(self) -> Any:
        torch = _import_torch()
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    # -- the loop

    def wrap(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """Yield the items of `iterable`, timing each blocking fetch and each loop body."""
        if self.workers is None:
            self.workers = getattr(iterable, "num_workers", None)
        if self.replay:
            try:
                self._replay_left = float(len(iterable))  # type: ignore[arg-type]
            except TypeError:  # an iterable dataset: the loop decides when to stop
                self._replay_left = math.inf
        before = set(_child_pids())
        iterator = iter(iterable)
        self._workers_clock.pids = lambda: loader_pids(iterator, before)
        body_start: float | None = None
        body_cpu = 0.0
        start_event = None
        try:
            while True:
                self._sync()
                t0 = time.perf_counter()
                if body_start is not None:
                    self._end_step(t0 - body_start, time.thread_time() - body_cpu, start_event)
                    start_event = None
                else:
                    self._explicit = None  # a warm-up step's explicit time is not counted
                    self._explicit_cpu = 0.0
                if self._replayed is not None:
                    if self._index >= self._replay_left:
                        body_start = None
                        return
                    item = self._replayed
                else:
                    clock0 = _thread_clock() if not self.workers else None
                    try:
                        item = next(iterator)
                    except StopIteration:
                        body_start = None
                        return
                    clock1 = _thread_clock() if clock0 is not None else None
                    if self.replay and self._index + 1 >= self.warmup:
                        self._replayed = item
                t1 = time.perf_counter()
                counted = self._index >= self.warmup
                self._index += 1
                if counted:
                    if self._replayed is None or self._index == self.warmup + 1:
                        self._workers_clock.sample()
                        if self._replayed is None and clock0 is not None and clock1 is not None:
                            self._fetch_cpu.append((clock1[0] - clock0[0], clock1[1] - clock0[1]))
                    self._fetches.append(t1 - t0)
                    self._frames.append(self._count_frames(item))
                    if self._resolve_mode() == "cuda-events":
                        start_event = self._event()
                    body_start = t1
                    body_cpu = time.thread_time()
                else:
                    body_start = None
                yield item
        finally:
            if self._index > self.warmup:
                self._workers_clock.sample(force=True)  # the window's end, before the workers are shut down
            if body_start is not None:  # the loop left early (break): close the last step
                self._sync()
                self._end_step(time.perf_counter() - body_start, time.thread_time() - body_cpu, start_event)

    def _end_step(self, body: float, body_cpu: float, start_event: Any) -> None:
        self._bodies.append(body)
        self._steps.append(self._explicit if self._explicit is not None else body)
        self._step_cpu.append(self._explicit_cpu if self._explicit is not None else body_cpu)
        self._explicit = None
        self._explicit_cpu = 0.0
        if start_event is not None:
            self._events.append((start_event, self._event()))

    @contextmanager
    def step(self) -> Iterator[None]:
        """Time the step proper (inside a `wrap` loop): the rest of the body counts as `other`."""
        self._sync()
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self._sync()
            self._explicit = (self._explicit or 0.0) + time.perf_counter() - t0
            self._explicit_cpu += time.thread_time() - c0

    def _count_frames(self, item: Any) -> float:
        f = self.frames_per_batch
        if f is None:
            return _batch_frames(item)
        return float(f(item)) if callable(f) else float(f)

    # -- hops

    def hops(self) -> dict[str, HopStats]:
        """Hop figures of this process and of every worker process that reported."""
        per_process: list[dict[str, list[float]]] = [_REGISTRY.snapshot()]
        for path in Path(self._dir).glob("hops-*.json"):
            try:
                per_process.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
        merged: dict[str, list[float]] = {}
        procs: dict[str, int] = {}
        for totals in per_process:
            for name, (wall, cpu, calls, frames) in totals.items():
                m = merged.setdefault(name, [0.0, 0.0, 0.0, 0.0])
                m[0] += wall
                m[1] += cpu
                m[2] += calls
                m[3] += frames
                procs[name] = procs.get(name, 0) + 1
        out = {}
        for name, (wall, cpu, calls, frames) in merged.items():
            frames = max(frames, 1e-12)
            out[name] = HopStats(name, procs[name], int(calls), frames, wall, cpu, cpu / frames, wall / frames,
                                 frames / cpu if cpu > 0 else math.inf, cpu / wall if wall > 0 else 1.0)
        return out

    # -- the result

    def result(self, predicted: Any = None) -> ProfileResult:
        mode = self._resolve_mode()
        n = len(self._steps)
        if n == 0:
            raise RuntimeError(f"profile: no step was counted (warm-up {self.warmup} batches; "
                               f"{self._index} fetched); profile a longer loop or lower warmup")
        fetches = self._fetches[:n]
        frames = sum(self._frames[:n])
        step_s = sum(self._steps)
        fetch_s = sum(fetches)
        body_s = sum(self._bodies)
        wall = fetch_s + body_s
        other = max(0.0, body_s - step_s)
        if mode == "cuda-events" and self._events:
            self._events[-1][1].synchronize()
            step_s = sum(s.elapsed_time(e) for s, e in self._events) / 1e3
            wall = self._events[0][0].elapsed_time(self._events[-1][1]) / 1e3
            # the events span from the first step's start: add the first fetch's wait
            wall += fetches[0]
            other = max(0.0, wall - step_s - fetch_s)
        busy = min(1.0, step_s / wall) if wall > 0 else 1.0
        hops = self.hops()
        demand = frames / step_s if step_s > 0 else math.inf
        slowest = max(hops.values(), key=lambda h: h.cpu_seconds_per_frame).name if hops else None
        per_frame = sum(h.cpu_seconds_per_frame for h in hops.values()) if hops else None
        if per_frame is not None and math.isfinite(demand):
            cores = demand * per_frame
            basis = "Little's law: demand frames/s x CPU-seconds per frame of the timed hops"
        elif self.workers:
            cores = self.workers / busy if busy > 0 else math.inf
            basis = (f"{self.workers} loader worker(s) / busy fraction, assuming supply grows with workers "
                     "(no hop timers)")
        else:
            cores = None
            basis = "unknown: no hop timers and no worker count"
        stall, stall_basis, cores_prep = stall_split(hops, wait_share=fetch_s / wall if wall > 0 else 0.0,
                                                     seconds_per_step=wall / n, body_seconds_per_step=body_s / n,
                                                     frames_per_step=frames / n, demand_fps=demand,
                                                     workers=self.workers)
        by_workers = self.worker_stalls(fetch_s / wall if wall > 0 else 0.0, sum(fetches))
        if by_workers is not None and not hops:  # no hop timers: the workers' own clocks split the wait
            stall, stall_basis = by_workers
        elif by_workers is None and not hops:
            stall_basis = ("could not split the wait: no hop timers, and no loader process's CPU and wall time "
                           "(/proc) over the counted steps")
        if stall.get("total") is not None:
            stall["other"] = other / wall if wall > 0 else 0.0  # busy + fetch + prep + other = 1
        stall["split"] = stall.get("fetch") is not None
        if not stall["split"]:
            stall["reason"] = stall_basis
        pred = predicted_from(predicted) if predicted is not None else None
        rel = None
        if pred and pred.get("busy"):
            rel = (busy - float(pred["busy"])) / float(pred["busy"])
        return ProfileResult(
            timing=mode, steps=n, warmup=self.warmup, frames=frames, frames_per_batch=frames / n,
            workers=self.workers, wall_seconds=wall, step_seconds=step_s, fetch_seconds=fetch_s,
            other_seconds=other, busy=busy, wait_share=fetch_s / wall if wall > 0 else 0.0,
            demand_fps=demand, delivered_fps=frames / wall if wall > 0 else math.inf,
            step_cpu_seconds=sum(self._step_cpu), step_cpu_share=sum(self._step_cpu) / max(sum(self._steps), 1e-12),
            mean_step_seconds=step_s / n, mean_fetch_seconds=fetch_s / n,
            p95_fetch_seconds=_percentile(fetches, 0.95),
            hops=hops, slowest_hop=slowest, cpu_seconds_per_frame=per_frame, cores_needed=cores,
            cores_needed_basis=basis, predicted=pred, busy_relative_error=rel,
            au=busy, stall=stall, stall_basis=stall_basis, cores_needed_prep=cores_prep,
        )

    def worker_stalls(self, total: float, fetch_seconds: float) -> tuple[dict[str, float | None], str] | None:
        """The wait split by the loader processes' clocks (worker_split): the DataLoader's workers where it
        has them, else this thread's own CPU during the fetches (a loader without workers prepares its
        items inside the fetch)."""
        n, wall, cpu, queue = self._workers_clock.totals()
        if n and (self.workers or 0) > 0:
            return worker_split(total, processes=n, wall=wall, cpu=cpu, queue=queue,
                                basis="the loader workers' CPU and wall time (/proc)")
        if not self.workers and self._fetch_cpu and fetch_seconds > 0:
            cpu = sum(c for c, _ in self._fetch_cpu)
            queue = sum(q for _, q in self._fetch_cpu)
            return worker_split(total, processes=1, wall=fetch_seconds, cpu=cpu, queue=queue,
                                basis="the loop's own thread during its fetches (no loader workers; /proc)")
        return None

    def close(self) -> None:
        """Stop handing the profile directory to new worker processes and remove it."""
        if os.environ.get(ENV_DIR) == self._dir:
            if self._previous_env is None:
                os.environ.pop(ENV_DIR, None)
            else:
                os.environ[ENV_DIR] = self._previous_env
        for path in Path(self._dir).glob("*"):
            path.unlink(missing_ok=True)
        try:
            os.rmdir(self._dir)
        except OSError:
            pass
        _MAIN_PID.pop(self._dir, None)

    def __enter__(self) -> Profiler:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# Hops whose time is the loader waiting on storage (the fetch stall); every other timed hop is
# the loader's CPU work (decode, transforms, collate: the prep stall).
IO_HOPS = frozenset({"read", "fetch", "io", "storage", "open"})


# ---------------------------------------------------------------- what the workers did (issue 25)


def _child_pids() -> list[int]:
    """Processes this one started (a DataLoader's workers among them), from /proc (Linux; [] elsewhere)."""
    pids: set[int] = set()
    try:
        for task in Path("/proc/self/task").iterdir():
            try:
                pids.update(int(x) for x in (task / "children").read_text().split())
            except (OSError, ValueError):
                continue
    except OSError:
        return []
    return sorted(pids)


def loader_pids(iterator: Any, before: set[int]) -> list[int]:
    """The loader's own worker processes: those its iterator names (torch's DataLoader iterator keeps
    them in `_workers`), else the processes started since the iterator was made. Other children of the
    training process (an experiment tracker's service, a data server) are not the loader's: counted,
    their idle time would read as fetch (issue 25)."""
    workers = getattr(iterator, "_workers", None)
    if isinstance(workers, (list, tuple)):
        pids = [int(w.pid) for w in workers if isinstance(getattr(w, "pid", None), int)]
        if pids:
            return pids
    return [pid for pid in _child_pids() if pid not in before]


def runqueue_wait_seconds(pid: int | str = "thread-self") -> float | None:
    """Seconds a process (or "thread-self", the calling thread) has been ready to run with no core free: the
    run-queue wait of /proc/PID/schedstat (its second field, in ns); None where the kernel does not say.
    The loader probe and the profiler both tell this wait for a core from a wait for data."""
    try:
        with open(f"/proc/{pid}/schedstat", encoding="ascii") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def process_clock(pid: int | str) -> tuple[float, float] | None:
    """(CPU seconds, seconds waiting for a core) of a process (or "thread-self"): utime + stime from
    /proc/PID/stat, the run-queue wait from /proc/PID/schedstat; None where /proc does not say."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return cpu, runqueue_wait_seconds(pid) or 0.0


# Seconds between two readings of the loader processes' clocks: /proc ticks in 10 ms, so a finer
# sampling adds reads, not resolution.
SAMPLE_SECONDS = 0.05


def _thread_clock() -> tuple[float, float]:
    """(CPU seconds, seconds waiting for a core) of the calling thread: its CPU clock, and the run-queue
    wait of /proc/thread-self/schedstat (0 where /proc does not say)."""
    return time.thread_time(), runqueue_wait_seconds() or 0.0


class WorkerClock:
    """The loader processes' CPU, run-queue wait and wall time over the counted window, sampled at each
    counted fetch: per process, its first and last sighting (a worker started later, as a new epoch's are,
    counts from when it was first seen)."""

    def __init__(self) -> None:
        self.first: dict[int, tuple[float, float, float]] = {}  # pid -> (time, cpu, wait)
        self.last: dict[int, tuple[float, float, float]] = {}
        self._sampled = 0.0
        self.pids: Callable[[], list[int]] = _child_pids  # the loader's processes (Profiler.wrap says which)

    def sample(self, force: bool = False) -> None:
        """Read the processes' clocks, at most every SAMPLE_SECONDS (a fast loop is not slowed by /proc
        reads), or now when `force`."""
        now = time.perf_counter()
        if not force and self.last and now - self._sampled < SAMPLE_SECONDS:
            return
        self._sampled = now
        for pid in self.pids():
            clock = process_clock(pid)
            if clock is None:
                continue
            self.first.setdefault(pid, (now, *clock))
            self.last[pid] = (now, *clock)

    def totals(self) -> tuple[int, float, float, float]:
        """(processes seen twice, wall, CPU, run-queue wait) summed over the processes."""
        n = wall = cpu = wait = 0.0
        for pid, (t0, c0, q0) in self.first.items():
            t1, c1, q1 = self.last[pid]
            if t1 > t0:
                n += 1
                wall += t1 - t0
                cpu += max(0.0, c1 - c0)
                wait += max(0.0, q1 - q0)
        return int(n), wall, cpu, wait


def worker_split(total: float, *, processes: int, wall: float, cpu: float, queue: float,
                 basis: str) -> tuple[dict[str, float | None], str] | None:
    """The wait split by what the loader did while the trainer waited: computing (its CPU seconds, and the
    seconds it was ready but waiting for a core) is prep; the rest of its wall time it was blocked (a read,
    a network fetch, a sleep) is fetch. None where nothing was measured."""
    if wall <= 0:
        return None
    computing = min(1.0, (cpu + queue) / wall)
    return ({"fetch": total * (1 - computing), "prep": total * computing, "total": total},
            f"{basis}: {processes} process(es) computing {computing * 100:.0f} % of their wall time "
            f"(CPU {cpu / wall * 100:.0f} %, waiting for a core {queue / wall * 100:.0f} %), blocked "
            f"{(1 - computing) * 100:.0f} %")


def stall_split(hops: dict[str, HopStats], *, wait_share: float, seconds_per_step: float,
                body_seconds_per_step: float, frames_per_step: float, demand_fps: float,
                workers: int | None) -> tuple[dict[str, float | None], str, float | None]:
    """Split the share of wall time the loop waited on data into fetch (I/O) and prep (CPU) stalls.

    From the hop timers: the wait splits in the ratio of the I/O hops' wall seconds a frame (t_io)
    to the other hops' (t_prep), per loader process. Serial loading (no workers) makes this exact,
    T = body + B (t_io + t_prep); with W workers each worker's time a frame is t_io + t_prep + the
    untimed rest (collate, hand-over, waiting for a core), which is CPU-side and counted as prep.
    (A first version took the prep stall as (max(body, B t_prep / W) - body) / T; on the end-to-end
    example the untimed worker time then appeared as fetch and named the wrong hop.)
    Returns ({fetch, prep, total}, how it was split, cores that remove the prep stall)."""
    total = max(0.0, wait_share)
    io = [h for h in hops.values() if h.name in IO_HOPS]
    prep = [h for h in hops.values() if h.name not in IO_HOPS]
    t_io = sum(h.wall_seconds_per_frame for h in io)
    t_prep = sum(h.wall_seconds_per_frame for h in prep)
    cpu_prep = sum(h.cpu_seconds_per_frame for h in prep)
    cores = demand_fps * cpu_prep if prep and math.isfinite(demand_fps) else None
    if not hops:
        return {"fetch": None, "prep": None, "total": total}, "no hop timers: the wait cannot be split", cores
    if not io:
        return ({"fetch": 0.0, "prep": total, "total": total},
                "no I/O hop timed (read, fetch, io, storage, open): the whole wait is the loader's CPU work", cores)
    if not prep:
        return {"fetch": total, "prep": 0.0, "total": total}, "only I/O hops timed: the whole wait is fetch", cores
    # the loader's time a frame outside the I/O hops (collate, hand-over, waiting for a core) is
    # CPU-side work too, so the I/O hops' share of the timed wall time is the fetch stall's share,
    # and the rest of the wait is prep: a workers' pipeline does not change the ratio of the two
    share = t_io / (t_io + t_prep)
    w = workers or 0
    return ({"fetch": total * share, "prep": total * (1 - share), "total": total},
            f"{w} loader process(es): the wait split as the I/O hops' wall seconds a frame against the "
            f"prep hops' ({t_io * 1e3:.3f} : {t_prep * 1e3:.3f} ms)", cores)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[min(98, max(0, round(q * 100) - 1))]


def _torch_if_imported() -> Any:
    import sys

    return sys.modules.get("torch")


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as err:  # pragma: no cover - only with sync="cuda-*"
        raise RuntimeError("profile: CUDA timing needs torch; install it with `pip install torch`") from err
    return torch


# ---------------------------------------------------------------- the step rate with data ready


@dataclass(frozen=True)
class StepRate:
    """The step probe: how fast the model trains when data is always ready."""

    steps: int
    seconds: float
    frames_per_batch: float
    seconds_per_step: float
    frames_per_second: float


def step_rate(step: Callable[[Any], Any], batch: Any, *, frames_per_batch: float | None = None,
              warmup: int = 2, min_seconds: float = 1.0, max_steps: int = 10_000,
              sync: Callable[[], None] | None = None) -> StepRate:
    """Run `step(batch)` on one batch held in memory until `min_seconds` pass: the demand side."""
    sync = sync or (lambda: None)
    for _ in range(warmup):
        step(batch)
    sync()
    started = time.perf_counter()
    n = 0
    while n < max_steps:
        step(batch)
        n += 1
        if time.perf_counter() - started >= min_seconds:
            break
    sync()
    seconds = time.perf_counter() - started
    fpb = float(frames_per_batch) if frames_per_batch is not None else _batch_frames(batch)
    return StepRate(n, seconds, fpb, seconds / n, fpb * n / seconds)


# ---------------------------------------------------------------- one global profiler for scripts

_CURRENT: Profiler | None = None


def current() -> Profiler | None:
    """The profiler `trainplan profile SCRIPT` installed, if any (a script may wrap its own loop with it)."""
    return _CURRENT


def install(profiler: Profiler) -> Callable[[], None]:
    """Make `profiler` current and, when torch is importable, wrap every DataLoader iteration
    with it. Returns a function that undoes both."""
    global _CURRENT
    _CURRENT = profiler
    undo: list[Callable[[], None]] = []
    try:
        from torch.utils.data import DataLoader
    except ImportError:
        DataLoader = None  # noqa: N806
    if DataLoader is not None:
        original = DataLoader.__iter__

        def profiled_iter(self: Any) -> Iterator[Any]:
            if profiler.workers is None:
                profiler.workers = self.num_workers
            return profiler.wrap(_Unwrapped(original, self))

        DataLoader.__iter__ = profiled_iter  # type: ignore[method-assign]
        undo.append(lambda: setattr(DataLoader, "__iter__", original))

    def uninstall() -> None:
        global _CURRENT
        for u in undo:
            u()
        _CURRENT = None

    return uninstall


@dataclass
class _Unwrapped:
    """An iterable calling the original DataLoader.__iter__ (so wrap() does not recurse)."""

    original: Callable[[Any], Iterator[Any]]
    loader: Any
    num_workers: int | None = field(default=None)

    def __post_init__(self) -> None:
        self.num_workers = getattr(self.loader, "num_workers", None)

    def __iter__(self) -> Iterator[Any]:
        return self.original(self.loader)

    def __len__(self) -> int:
        return len(self.loader)  # TypeError for an iterable dataset, as the loader's own


# ---------------------------------------------------------------- text


def _figure(value: Any, spec: str, unit: str = "") -> str:
    """`value` written with `spec` and `unit`; a missing (nan) or unbounded (inf) figure in the words every
    report uses for it (units.NOT_APPLICABLE, units.UNBOUNDED), never 'nan'."""
    from trainplan import units

    x = float(value)
    if math.isnan(x):
        return units.NOT_APPLICABLE
    if math.isinf(x):
        return units.UNBOUNDED if x > 0 else f"-{units.UNBOUNDED}"
    return f"{x:{spec}}{unit}"


def _predicted_parts(p: dict[str, Any]) -> list[str]:
    """The plan's prediction as 'name figure' parts of the summary's 'plan predicted:' line."""
    pred = [f"busy {_figure(float(p['busy']) * 100, '.1f', ' %')}"]
    if "bottleneck" in p:
        pred.append(f"bottleneck {p['bottleneck']}")
    if p.get("cores_needed") is not None:
        pred.append(f"cores needed {_figure(p['cores_needed'], '.2f')}")
    if p.get("demand_fps") is not None:
        pred.append(f"demand {_figure(p['demand_fps'], '.1f', ' frames/s')}")
    if p.get("supply_fps") is not None:
        pred.append(f"supply {_figure(p['supply_fps'], '.1f', ' frames/s')}")
    return pred


def summary(result: ProfileResult) -> str:
    """A few plain lines: measured next to predicted."""
    r = result
    lines = [
        f"profile ({r.timing} timing): {r.steps} steps after {r.warmup} warm-up, {r.frames:.0f} frames "
        f"in {r.wall_seconds:.2f} s" + (f", {r.workers} loader worker(s)" if r.workers is not None else ""),
        f"  busy {r.busy * 100:.1f} %   waiting on data {r.wait_share * 100:.1f} %   "
        f"other {r.other_seconds / max(r.wall_seconds, 1e-12) * 100:.1f} %",
        f"  demand {r.demand_fps:.1f} frames/s of step time; delivered {r.delivered_fps:.1f} frames/s",
        f"  step {r.mean_step_seconds * 1e3:.2f} ms mean ({r.step_cpu_share * 100:.0f} % of it on a CPU); fetch "
        f"{r.mean_fetch_seconds * 1e3:.2f} ms mean, {r.p95_fetch_seconds * 1e3:.2f} ms p95",
    ]
    for h in sorted(r.hops.values(), key=lambda h: -h.cpu_seconds_per_frame):
        lines.append(f"  hop {h.name:<10} {h.cpu_seconds_per_frame * 1e3:8.3f} CPU-ms/frame "
                     f"({h.frames_per_cpu_second:.1f} frames/CPU-s, {h.processes} process(es), "
                     f"{h.cpu_share * 100:.0f} % on a CPU)")
    if r.slowest_hop:
        lines.append(f"  slowest hop: {r.slowest_hop}")
    if r.stall and r.stall.get("fetch") is not None:
        lines.append(f"  stalls: fetch (I/O) {r.stall['fetch'] * 100:.1f} %, prep (CPU) {r.stall['prep'] * 100:.1f} % "
                     f"of wall time; AU {r.busy * 100:.1f} %")
        lines.append(f"  split by {r.stall_basis}")
    elif r.stall_basis:
        lines.append(f"  stalls: {r.stall_basis}")
        if r.cores_needed_prep is not None:
            lines.append(f"  cores needed to remove the prep stall: {r.cores_needed_prep:.2f}")
    if r.cores_needed is not None:
        lines.append(f"  cores needed: {r.cores_needed:.2f} ({r.cores_needed_basis})")
    if r.predicted:
        lines.append("  plan predicted: " + ", ".join(_predicted_parts(r.predicted)))
        if r.busy_relative_error is not None and math.isfinite(r.busy_relative_error):
            lines.append(f"  measured busy vs predicted: {r.busy_relative_error * 100:+.1f} % relative")
    return "\n".join(lines)


# ---------------------------------------------------------------- differential passes (issue 14)


def warm_files(paths: list[Path], block: int = 4 * 2**20) -> int:
    """Read every file once so its pages sit in the page cache; returns the bytes read."""
    total = 0
    buf = bytearray(block)
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                total += n
    return total


def drop_files(paths: list[Path]) -> str:
    """Drop the files' pages from the page cache (posix_fadvise DONTNEED, no privilege needed)."""
    from trainplan.measure.read import _drop_from_cache

    methods = {_drop_from_cache(p) for p in paths}
    return "; ".join(sorted(methods)) if methods else "no data files named: nothing dropped"


def _differential_runs(run_pass: Callable[[Profiler], Any], data_files: list[Path], warmup: int,
                       sync: Sync | Callable[[], None], frames_per_batch: float | Callable[[Any], float] | None,
                       repeats: int, notes: list[str]) -> dict[str, list[ProfileResult]]:
    """The results of the synthetic, warm and cold passes, by pass, `repeats` of each in turn (how the page
    cache was emptied added to `notes`)."""
    runs: dict[str, list[ProfileResult]] = {"synthetic": [], "warm": [], "cold": []}
    for _ in range(repeats):
        for name in ("synthetic", "warm", "cold"):
            if name == "warm" and data_files:
                warm_files(data_files)
            if name == "cold" and data_files:
                method = f"cold pass: {drop_files(data_files)}"
                if method not in notes:
                    notes.append(method)
            prof = Profiler(warmup=warmup, sync=sync, frames_per_batch=frames_per_batch, replay=name == "synthetic")
            try:
                run_pass(prof)
                runs[name].append(prof.result())
            finally:
                prof.close()
    return runs


def _loader_split(basis_runs: list[ProfileResult], warm: bool, cache_fetch: float, rest: float,
                  notes: list[str]) -> tuple[float, float | None, str]:
    """(fetch, prep or None, what split them) shares of a step: the page cache's part is fetch, the `rest` split
    as the loader split its own wait in `basis_runs` (the warm passes, or the cold ones where nothing was warmed)."""
    shares = [r.stall["fetch"] / r.stall["total"] for r in basis_runs
              if r.stall.get("fetch") is not None and (r.stall.get("total") or 0) > 0]
    prep: float | None
    if shares:
        share = statistics.median(shares)
        fetch, prep = cache_fetch + rest * share, rest * (1 - share)
        split = f"the {'warm' if warm else 'cold'} passes' own split ({basis_runs[0].stall_basis})"
    else:
        fetch, prep = cache_fetch, None
        split = ("could not split the wait beyond the page cache's part: "
                 + (basis_runs[0].stall_basis if basis_runs else "no pass ran"))
        notes.append(split)
    return fetch, prep, split


def differential_stalls(run_pass: Callable[[Profiler], Any], data_files: list[Path], *, warmup: int = 2,
                        sync: Sync | Callable[[], None] = "auto",
                        frames_per_batch: float | Callable[[Any], float] | None = None,
                        repeats: int = 3) -> dict[str, Any]:
    """DS-Analyzer's differential passes over one training script, `run_pass(profiler)` each, every pass
    run `repeats` times (the median seconds per step used, the spread reported):

    1. synthetic: after the warm-up the loop gets one batch again and again (no fetch, no prep):
       seconds per step T_s, the ingestion ceiling;
    2. warm: the data files read into the page cache first, so reading them costs a memory copy: T_w;
    3. cold: the data files dropped from the page cache first: T_c.

    busy = AU = T_s / T_c; the page cache's part of the fetch stall is (T_c - T_w) / T_c; the rest of the
    wait, (T_w - T_s) / T_c, is split by what the loader did in the warm passes (its own stall split: the
    workers' CPU against their wall time, or the hop timers), so a loader that sleeps on a slow fetch the
    page cache cannot serve (an object store, a network file system) is fetch, not prep. T_w is held
    within [T_s, T_c] (said in `notes` where the passes disagree), so busy + fetch + prep = 1. Without
    data files nothing is dropped, the warm passes are cold ones too, and the whole wait is split as the
    loader did it."""
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    notes: list[str] = []
    runs = _differential_runs(run_pass, data_files, warmup, sync, frames_per_batch, repeats, notes)
    if not data_files:
        notes.append("no --data files named: the page cache was not emptied, so the warm and cold passes read alike")
    per_step = {k: [r.wall_seconds / r.steps for r in v] for k, v in runs.items()}
    t = {k: statistics.median(v) for k, v in per_step.items()}
    spread = {k: {"min": min(v), "max": max(v), "runs": len(v)} for k, v in per_step.items()}
    t_s, t_c = t["synthetic"], max(t["cold"], 1e-12)
    if t_s > t_c:
        notes.append(f"the synthetic pass was slower than the cold one ({t_s * 1e3:.3g} against {t_c * 1e3:.3g} ms a "
                     "step): the step, not the data, sets the pace; busy taken as 1")
        t_s = t_c
    t_w = t["warm"] if data_files else t_c
    if not t_s <= t_w <= t_c:
        notes.append(f"the warm pass ({t_w * 1e3:.3g} ms a step) fell outside [synthetic, cold] = [{t_s * 1e3:.3g}, "
                     f"{t_c * 1e3:.3g}] ms: timing noise larger than the page cache's effect; held at the nearer end")
        t_w = min(max(t_w, t_s), t_c)
    busy = t_s / t_c
    cache_fetch = (t_c - t_w) / t_c
    rest = (t_w - t_s) / t_c
    # how the loader split its own wait in the warm passes (the cold ones without data files)
    fetch, prep, split = _loader_split(runs["warm"] if data_files else runs["cold"], bool(data_files), cache_fetch,
                                       rest, notes)
    cold = runs["cold"][len(runs["cold"]) // 2]
    return {
        "method": f"differential passes (synthetic, warm, cold), {repeats} run(s) each, medians",
        "busy": busy,
        "au": busy,
        "busy_of_each_repeat": [min(1.0, s / c) for s, c in zip(per_step["synthetic"], per_step["cold"])],
        "stall": {"fetch": fetch, "prep": prep, "total": 1.0 - busy, "unsplit": None if prep is not None else rest,
                  "split": prep is not None, **({} if prep is not None else {"reason": split})},
        "split": split,
        "sums_to_one": busy + fetch + (prep if prep is not None else rest),
        "seconds_per_step": t,
        "seconds_per_step_spread": spread,
        "cores_needed_prep": cold.cores_needed_prep,
        "hop_split_of_cold_pass": cold.stall,
        "notes": notes,
        "passes": {k: [r.to_dict() for r in v] for k, v in runs.items()},
    }

