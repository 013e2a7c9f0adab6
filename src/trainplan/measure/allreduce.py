"""The all-reduce probe: bus bytes/s of torch.distributed's all-reduce, gloo over local processes or NCCL
under torchrun, and the helpers that join or start the ranks."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

from trainplan.errors import UserError
from trainplan.measure.host import ProbeSkipped, require_torch


@dataclass(frozen=True)
class AllreduceResult:
    backend: str
    world_size: int
    bytes: int  # message size M
    repeats: int
    seconds_per_allreduce: float
    algorithm_bytes_per_second: float  # M / t
    bus_bytes_per_second: float  # 2 (N-1)/N M / t: what each participant sends per second (docs/accounts.md ring)
    launched_by: str  # "local processes" | "torchrun"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _allreduce_worker(rank: int, world: int, port: int, backend: str, nbytes: int, repeats: int,
                      result: Any) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        result_tuple = _allreduce_timed(torch, dist, backend, nbytes, repeats)
        if rank == 0:
            result.put(result_tuple)
    finally:
        dist.destroy_process_group()


def _allreduce_timed(torch: Any, dist: Any, backend: str, nbytes: int, repeats: int) -> float:
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    tensor = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
    sync = torch.cuda.synchronize if backend == "nccl" else (lambda: None)
    for _ in range(2):  # warm-up: connection set-up, buffer registration
        dist.all_reduce(tensor)
    sync()
    dist.barrier()
    started = time.perf_counter()
    for _ in range(repeats):
        dist.all_reduce(tensor)
    sync()
    elapsed = time.perf_counter() - started
    # the slowest rank decides: take the max over ranks
    t = torch.tensor([elapsed], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item()) / repeats


def units_bytes(nbytes: float) -> str:
    from trainplan import units

    return units.format_quantity(nbytes, "bytes")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def join_torchrun_job(torch: Any, dist: Any, backend: str | None) -> tuple[str, int]:
    """Join the torchrun job this process is a rank of (RANK and WORLD_SIZE set): NCCL on the
    local GPU when CUDA is available, else gloo. Returns (backend, world size)."""
    chosen = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if chosen == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        dist.init_process_group(chosen)
    return chosen, int(os.environ["WORLD_SIZE"])


def leave_torchrun_job(dist: Any) -> None:
    """Every rank leaves together: a rank that exits while another is still inside gloo can make
    that one abort (seen as exit -6 under torchrun on a loaded machine)."""
    dist.barrier()
    dist.destroy_process_group()


#: Memory one spawned gloo rank takes before its buffers: torch imported and the process group joined
#: (227 MB peak RSS measured with torch 2 on Linux), rounded up.
RANK_PROCESS_BYTES = 256 * 2**20
#: The most local ranks per CPU core this process may use: each runs one thread, so beyond a few per core
#: the ranks queue for the cores and the figure measures the scheduler, not the loopback path.
MAX_RANKS_PER_CORE = 4


def check_local_ranks(processes: int, bytes_per_rank: float, what: str) -> None:
    """Refuse, before a rank is spawned, a rank count past MAX_RANKS_PER_CORE per usable core, and ranks
    whose processes and buffers (`bytes_per_rank`, described by `what`) pass the memory limit (issue 29).
    Under torchrun this process is one rank: only its own buffers are counted."""
    from trainplan import limits, units
    from trainplan.measure.decode import cores_present

    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        limits.check_allocation("--size", bytes_per_rank, f"one rank's {what}")
        return
    cores = cores_present()
    most = MAX_RANKS_PER_CORE * cores
    if processes > most:
        raise UserError("--processes", f"expected at most {most:,} local processes ({MAX_RANKS_PER_CORE} per "
                        f"core of the {cores} this process may use), got {processes:,}")
    limits.check_allocation("--processes", processes * RANK_PROCESS_BYTES,
                            f"{processes:,} local processes of {units.format_quantity(RANK_PROCESS_BYTES, 'bytes')}")
    limits.check_allocation("--size", processes * (RANK_PROCESS_BYTES + bytes_per_rank),
                            f"{processes:,} local processes of {units.format_quantity(RANK_PROCESS_BYTES, 'bytes')}"
                            f" and {what} each")


def run_local_ranks(target: Callable[..., None], args: tuple[Any, ...], processes: int, timeout: float,
                    what: str) -> Any:
    """Start `processes` spawned ranks `target(rank, processes, port, *args, queue)` on loopback and
    return what rank 0 put on the queue; ProbeSkipped (naming `what`) when they do not all finish."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = _free_port()
    procs = [ctx.Process(target=target, args=(r, processes, port, *args, queue), daemon=True)
             for r in range(processes)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    alive = [p for p in procs if p.is_alive()]
    for p in alive:
        p.terminate()
    if alive or any(p.exitcode != 0 for p in procs) or queue.empty():
        raise ProbeSkipped(f"{what}: the local gloo processes did not finish (exit codes "
                           f"{[p.exitcode for p in procs]}, timeout {timeout:.0f} s)")
    return queue.get()


def allreduce(processes: int = 2, size: int = 16 * 2**20, repeats: int = 10, backend: str | None = None,
              timeout: float = 120.0) -> AllreduceResult:
    """Bytes/s of an all-reduce of a `size`-byte float32 tensor.

    Under torchrun (RANK and WORLD_SIZE in the environment) this process is one rank
    of the job and joins it (NCCL when CUDA is available, else gloo); every rank must
    call it and rank 0's result is the job's. Otherwise it starts `processes` local
    processes talking gloo over loopback: that measures this host's memory and
    loopback path, not a network, and says so in `launched_by`.
    """
    if size < 4:
        raise UserError("--size", f"expected at least 4 bytes, got {size}")
    nbytes = max(1, size // 4) * 4
    check_local_ranks(processes, nbytes, f"a {units_bytes(nbytes)} message")
    torch = require_torch("allreduce")
    import torch.distributed as dist

    if not dist.is_available():
        raise ProbeSkipped("allreduce: this torch build has no torch.distributed")
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        chosen, world = join_torchrun_job(torch, dist, backend)
        seconds = _allreduce_timed(torch, dist, chosen, size, repeats)
        leave_torchrun_job(dist)
        launched = "torchrun"
    else:
        if processes < 2:
            raise UserError("--processes", f"expected at least 2 processes for an all-reduce, got {processes}")
        chosen = backend or "gloo"
        if chosen != "gloo":
            raise UserError("--backend", "expected gloo for local processes; launch with torchrun for NCCL")
        seconds = run_local_ranks(_allreduce_worker, (chosen, size, repeats), processes, timeout, "allreduce")
        world = processes
        launched = "local processes"
    algo = nbytes / seconds
    return AllreduceResult(chosen, world, nbytes, repeats, seconds, algo, 2 * (world - 1) / world * algo, launched)
