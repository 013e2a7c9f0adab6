"""Full-grid Chinchilla fit (Approach 3 as replicated by Besiroglu et al. 2024).

Fits L(N, D) = E + A/N^alpha + B/D^beta to the packaged Chinchilla runs (trainplan/catalogue/chinchilla_runs.csv) from the
replication's 4,500 starting points, prints the constants, the bootstrap standard errors and
the seconds each stage took, and checks them against the replication's published fit
(E = 1.82, A = 482.0, B = 2085.4, alpha = 0.3478, beta = 0.3658) with generous bounds.

    .venv/bin/python benchmarks/bench_scaling_fit.py [RUNS.csv] [--resamples N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib import resources
from pathlib import Path

from trainplan.accounts import scaling

# The Chinchilla runs ship inside the package (source: src/trainplan/catalogue/chinchilla_runs.md).
DEFAULT_RUNS = Path(str(resources.files("trainplan.catalogue").joinpath("chinchilla_runs.csv")))

# Generous bounds: the data are points read off a figure, and the fit ridge is flat along A-alpha.
BOUNDS = {"E": (1.75, 1.90), "A": (350.0, 650.0), "B": (1200.0, 3500.0), "alpha": (0.32, 0.37), "beta": (0.34, 0.39)}
SECONDS_LIMIT = 900.0  # the full grid takes ~1-3 min on a shared 2-core machine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="?", default=str(DEFAULT_RUNS))
    parser.add_argument("--resamples", type=int, default=scaling.BOOTSTRAP_RESAMPLES)
    args = parser.parse_args(argv)

    if not Path(args.runs).is_file():
        print(f"skipped: no runs file at {args.runs} (the packaged Chinchilla runs)")
        return 0
    runs = scaling.read_runs(args.runs)
    t0 = time.perf_counter()
    fit = scaling.fit_scaling_law(runs, grid=scaling.REPLICATION_GRID)
    fit_seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    boot = scaling.bootstrap_scaling_law(runs, fit, resamples=args.resamples)
    boot_seconds = time.perf_counter() - t1

    summary = scaling.fit_summary(boot)
    grid = fit.grid_law
    assert grid is not None
    summary.update({
        "fit_seconds": round(fit_seconds, 2),
        "bootstrap_seconds": round(boot_seconds, 2),
        "grid_pass": {**grid.as_dict(), "objective": fit.grid_objective},
        "published": scaling.EPOCH_REPLICATION.as_dict(),
    })
    print(json.dumps(summary, indent=2))
    law = fit.law
    print(f"\nE={law.E:.4f}±{boot.standard_errors['E_se']:.3f}  A={law.A:.1f}±{boot.standard_errors['A_se']:.0f}  "
          f"B={law.B:.1f}±{boot.standard_errors['B_se']:.0f}  alpha={law.alpha:.4f}±{boot.standard_errors['alpha_se']:.4f}  "
          f"beta={law.beta:.4f}±{boot.standard_errors['beta_se']:.4f}")
    print(f"{fit.starts} starts ({fit.converged} converged) in {fit_seconds:.1f} s; "
          f"{boot.resamples} bootstrap refits in {boot_seconds:.1f} s")

    failures = [f"{k}={getattr(law, k):.4g} outside {lo}..{hi}" for k, (lo, hi) in BOUNDS.items()
                if not lo <= getattr(law, k) <= hi]
    if fit_seconds > SECONDS_LIMIT:
        failures.append(f"fit took {fit_seconds:.0f} s > {SECONDS_LIMIT:.0f} s")
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
