"""Speed of the layout search (issue 13): the candidate grid in one vectorised call against
the same candidates one call each, side by side in one process (a ratio, so a loaded
machine moves both).

    .venv/bin/python benchmarks/bench_layout.py [--devices 512] [--sample 400]

The model is a 70 B Llama shape (80 layers, width 8192, 64 heads, 8 KV heads) on H100s at
a global batch of 512 sequences of 4,096 tokens. The per-candidate loop runs on a sample of
the grid and is scaled to the whole grid. Target: the vectorised search at least 20x the
per-candidate loop per candidate (CI=true: 10x). Prints one JSON object; exits 1 when a
bound is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from trainplan.accounts import parallel  # noqa: E402
from trainplan.planning.evaluate import resolve_model  # noqa: E402
from trainplan.planning.layout import RECOMPUTE_CHOICES, candidate_grid, hardware, model_shape  # noqa: E402
from trainplan.workload.load import load_workload  # noqa: E402

SETS = ["model.layers=80", "model.width=8192", "model.heads=64", "model.kv_heads=8", "model.vocab=128256",
        "model.family=llama", "model.ffn_width=28672", "model.tied=false", "training.seq_len=4096",
        "training.micro_batch=1", "training.grad_accum=32", "data.kind=tokens", "training.tokens=1e12",
        "cluster.accelerator=h100-sxm"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", type=int, default=512)
    ap.add_argument("--sample", type=int, default=400)
    args = ap.parse_args()
    w = load_workload(None, SETS + [f"cluster.count={args.devices}"])
    shape, hw = model_shape(w, resolve_model(w)), hardware(w)
    grid = candidate_grid(shape, args.devices, 512)
    codes = np.array([parallel.RECOMPUTE_CODES[r] for r in RECOMPUTE_CHOICES])[grid.recompute]
    # the arguments the plan's execution model passes (planning/execution.py)
    from trainplan.catalogue.dtypes import state_bytes_per_param
    from trainplan.planning import execution
    from trainplan.planning.inputs import PlanInputs

    model = resolve_model(w)
    activations, _ = execution.layer_activations(w, model, PlanInputs.of(w).terms)
    state = state_bytes_per_param(w.training.precision, w.training.optimizer)
    kw = dict(activation_bytes_per_value=2.0, attention=execution.attention_kind(w), activations=activations,
              state_of=execution.state_function(w, model, execution.recipe_of(w)[0]), weight_bytes=state.weights,
              grad_bytes=state.grads, **execution.framework_kwargs(w))

    def vectorised() -> None:
        parallel.parallel_account(shape, hw, tensor=grid.tensor, pipeline=grid.pipeline, interleave=grid.interleave,
                                  context=grid.context, expert=grid.expert, data=grid.data,
                                  sequence_parallel=grid.sequence, micro_batch=grid.micro_batch,
                                  micro_batches=grid.micro_batches, recompute=codes, zero=grid.zero, **kw)

    sample = np.random.default_rng(0).choice(len(grid), size=min(args.sample, len(grid)), replace=False)

    def looped() -> None:
        for i in sample:
            parallel.parallel_account(shape, hw, tensor=int(grid.tensor[i]), pipeline=int(grid.pipeline[i]),
                                      interleave=int(grid.interleave[i]), context=int(grid.context[i]),
                                      expert=int(grid.expert[i]), data=int(grid.data[i]),
                                      sequence_parallel=bool(grid.sequence[i]), micro_batch=int(grid.micro_batch[i]),
                                      micro_batches=int(grid.micro_batches[i]), recompute=int(codes[i]),
                                      zero=int(grid.zero[i]), **kw)

    def best(fn) -> float:  # noqa: ANN001
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    t_vec = best(vectorised)
    t_loop = best(looped)
    per_vec = t_vec / len(grid)
    per_loop = t_loop / len(sample)
    ratio = per_loop / per_vec
    bound = 10.0 if os.environ.get("CI") else 20.0
    out = {"candidates": len(grid), "vectorised_seconds": t_vec, "loop_seconds_per_candidate": per_loop,
           "vectorised_seconds_per_candidate": per_vec, "speedup": ratio, "bound": bound, "ok": ratio >= bound}
    print(json.dumps(out, indent=2))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
