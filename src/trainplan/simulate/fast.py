"""The queue engine compiled (numba, the `fast` extra): the same recurrence, statistics in the same pass.

`trainplan.simulate.queue._recurrence` is the reference: plain Python, always there.
This module runs the very same max-plus recurrence (same float operations in the same
order, no fast-math, so no reassociation or fused multiply-add) over numpy arrays, with
a binary heap of (finish time, frame) pairs compared as Python compares tuples. Each
frame's times are therefore bit-identical to the reference's (tests/test_queue.py checks
every array on several workloads and variabilities).

Statistics are fused into the same loop: a frame's read, read-blocked, queue, decode,
decode-blocked and buffer intervals are all known the moment it leaves the decoder heap
(rank k), and they all end by its step start A_k. Steps are in rank order, so frames of
rank < k0 end before the window opens (t0 = A_k0) and contribute nothing; frames of rank
in [k0, k1) end before it closes (t1 = A_k1); frames of rank >= k1 are clipped to t1,
which is known by then. Each overlap is `min(max(end, t0), t1) - min(max(start, t0), t1)`
as in the reference, summed in rank order (the reference sums with numpy's pairwise
sum, so sums agree to rounding, not to the bit).

Only importable where numba is: `available()` says whether it is, without importing it.
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np

INSTALL_HINT = "pip install 'trainplan[fast]' (numba) for the compiled queue engine"

# Indexes into the `sums` array the kernel fills (time in seconds, summed over frames).
READ_BUSY, READ_BLOCKED, READ_QUEUE, BUFFER, READ_QUEUE_WAIT, DECODER_BLOCKED_WAIT, BUFFER_WAIT, \
    READ_SECONDS, WORK, T0, T1 = range(11)
N_SUMS = 11

# Below this many frames in one call, the pure-Python engine finishes before numba would be
# imported and its cached machine code loaded (~0.6 s here: 0.2 s to import numba, 0.4 s to load the cached code; against 0.7-1.5 µs a frame in
# Python): measured by benchmarks/bench_queue.py, which prints both.
WORTH_FRAMES = 500_000


def available() -> bool:
    """Whether numba is installed (checked without importing it)."""
    return importlib.util.find_spec("numba") is not None


_BROKEN: list[str] = []  # why numba, though installed, could not be loaded (once per process)


def worth_it(frames: int) -> bool:
    """Use the compiled engine: numba is installed and loads, and either is loaded already or the run is long."""
    if not available() or _BROKEN:
        return False
    if "trainplan.simulate._kernel" in sys.modules:
        return True
    if frames < WORTH_FRAMES:
        return False
    try:
        kernel()
    except ImportError as err:  # e.g. a numba too old for this numpy: fall back to the reference engine
        _BROKEN.append(str(err))
        return False
    return True


def kernel():  # -> the compiled function (imports numba)
    """The compiled kernel; raises ImportError where numba is missing or cannot load."""
    from trainplan.simulate._kernel import queue_kernel

    return queue_kernel


def run_arrays(
    reads: np.ndarray,
    read: np.ndarray,
    work: np.ndarray,
    dec: np.ndarray,
    group: np.ndarray,
    groups: int,
    step: float,
    buffer: int,
    read_ahead: int | None,
    no_decoder: bool,
    window: tuple[int, int] = (0, 0),
    fused: bool = False,
) -> tuple[np.ndarray, ...]:
    """One compiled run. Returns P, S, C, E, A by frame, order, who, sums, group busy, group blocked."""
    # one layout and dtype, so the kernel is compiled (and cached) once
    reads, read, work, dec = (np.ascontiguousarray(a, dtype=np.float64) for a in (reads, read, work, dec))
    group = np.ascontiguousarray(group, dtype=np.intp)
    n = work.shape[0]
    q = -1 if read_ahead is None else int(read_ahead)
    qq = max(q, 0)
    P = np.empty(n) if q >= 0 else reads
    S_ext = np.empty(qq + n)
    C = np.empty(n)
    E = np.empty(n)
    A_ext = np.empty(buffer + n)
    A_frame = np.empty(n)
    order = np.empty(n, np.intp)
    who = np.empty(n, np.intp)
    sums = np.zeros(N_SUMS)
    gbusy = np.zeros(max(groups, 1))
    gblocked = np.zeros(max(groups, 1))
    kernel()(reads, read, work, dec, group, float(step), int(buffer), q, bool(no_decoder),
             int(window[0]), int(window[1]), bool(fused),
             P, S_ext, C, E, A_ext, A_frame, order, who, sums, gbusy, gblocked)
    return P, S_ext[qq:], C, E, A_frame, order, who, sums, gbusy, gblocked
