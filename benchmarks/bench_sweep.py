"""A sweep of a million configurations (issue 7: "well under a minute"); prints seconds.

Run: .venv/bin/python benchmarks/bench_sweep.py   (with CI=true it asserts a generous bound)
"""

from __future__ import annotations

import os
import time

from trainplan.planning import sweep

# 1,000 core counts x 1,000 micro-batches on the default workload = 1e6 points
VARIES = ["cluster.cores=1:1000", "training.micro_batch=1:1000"]
BOUND_SECONDS = 60.0


def main() -> None:
    start = time.perf_counter()
    result = sweep.sweep(None, [], VARIES, progress=False)
    evaluated = time.perf_counter() - start
    csv_bytes = sweep.to_csv(sweep.SweepResult(result.keys, {k: result.columns[k] for k in
                                                             result.keys + ["pipeline.busy", "memory.fits",
                                                                            "compute.wall_seconds", "bill.total"]}))
    total = time.perf_counter() - start
    print(f"sweep of {len(result):,} configurations x {len(result.columns)} columns: {evaluated:.2f} s evaluated, "
          f"{total:.2f} s with a 6-column CSV ({len(csv_bytes) / 1e6:.0f} MB)")
    assert len(result) == 1_000_000
    if os.environ.get("CI") == "true":
        assert total < BOUND_SECONDS, f"{total:.1f} s for a million configurations; expected under {BOUND_SECONDS} s"


if __name__ == "__main__":
    main()
