"""The accelerator's own rates: a square matmul's FLOP/s (numpy, torch on CPU and GPU) and host-to-device
bytes/s (torch on a GPU)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

from trainplan.errors import UserError
from trainplan.measure.host import ProbeSkipped, require_torch


@dataclass(frozen=True)
class MatmulResult:
    library: str  # numpy | torch
    device: str  # cpu | cuda:0 ...
    dtype: str
    n: int
    threads: int | None
    repeats: int
    seconds: float
    flops_per_second: float  # achieved: 2 n^3 per product, per wall second
    cpu_seconds: float
    flops_per_cpu_second: float | None  # per CPU-second of this process (CPU devices only); robust to
    # time-slicing by other work, and per core when threads == 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _repeat_until(fn: Callable[[], Any], min_seconds: float, sync: Callable[[], None] = lambda: None,
                  max_repeats: int = 10_000) -> tuple[int, float, float]:
    fn()  # warm-up: first call pays allocation, thread-pool start, kernel selection
    sync()
    repeats, started, cpu0 = 0, time.perf_counter(), time.process_time()
    while True:
        fn()
        repeats += 1
        # on a GPU the launches queue ahead; the final sync makes the elapsed time honest
        if repeats >= max_repeats or time.perf_counter() - started >= min_seconds:
            break
    sync()
    return repeats, time.perf_counter() - started, time.process_time() - cpu0


def matmul_numpy(n: int = 1024, dtype: str = "float32", min_seconds: float = 0.5) -> MatmulResult:
    """Achieved FLOP/s of numpy's matmul (its BLAS, with however many threads it uses)."""
    if n < 1:
        raise UserError("n", f"expected a positive matrix size, got {n}")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(dtype)
    b = rng.standard_normal((n, n)).astype(dtype)
    out = np.empty((n, n), dtype=dtype)
    repeats, seconds, cpu = _repeat_until(lambda: np.matmul(a, b, out=out), min_seconds)
    flops = 2 * n**3 * repeats
    return MatmulResult("numpy", "cpu", dtype, n, _blas_threads(), repeats, seconds, flops / seconds, cpu,
                        flops / cpu if cpu > 0 else None)


def _blas_threads() -> int | None:
    try:
        from threadpoolctl import threadpool_info  # type: ignore[import-not-found]

        for pool in threadpool_info():
            if pool.get("user_api") == "blas":
                return int(pool["num_threads"])
    except Exception:  # noqa: BLE001 - threadpoolctl is optional and best effort
        return None
    return None


def matmul_torch(n: int = 1024, dtype: str = "float32", device: str = "cpu", threads: int | None = None,
                 min_seconds: float = 0.5) -> MatmulResult:
    """Achieved FLOP/s of torch.matmul on `device` (cpu or cuda), timed with device sync on a GPU."""
    torch = require_torch("matmul (torch)")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ProbeSkipped("matmul (torch, GPU): no CUDA device is visible to torch")
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        dt = getattr(torch, dtype)
        gen = torch.Generator(device="cpu").manual_seed(0)
        a = torch.randn(n, n, generator=gen).to(device=device, dtype=dt)
        b = torch.randn(n, n, generator=gen).to(device=device, dtype=dt)
        out = torch.empty(n, n, device=device, dtype=dt)
        sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
        with torch.no_grad():
            repeats, seconds, cpu = _repeat_until(lambda: torch.matmul(a, b, out=out), min_seconds, sync)
        used_threads = torch.get_num_threads() if device == "cpu" else None
    finally:
        torch.set_num_threads(previous)
    flops = 2 * n**3 * repeats
    per_cpu = flops / cpu if device == "cpu" and cpu > 0 else None
    return MatmulResult("torch", device, dtype, n, used_threads, repeats, seconds, flops / seconds, cpu, per_cpu)


def matmul(n: int = 1024, min_seconds: float = 0.5, gpu_n: int = 8192) -> tuple[list[MatmulResult], list[str]]:
    """numpy, torch CPU, torch GPU (bf16) when present: (results, reasons for those skipped)."""
    results = [matmul_numpy(n, min_seconds=min_seconds)]
    skipped: list[str] = []
    try:
        results.append(matmul_torch(n, "float32", "cpu", min_seconds=min_seconds))
        results.append(matmul_torch(n, "float32", "cpu", threads=1, min_seconds=min_seconds))
        results.append(matmul_torch(gpu_n, "bfloat16", "cuda", min_seconds=min_seconds))
    except ProbeSkipped as why:
        skipped.append(str(why))
    return results, skipped




# ---------------------------------------------------------------- transfer


@dataclass(frozen=True)
class TransferResult:
    device: str
    bytes: int
    pinned_bytes_per_second: float
    pageable_bytes_per_second: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def transfer(size: int = 256 * 2**20, repeats: int = 10) -> TransferResult:
    """Host-to-device bytes/s with torch on a GPU, timed with CUDA events, pinned and pageable."""
    torch = require_torch("transfer")
    if not torch.cuda.is_available():
        raise ProbeSkipped("transfer: no CUDA device is visible to torch; host-to-device needs a GPU")
    dev = torch.device("cuda", 0)
    dst = torch.empty(size, dtype=torch.uint8, device=dev)
    rates = []
    for pinned in (True, False):
        src = torch.empty(size, dtype=torch.uint8, pin_memory=pinned)
        dst.copy_(src, non_blocking=pinned)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            dst.copy_(src, non_blocking=pinned)
        end.record()
        end.synchronize()
        rates.append(size * repeats / (start.elapsed_time(end) / 1e3))
    return TransferResult(str(dev), size, rates[0], rates[1])
