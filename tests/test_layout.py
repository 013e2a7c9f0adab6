"""`trainplan layout`: the search over layouts, vectorised over the candidate grid."""

import json

import numpy as np
import pytest

from trainplan.accounts import parallel
from trainplan.planning.evaluate import resolve_model
from trainplan.planning.layout import candidate_grid, search
from trainplan.planning.validation import gpt_shape
from trainplan.workload.schema import load_workload

SETS = ["model.layers=32", "model.width=4096", "model.heads=32", "model.vocab=32000", "training.seq_len=2048",
        "training.micro_batch=1", "training.grad_accum=16", "cluster.count=64", "cluster.accelerator=a100-sxm-80gb",
        "data.kind=tokens", "training.tokens=1e11"]


def test_every_candidate_is_a_valid_layout():
    shape = gpt_shape(4096, 32, 32, 32000, 2048)
    g = candidate_grid(shape, 64, 1024)
    assert len(g) > 100
    # the rules, checked by hand on every row
    assert np.all(g.tensor * g.pipeline * g.context * g.data == 64)
    assert np.all(g.micro_batch * g.micro_batches * g.data == 1024)
    assert np.all(32 % g.tensor == 0)
    assert np.all(32 % (g.pipeline * g.interleave) == 0)
    assert np.all(~g.sequence | (g.tensor > 1))
    assert np.all((g.interleave == 1) | (g.micro_batches % g.pipeline == 0))


def test_search_lists_the_fastest_that_fit():
    w = load_workload(None, SETS)
    out = search(w, resolve_model(w), top=5)
    rows = out["layouts"]
    assert len(rows) == 5 and out["global_batch"] == 16 * 64
    steps = [r["step_seconds"] for r in rows]
    assert steps == sorted(steps)
    for r in rows:
        assert r["fits"] and r["per_device_bytes"] <= out["device_memory"]
        assert r["tensor"] * r["pipeline"] * r["context"] * r["data"] == 64


def test_grid_result_equals_the_single_layout():
    # the vectorised evaluation and a one-layout call agree (vectorisation check)
    w = load_workload(None, SETS)
    best = search(w, resolve_model(w), top=1)["layouts"][0]
    # the same layout planned as a workload of its own, through the plan's execution model
    from trainplan.planning.inputs import PlanInputs

    sets = SETS + [f"parallel.{k}={best[k]}" for k in ("tensor", "pipeline", "interleave", "context", "expert")] + [
        f"parallel.sequence={'true' if best['sequence'] else 'false'}", f"training.micro_batch={best['micro_batch']}",
        f"training.grad_accum={best['micro_batches']}", f"training.recompute={best['recompute']}",
        f"training.zero={best['zero']}", f"parallel.schedule={best['schedule']}"]
    one = PlanInputs.of(load_workload(None, sets)).execution
    assert float(one.step_seconds) == pytest.approx(best["step_seconds"])


def test_flash_attention_drops_selective_duplicates():
    # with flash attention no scores are kept, so selective recomputation is the same layout as none
    w = load_workload(None, SETS)
    flash = search(w, resolve_model(w), top=50)
    assert w.parallel.flash_attention and all(r["recompute"] != "selective" for r in flash["layouts"])
    w = load_workload(None, SETS + ["parallel.flash_attention=false"])
    stored = search(w, resolve_model(w), top=1)
    assert flash["candidates"] * 3 == stored["candidates"] * 2  # one of the three recompute choices dropped


def test_layout_cli_json(cli):
    args = [a for s in SETS for a in ("--set", s)]
    res = cli("layout", *args, "--top", "3", "-f", "json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert len(out["layouts"]) == 3
    table = cli("layout", *args, "--top", "3")
    assert table.returncode == 0 and "TP" in table.stdout


def test_layout_without_a_shape_exit_2(cli):
    res = cli("layout", "--set", "model.params=7e9", "-f", "json")
    assert res.returncode == 2
    assert res.stderr.strip().startswith("trainplan: model.layers: a shape")
