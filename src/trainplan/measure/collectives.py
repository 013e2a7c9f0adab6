"""`trainplan probe collectives` (and `allgather`, `reducescatter`, `alltoall`): bus bandwidth per tier.

Each collective of a message of M bytes is timed under torch.distributed and reported as
NCCL reports it: algorithm bandwidth M / t and bus bandwidth M / t x factor (all-reduce
2(n-1)/n; all-gather, reduce-scatter and all-to-all (n-1)/n; M the whole gathered buffer),
the figure comparable with a link's own rate (accounts/collectives.py). The all-reduce's
bus bandwidth is written to the calibration file as the measured tier: `cluster.interconnect`
for `--tier intra` (ranks inside a node), `cluster.node_link` for `--tier inter` (one rank
per node), which `trainplan plan` and `trainplan layout` then use instead of the catalogue's.

Launched by torchrun (RANK and WORLD_SIZE set) it joins the job: NCCL on GPUs, gloo
otherwise. Without torchrun it spawns `processes` local processes talking gloo over
loopback: that measures this host's memory and loopback path, not a network, and says so.
torch is an optional extra: `pip install trainplan[torch]`.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from trainplan import units
from trainplan.accounts.collectives import bus_factor
from trainplan.errors import UserError, comma_items, refuse_repeats

# the probe's names (CLI) and the names of accounts/collectives.py
OPS = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
       "alltoall": "all_to_all"}
TIERS = {"intra": "cluster.interconnect", "inter": "cluster.node_link"}
WARMUP = 2  # untimed calls: connection set-up, buffer registration


@dataclass(frozen=True)
class CollectiveResult:
    op: str  # all_reduce | all_gather | reduce_scatter | all_to_all
    backend: str
    world_size: int
    bytes: int  # M: the all-reduced buffer, the gathered buffer, the scattered input, one rank's all-to-all buffer
    repeats: int
    seconds: float  # per call, the slowest rank's
    algorithm_bytes_per_second: float  # M / t
    bus_factor: float
    bus_bytes_per_second: float  # M / t x factor
    launched_by: str  # "local processes" | "torchrun"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _call(torch: Any, dist: Any, op: str, buffer: Any, world: int) -> Any:
    """One call of `op` on a buffer of M bytes (the whole gathered / scattered buffer)."""
    if op == "all_reduce":
        return lambda: dist.all_reduce(buffer)
    shard = buffer.numel() // world
    part = buffer[:shard].clone()
    # torch 2.13 names the one-buffer forms *_single and warns on the older names (a FutureWarning a
    # person would read on every rank); the older names where a torch predates them
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    if op == "all_gather":
        return lambda: gather(buffer, part)
    if op == "reduce_scatter":
        return lambda: scatter(part, buffer)
    out = torch.empty_like(buffer)
    return lambda: dist.all_to_all_single(out, buffer)


def timed(torch: Any, dist: Any, backend: str, op: str, nbytes: int, repeats: int) -> float:
    """Seconds per call of `op`, the slowest rank's (every rank must call it)."""
    world = dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    elements = max(world, nbytes // 4 // world * world)  # divisible into world shards
    buffer = torch.ones(elements, dtype=torch.float32, device=device)
    call = _call(torch, dist, op, buffer, world)
    sync = torch.cuda.synchronize if backend == "nccl" else (lambda: None)
    for _ in range(WARMUP):
        call()
    sync()
    dist.barrier()
    started = time.perf_counter()
    for _ in range(repeats):
        call()
    sync()
    elapsed = torch.tensor([time.perf_counter() - started], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed.item()) / repeats


#: Buffers of M bytes one rank holds while timing each collective (_call): the buffer, a shard of M / world
#: for the gather and the scatter (added in bytes_per_rank), and all-to-all's output of M.
BUFFERS_HELD = {"all_reduce": 1, "all_gather": 1, "reduce_scatter": 1, "all_to_all": 2}


def bytes_per_rank(ops: list[str], nbytes: int, world: int) -> float:
    """The most one rank holds at once: the collectives are timed one after another."""
    m = _elements_bytes(nbytes, world)
    return max(BUFFERS_HELD[op] * m + (m // world if op in ("all_gather", "reduce_scatter") else 0) for op in ops)


def _elements_bytes(nbytes: int, world: int) -> int:
    return max(world, nbytes // 4 // world * world) * 4


def _worker(rank: int, world: int, port: int, ops: list[str], nbytes: int, repeats: int, queue: Any) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        seconds = {op: timed(torch, dist, "gloo", op, nbytes, repeats) for op in ops}
        if rank == 0:
            queue.put(seconds)
    finally:
        dist.destroy_process_group()


def _result(op: str, backend: str, world: int, nbytes: int, repeats: int, seconds: float,
            launched: str) -> CollectiveResult:
    m = _elements_bytes(nbytes, world)
    algo = m / seconds
    factor = float(bus_factor(op, world))
    return CollectiveResult(op, backend, world, m, repeats, seconds, algo, factor, algo * factor, launched)


def measure(ops: list[str], processes: int = 2, size: int = 16 * 2**20, repeats: int = 10,
            backend: str | None = None, timeout: float = 120.0) -> list[CollectiveResult]:
    """Time each collective of `ops` (names of accounts/collectives.py) on a `size`-byte buffer."""
    from trainplan.measure.allreduce import (check_local_ranks, join_torchrun_job, leave_torchrun_job,
                                             run_local_ranks, units_bytes)
    from trainplan.measure.host import ProbeSkipped, require_torch

    for op in ops:
        if op not in OPS.values():
            raise UserError("--ops", f"expected some of {', '.join(OPS)}, got {op!r}")
    if size < 4 * max(processes, 1):
        raise UserError("--size", f"expected at least 4 bytes per process, got {size}")
    world = int(os.environ.get("WORLD_SIZE", processes)) if "RANK" in os.environ else processes
    held = bytes_per_rank(ops, size, max(world, 1))
    check_local_ranks(processes, held, f"{units_bytes(held)} of buffers")
    torch = require_torch("collectives")
    import torch.distributed as dist

    if not dist.is_available():
        raise ProbeSkipped("collectives: this torch build has no torch.distributed")
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        chosen, world = join_torchrun_job(torch, dist, backend)
        seconds = {op: timed(torch, dist, chosen, op, size, repeats) for op in ops}
        leave_torchrun_job(dist)
        launched = "torchrun"
    else:
        if processes < 2:
            raise UserError("--processes", f"expected at least 2 processes, got {processes}")
        chosen = backend or "gloo"
        if chosen != "gloo":
            raise UserError("--backend", "expected gloo for local processes; launch with torchrun for NCCL")
        seconds = run_local_ranks(_worker, (ops, size, repeats), processes, timeout, "collectives")
        world = processes
        launched = "local processes"
    return [_result(op, chosen, world, size, repeats, seconds[op], launched) for op in ops]


def calibration_values(results: list[CollectiveResult], tier: str) -> list[dict[str, Any]]:
    """The all-reduce's bus bandwidth as the measured tier (the figure the layout's collectives use)."""
    if tier not in TIERS:
        raise UserError("--tier", f"expected one of {', '.join(TIERS)}, got {tier!r}")
    by_op = {r.op: r for r in results}
    headline = by_op.get("all_reduce") or results[0]
    others = "; ".join(f"{r.op} {units.format_quantity(r.bus_bytes_per_second, 'byte_rate')}" for r in results
                       if r is not headline)
    note = (f"{headline.op} bus bandwidth (M / t x {headline.bus_factor:.3g}), {headline.backend} over "
            f"{headline.world_size} {headline.launched_by}, M = {units.format_quantity(headline.bytes, 'bytes')}, "
            f"{tier}-node tier"
            + (f"; also {others}" if others else ""))
    return [{"key": TIERS[tier], "value": float(headline.bus_bytes_per_second), "note": note}]


def table(results: list[CollectiveResult], tier: str) -> str:
    first = results[0]
    # sizes and rates with their own prefix (a 1 KiB buffer read "0.0 MB", its rate "0.000 GB/s")
    lines = [f"collectives probe ({tier}-node tier): {first.backend}, {first.world_size} {first.launched_by}, "
             f"{units.format_quantity(first.bytes, 'bytes')} buffer",
             f"  {'op':<15} {'ms/call':>9} {'algbw':>12} {'factor':>7} {'busbw':>12}"]
    for r in results:
        lines.append(f"  {r.op:<15} {r.seconds * 1e3:>9.3f} {units.format_quantity(r.algorithm_bytes_per_second, 'byte_rate'):>12} "
                     f"{r.bus_factor:>7.3f} {units.format_quantity(r.bus_bytes_per_second, 'byte_rate'):>12}")
    return "\n".join(lines)


def register_probe(probe_app: Any) -> None:
    """Add `probe collectives`, `probe allgather`, `probe reducescatter` and `probe alltoall`."""
    def make(default_ops: str, name: str, doc: str) -> None:
        def command(
            ops: Annotated[str, typer.Option(help="comma-separated: allreduce, allgather, reducescatter, "
                                             "alltoall")] = default_ops,
            tier: Annotated[str, typer.Option(help="intra (ranks in one node: cluster.interconnect) or inter "
                                              "(one rank per node: cluster.node_link)")] = "intra",
            processes: Annotated[int, typer.Option(help="local processes (ignored under torchrun)", min=2)] = 2,
            size: Annotated[str, typer.Option(help="buffer size M")] = "16 MiB",
            repeats: Annotated[int, typer.Option(help="calls timed per collective", min=1)] = 10,
            backend: Annotated[Optional[str], typer.Option(help="gloo or nccl (default: nccl under torchrun "
                                                           "with CUDA, else gloo)")] = None,
            format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",  # noqa: A002
            output: Annotated[Optional[Path], typer.Option("--output", "-o", help="write or update this "
                                                           "calibration TOML file")] = None,
        ) -> None:
            from trainplan.measure import probe
            from trainplan.workload import calibration

            if format not in ("table", "json"):
                raise UserError("--format", f"expected table or json, got {format!r}")
            if tier not in TIERS:
                raise UserError("--tier", f"expected one of {', '.join(TIERS)}, got {tier!r}")
            names = [o.replace("-", "").replace("_", "")
                     for o in comma_items("--ops", ops, f"expected some of {', '.join(OPS)}")]
            refuse_repeats("--ops", names, ops)  # an op named twice would be measured twice
            unknown = [n for n in names if n not in OPS]
            if unknown:
                raise UserError("--ops", f"expected some of {', '.join(OPS)}, separated by single commas, got {ops!r}")
            nbytes = int(units.parse(size, "bytes", "--size"))
            try:
                results = measure([OPS[n] for n in names], processes, nbytes, repeats, backend)
            except probe.ProbeSkipped as why:
                typer.echo(f"trainplan: skipped: {why}", err=True)
                raise typer.Exit(0) from None
            if os.environ.get("RANK", "0") != "0":
                return  # under torchrun only rank 0 reports
            if output is not None:
                first = results[0]
                calibration.write(output, "collectives",
                                  settings={"tier": tier, "backend": first.backend, "world_size": first.world_size,
                                            "bytes": first.bytes, "launched_by": first.launched_by},
                                  results={r.op: r.to_dict() for r in results},
                                  values=calibration_values(results, tier), machine=probe.machine())
            if format == "json":
                typer.echo(json.dumps({"tier": tier, "results": [r.to_dict() for r in results]}, indent=2))
            else:
                typer.echo(table(results, tier))

        command.__doc__ = doc
        probe_app.command(name)(command)

    make("allreduce,allgather,reducescatter,alltoall", "collectives",
         "Bus bandwidth of all-reduce, all-gather, reduce-scatter and all-to-all (NCCL's definition), per tier.")
    make("allgather", "allgather", "All-gather bus bandwidth ((n-1)/n x M / t) with torch.distributed.")
    make("reducescatter", "reducescatter", "Reduce-scatter bus bandwidth ((n-1)/n x M / t) with torch.distributed.")
    make("alltoall", "alltoall", "All-to-all bus bandwidth ((n-1)/n x M / t) with torch.distributed.")
