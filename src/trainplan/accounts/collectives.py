"""Cost of one collective on one network tier (issue 13): an alpha-beta model in NCCL's terms.

NCCL's performance notes define, for a collective of message size M that takes t seconds,
the algorithm bandwidth algbw = M / t and the bus bandwidth busbw = algbw x factor, where
the factor makes busbw comparable with the link's own rate whatever the number n of ranks:

    all-reduce                    2 (n-1) / n
    all-gather, reduce-scatter      (n-1) / n     (M = the whole gathered buffer)
    all-to-all                      (n-1) / n     (M = what one rank holds before the exchange)
    broadcast, reduce, send         1

So a collective on a tier of bus bandwidth W costs   t = M x factor / W + steps x latency,
where `steps` is the number of sequential hops of the algorithm:

    ring all-reduce     2 (n-1)       (reduce-scatter, then all-gather, round the ring)
    ring all-gather,
    reduce-scatter      n-1
    tree all-reduce     2 ceil(log2 n) (up a binary tree and back down; NCCL's double binary
                                        tree keeps the full bandwidth, so only the latency differs)
    all-to-all          n-1           (pairwise exchanges)
    send                1

Everything works on numpy arrays (the layout search evaluates a grid at once).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from trainplan.errors import UserError

Op = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send"]
Algorithm = Literal["ring", "tree"]

OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send")
ALGORITHMS: tuple[str, ...] = ("ring", "tree")


def _check(op: str, algorithm: str) -> None:
    if op not in OPS:
        raise UserError("op", f"expected one of {', '.join(OPS)}, got {op!r}")
    if algorithm not in ALGORITHMS:
        raise UserError("algorithm", f"expected one of {', '.join(ALGORITHMS)}, got {algorithm!r}")


def bus_factor(op: str, ranks: Any) -> Any:
    """NCCL's bus-bandwidth factor busbw / algbw of `op` over `ranks` ranks (0 for one rank)."""
    _check(op, "ring")
    n = np.asarray(ranks, dtype=np.float64)
    if op == "all_reduce":
        return 2.0 * (n - 1.0) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1.0) / n
    return np.where(n > 1, 1.0, 0.0)


def algorithm_steps(op: str, ranks: Any, algorithm: str = "ring") -> Any:
    """Sequential hops of the algorithm: each pays the tier's latency once."""
    _check(op, algorithm)
    n = np.asarray(ranks, dtype=np.float64)
    if op == "all_reduce":
        if algorithm == "tree":
            return np.where(n > 1, 2.0 * np.ceil(np.log2(np.maximum(n, 1.0))), 0.0)
        return 2.0 * (n - 1.0)
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        if algorithm == "tree":
            return np.where(n > 1, np.ceil(np.log2(np.maximum(n, 1.0))), 0.0)
        return n - 1.0
    return np.where(n > 1, 1.0, 0.0)


def bus_bytes(op: str, message_bytes: Any, ranks: Any) -> Any:
    """Bytes each rank moves over its link: M x bus factor."""
    return np.asarray(message_bytes, dtype=np.float64) * bus_factor(op, ranks)


def collective_seconds(op: str, message_bytes: Any, ranks: Any, bus_bandwidth: Any, latency: Any = 0.0,
                       algorithm: str = "ring") -> Any:
    """t = M x factor / W + steps x latency; zero on one rank."""
    n = np.asarray(ranks, dtype=np.float64)
    t = bus_bytes(op, message_bytes, n) / bus_bandwidth + algorithm_steps(op, n, algorithm) * latency
    return np.where(n > 1, t, 0.0)


def bus_bandwidth_of(op: str, message_bytes: float, ranks: int, seconds: float) -> float:
    """What a measured collective says about the link: busbw = M / t x factor (NCCL's definition)."""
    return float(message_bytes / seconds * bus_factor(op, ranks))
