"""Speed of the full pass on a 2-worker Dask local cluster against the one-process pass (issue 26).

    .venv/bin/python benchmarks/bench_distributed.py        # TRAINPLAN_BENCH_CLIPS=N to change the 10,000

N small clips (96x64 H.264, 24 frames at 24 fps, a keyframe every 12; encoded here with libx264,
20 distinct clips written N/20 times each under distinct names) in a local folder. The one-process
pass is `data inspect` without --full (shards.inspect_units); the cluster pass is
`distributed.full_pass` on `distributed.local_cluster(2)` (two single-threaded workers) started before the clock,
in tasks of `distributed.auto_batch` clips (250 here, as `--full` without `--batch` chooses), after a warm-up pass of 4 clips (the workers' imports). The two passes run in turn,
twice each, after the clips are written back to disk (os.sync), and each side's fastest round is
compared (a burst of other load then has to hit both rounds of one side to move the ratio). Both must
give the same figures (checked). Target: the cluster at least 1.6x the
one-process pass on a machine with two free cores for the workers. CI=true: the CI machine has two
cores in all, which also run the scheduler, the client and this script, so the ratio is printed for
the record and only the figures are checked (docs/data-where-it-lives.md gives the figures measured here). Prints one JSON object; exits 1 when the figures differ
or, outside CI, the target is missed.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from trainplan.measure import probe, shards  # noqa: E402

TARGET = 1.6
ROUNDS = 2  # each pass runs this many times, alternating; each side's fastest round is compared


def main() -> int:
    from trainplan.measure import distributed

    n = int(os.environ.get("TRAINPLAN_BENCH_CLIPS", "10000"))
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        clips = [probe.synthesize_clip(probe.ClipFormat(96, 64, 24.0, 100e3, 12), 24, seed=s).data for s in range(20)]
        for i in range(n):
            (folder / f"clip{i:06d}.mp4").write_bytes(clips[i % 20])
        os.sync()  # the clips written back before any clock: the kernel's writeback is not either pass's cost
        units = shards.units([folder])
        one_times, full_times = [], []
        for _ in range(ROUNDS):  # in turn, so a passing burst of load on the machine falls on both
            t = time.perf_counter()
            one = shards.inspect_units(units, where=str(folder))
            one_times.append(time.perf_counter() - t)
            # a cluster for each round, started after the one-process pass: its scheduler's event loop lives in
            # this process, and alive beside the one-process pass it slowed that pass by 30 % here
            cluster = distributed.local_cluster(2)
            try:  # warm-up: each worker imports the inspection (PyAV, numpy) before the clock
                distributed.full_pass(units[:4], where=str(folder), scheduler=cluster.scheduler_address)
                t = time.perf_counter()
                full = distributed.full_pass(units, where=str(folder), scheduler=cluster.scheduler_address)
                full_times.append(time.perf_counter() - t)
                from dask.distributed import Client

                with Client(cluster) as client:  # each worker's resident memory after the pass (the bound stated)
                    rss = client.run(lambda: __import__("psutil").Process().memory_info().rss)
            finally:
                cluster.close()
    same = full["aggregate"] == one["aggregate"] and full["files"] == one["files"]
    one_s, full_s = min(one_times), min(full_times)  # each pass's best round: the least disturbed
    ratio = one_s / full_s
    bound = None if os.environ.get("CI") else TARGET
    print(json.dumps({"clips": n, "one_process_seconds": round(one_s, 2), "cluster_2_workers_seconds": round(full_s, 2),
                      "speedup": round(ratio, 3), "bound": bound,
                      "rounds": {"one_process": [round(x, 2) for x in one_times],
                                 "cluster": [round(x, 2) for x in full_times]},
                      "worker_peak_rss_mb": round(max(rss.values()) / 2**20, 1), "same_figures": same, "cpus": os.cpu_count()}))
    return 0 if same and (bound is None or ratio >= bound) else 1


if __name__ == "__main__":
    sys.exit(main())
