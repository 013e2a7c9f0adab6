"""The loader hand-over probe: `data.loader_cpu_per_frame`, what a DataLoader worker spends on each
frame besides decoding it (the tensor, collation into a batch, the copy into shared memory, the
hand-over to the trainer).

One worker yields ready uint8 frames of the model's side (nothing to decode) in batches, and the
trainer takes them as fast as they come. The worker's CPU-seconds (its process accounting, Linux
/proc) per frame delivered, less what making the frames costs (timed on its own, in this process,
without a loader), is the figure. The clock of /proc ticks in 10 ms: a second of the worker's CPU
reads to 1 %. The batches prefetched at the start and at the end of the window offset each other.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator

from trainplan.errors import UserError
from trainplan.measure.host import ProbeSkipped, require_torch

DISTINCT_FRAMES = 64  # frames made once and yielded in turn: a fresh tensor each time, no decode


@dataclass(frozen=True)
class HandoverResult:
    side: int
    batch: int
    frames: int  # delivered in the timed window
    wall_seconds: float
    worker_cpu_seconds: float
    worker_cpu_per_frame: float  # seconds
    making_cpu_per_frame: float  # seconds: the dataset's own cost of a frame, without a loader
    loader_cpu_per_frame: float  # seconds: the figure for data.loader_cpu_per_frame

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _torch() -> Any:
    return require_torch("hand-over")  # the one wording of a probe skipped for want of torch


def cpu_seconds_of(pid: int) -> float:
    """utime + stime of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ready_frames_class() -> type:
    """An IterableDataset class of pre-made uint8 frames of a side, forever (made here, as torch is
    imported only when a probe runs; a DataLoader over it forks its workers, the Linux default)."""
    torch = _torch()

    class ReadyFrames(torch.utils.data.IterableDataset):  # type: ignore[name-defined]
        """Pre-made frames, forever: a loader whose data is always ready."""

        def __init__(self, side: int) -> None:
            self.side = side

        def __iter__(self) -> Iterator[Any]:
            gen = torch.Generator().manual_seed(0)
            frames = [torch.randint(0, 256, (self.side, self.side, 3), dtype=torch.uint8, generator=gen)
                      for _ in range(DISTINCT_FRAMES)]
            while True:
                yield from frames

    return ReadyFrames


def worker_cpu(loader: Any, warmup: int, seconds: float) -> tuple[int, float, float]:
    """(frames, worker CPU-seconds, wall seconds) of a DataLoader's batches taken as fast as they come
    for `seconds`, after `warmup` batches (the workers started); the workers' CPU from /proc."""
    it = iter(loader)
    try:
        for _ in range(warmup):
            next(it)
        pids = [w.pid for w in it._workers]  # noqa: SLF001 - the worker processes, to read their CPU time
        cpu0, wall0 = sum(cpu_seconds_of(p) for p in pids), time.perf_counter()
        frames = 0
        while time.perf_counter() - wall0 < seconds:
            frames += len(next(it))
        return frames, sum(cpu_seconds_of(p) for p in pids) - cpu0, time.perf_counter() - wall0
    finally:
        del it


def _one_thread(_: int) -> None:
    import torch

    torch.set_num_threads(1)


def handover(side: int = 224, batch: int = 16, seconds: float = 2.0, warmup: int = 4) -> HandoverResult:
    """Measure the hand-over of `batch`-frame batches of `side` px uint8 RGB frames by one worker."""
    if side < 1:
        raise UserError("side", f"expected a frame side of at least 1 pixel, got {side}")
    if batch < 1:
        raise UserError("batch", f"expected at least one frame per batch, got {batch}")
    if not seconds > 0:
        raise UserError("seconds", f"expected a measuring time above 0 s, got {seconds}")
    if not Path(f"/proc/{os.getpid()}/stat").exists():
        raise ProbeSkipped("hand-over: reads the worker's CPU time from /proc, which this system lacks")
    torch = _torch()
    ready = ready_frames_class()
    # what making a frame costs, alone (the frames are made once before the worker's clock is read too)
    frames_iter = iter(ready(side))
    next(frames_iter)
    c0 = time.thread_time()
    made = 20_000
    for _ in range(made):
        next(frames_iter)
    making = (time.thread_time() - c0) / made
    # the class is made in a function: the worker must be forked to see it
    loader = torch.utils.data.DataLoader(ready(side), batch_size=batch, num_workers=1, worker_init_fn=_one_thread,
                                         multiprocessing_context="fork")
    frames, cpu, wall = worker_cpu(loader, warmup, seconds)
    per_frame = cpu / frames
    return HandoverResult(side=side, batch=batch, frames=frames, wall_seconds=wall, worker_cpu_seconds=cpu,
                          worker_cpu_per_frame=per_frame, making_cpu_per_frame=making,
                          loader_cpu_per_frame=max(per_frame - making, 0.0))
