"""`trainplan probe loader MODULE:FACTORY` (issue 25): the user's own Dataset and transform, measured per item.

The decode probe measures a decoder; a loader is more (its own decoder, torchcodec or PIL, its
transforms, its reads). This probe imports the user's factory (a callable returning a map-style
dataset, with `__len__` and `__getitem__`, or an iterable), takes its items one after another in
this process, and times each: wall seconds (perf_counter) and CPU seconds of the process (all its
threads: a decoder may use several). Per item:

- CPU per item c: what computing an item costs a core (decode, transform, collate of the item);
- wall per item t: c plus the time the item waited (a read from slow storage, a sleep, a lock);
- the wait share 1 - c / t: the fetch part of a worker's time, the rest its prep.

Written into the calibration as `cluster.core_fps_1080p` so that the plan's decode hop costs what the
loader costs: the plan charges g decoded frames per frame used, each at W H / (1920 x 1080) of a
1080p frame's time, so a loader that yields I items per CPU-second is I x g x W H / (1920 x 1080)
frames/s at 1080p (g, W, H the workload's: data.random_decodes or (gop + 1) / 2 at random access, 1
in order; data.pixels_per_frame or width x height). The calibration records the loader it measured.
"""

from __future__ import annotations

import importlib
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from trainplan.errors import UserError
from trainplan.measure.profiler import runqueue_wait_seconds  # stdlib only: a light import

WARMUP_ITEMS = 2  # items not timed: imports, file handles, a first allocation


@dataclass(frozen=True)
class LoaderProbe:
    factory: str
    items: int
    cpu_seconds: float
    wall_seconds: float
    cpu_per_item: float
    wall_per_item: float
    items_per_cpu_second: float
    items_per_wall_second: float
    wait_share: float  # 1 - (CPU + core wait) / wall: the share of a worker's time spent waiting for data (fetch)
    cpu_per_item_spread: tuple[float, float]  # 10th and 90th percentile of the items' CPU seconds
    wall_per_item_spread: tuple[float, float]
    # the share spent ready to run but waiting for a core (the machine's load, not the data): the run-queue
    # wait the kernel counts for this thread (/proc/thread-self/schedstat); 0 where it does not say
    core_wait_share: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_factory(spec: str) -> Callable[[], Any]:
    """The callable `FACTORY` of module `MODULE` (the current folder is on the import path)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UserError("MODULE:FACTORY", f"expected a module and a callable such as mydata:make_dataset, got {spec!r}")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise UserError("MODULE:FACTORY", f"expected an importable module {module_name!r} ({err})") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise UserError("MODULE:FACTORY", f"expected a callable {attr!r} in module {module_name!r}")
    return factory


def _items(dataset: Any) -> Iterator[Any]:
    """Items of a map-style dataset in index order, again and again, or of an iterable (started afresh when done)."""
    if hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__"):
        n = len(dataset)
        if n < 1:
            raise UserError("MODULE:FACTORY", "expected a dataset with at least one item")
        while True:
            for i in range(n):
                yield dataset[i]
    elif hasattr(dataset, "__iter__"):
        while True:
            got = False
            for item in dataset:
                got = True
                yield item
            if not got:
                raise UserError("MODULE:FACTORY", "expected an iterable that yields at least one item")
    else:
        raise UserError("MODULE:FACTORY", "expected the factory to return a dataset (__len__ and __getitem__) "
                        "or an iterable")


def _percentiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (values[0], values[0])
    q = statistics.quantiles(values, n=10)
    return (q[0], q[-1])


def probe_loader(spec: str, *, seconds: float = 2.0, max_items: int = 10_000,
                 factory: Callable[[], Any] | None = None) -> LoaderProbe:
    """Time the items of the dataset `spec` (MODULE:FACTORY) makes, one by one, for `seconds` of wall time (at
    least 3 items, at most `max_items`), after WARMUP_ITEMS untimed ones."""
    make = factory or load_factory(spec)
    try:
        dataset = make()
    except Exception as err:  # noqa: BLE001 - the user's code: its failure is reported in one line
        raise UserError("MODULE:FACTORY", f"the factory raised {err.__class__.__name__}: {err}") from None
    it = _items(dataset)
    cpus: list[float] = []
    walls: list[float] = []
    queued: list[float] = []  # run-queue seconds an item (empty where the kernel does not say)
    started = time.perf_counter()
    for index in range(WARMUP_ITEMS + max_items):
        q0 = runqueue_wait_seconds()
        c0, w0 = time.process_time(), time.perf_counter()
        try:
            next(it)
        except UserError:
            raise
        except Exception as err:  # noqa: BLE001 - the user's code
            raise UserError("MODULE:FACTORY", f"item {index} raised {err.__class__.__name__}: {err}") from None
        c1, w1 = time.process_time(), time.perf_counter()
        q1 = runqueue_wait_seconds()
        if index >= WARMUP_ITEMS:
            cpus.append(c1 - c0)
            walls.append(w1 - w0)
            if q0 is not None and q1 is not None:
                queued.append(max(0.0, q1 - q0))
            if len(walls) >= 3 and w1 - started >= seconds:
                break
    cpu, wall = max(sum(cpus), 1e-9), max(sum(walls), 1e-9)
    n = len(walls)
    core_wait = min(sum(queued), max(0.0, wall - cpu)) if len(queued) == n else 0.0
    return LoaderProbe(factory=spec, items=n, cpu_seconds=cpu, wall_seconds=wall, cpu_per_item=cpu / n,
                       wall_per_item=wall / n, items_per_cpu_second=n / cpu, items_per_wall_second=n / wall,
                       wait_share=max(0.0, 1.0 - (cpu + core_wait) / wall), cpu_per_item_spread=_percentiles(cpus),
                       wall_per_item_spread=_percentiles(walls), core_wait_share=core_wait / wall)


def core_fps_1080p(items_per_cpu_second: float, decoded_per_used: float, pixels_per_frame: float) -> float:
    """The decode rate at 1080p that makes the plan's decode hop cost what the loader costs:
    I x g x P / (1920 x 1080) (docs/measurement.md)."""
    from trainplan.accounts.pipeline import REFERENCE_PIXELS

    return items_per_cpu_second * decoded_per_used * pixels_per_frame / REFERENCE_PIXELS
