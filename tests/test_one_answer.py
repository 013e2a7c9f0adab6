"""One job, one answer (issue 22): every section and format of a report states the same memory per
device, step, tokens per step and wall time, for the repository's examples and for layouts of our own;
sweep and solve under a layout; the MFU convention; a network-bound step in the wall time."""

from __future__ import annotations

import json
import math

import pytest

from trainplan.planning import solve, sweep
from trainplan.planning.evaluate import build_report
from trainplan.present.html import render_html
from trainplan.units import format_figure
from trainplan.present.render import to_markdown
from trainplan.present.summary import first_screen
from trainplan.workload.load import load_workload

from conftest import EXAMPLES

CASES = [
    (str(EXAMPLES / "llama3-70b-512gpu.toml"), []),
    (str(EXAMPLES / "finetune-1b.toml"), []),
    (str(EXAMPLES / "llama2-7b-pretrain.toml"), []),
    (None, []),
    # layouts of our own: GPT-3 175 B shape on 1,024 A100s, TP 8 x PP 16; a 13 B on 64 H100s, TP 2, ZeRO-3
    (None, ["model.layers=96", "model.width=12288", "model.heads=96", "model.vocab=51200", 'model.family="llama"',
            "model.ffn_width=49152", "training.seq_len=2048", "training.micro_batch=1", "training.grad_accum=96",
            "cluster.accelerator=a100-sxm-80gb", "cluster.count=1024", "parallel.tensor=8", "parallel.pipeline=16",
            "parallel.sequence=true", "training.recompute=selective", "data.kind=tokens", "training.tokens=3e11"]),
    (None, ["model.layers=40", "model.width=5120", "model.heads=40", "model.vocab=32000", 'model.family="llama"',
            "model.ffn_width=13824", "training.seq_len=4096", "training.micro_batch=2", "training.grad_accum=4",
            "cluster.count=64", "parallel.tensor=2", "training.zero=3", "data.kind=tokens", "training.tokens=1e11"]),
]


def _report(file, sets):  # noqa: ANN001, ANN202
    return build_report(load_workload(file, sets))


@pytest.mark.parametrize("file,sets", CASES)
def test_every_section_states_the_same_job(file, sets):
    r = _report(file, sets)
    m, c, par = r["memory"], r["compute"], r["parallel"]
    # memory: the table, the parallel section and the verdict agree
    assert m["per_device_bytes"] == par["memory"]["per_device_bytes"]
    assert m["fits"] == par["memory"]["fits"]
    assert m["activation_bytes"] == par["memory"]["activation_bytes"]
    # the step and tokens per step: micro-batch x sequence x micro-batches x data-parallel degree
    lay = par["layout"]
    a = r["assumptions"]
    tokens = lay["micro_batch"] * a["training.seq_len"]["value"] * lay["micro_batches"] * lay["data"]
    assert c["tokens_per_step"] == tokens == par["tokens_per_step"]
    assert lay["data"] * lay["tensor"] * lay["pipeline"] * lay["context"] == a["cluster.count"]["value"]
    assert c["seconds_per_step"] == par["time"]["step_seconds"]
    assert c["steps"] == math.ceil(r["workload"]["tokens"] / tokens)
    assert c["seconds"] == pytest.approx(r["workload"]["tokens"] / tokens * c["seconds_per_step"], rel=1e-12)
    # the wall time: the steps stretched by the pipeline, plus blocking saves
    assert c["wall_seconds"] == pytest.approx(c["seconds"] / r["pipeline"]["busy"] * (1 + r["storage"]["save_share"]),
                                              rel=1e-9)
    # every format says the same: the first screen, markdown, HTML and JSON carry the same lines
    per = format_figure(m["per_device_bytes"], "bytes")
    answer = r["answer"]
    assert per in answer["fits"] and answer["fits"].startswith("yes" if m["fits"] else "NO")
    screen = " ".join(" ".join(first_screen(r)).split())
    md = to_markdown(r)
    html = render_html(r)
    for text in answer.values():
        assert " ".join(text.split()) in screen
        assert text in md
        assert text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in html
    assert json.loads(json.dumps(r))["answer"] == answer
    if not m["fits"]:
        assert f"{m['per_device_bytes'] / 1e9:.1f} GB per device" in r["verdict"]
    else:
        assert "does not fit" not in r["verdict"]


def test_the_70b_example_fits_under_its_layout_everywhere():
    r = _report(str(EXAMPLES / "llama3-70b-512gpu.toml"), [])
    assert r["memory"]["fits"] is True
    # 15e12 tokens / (1 x 8192 x 16 x 16 data-parallel ranks) = 7,152,557.4 steps
    assert r["compute"]["tokens_per_step"] == 8192 * 16 * 16
    assert r["compute"]["steps"] == math.ceil(15e12 / (8192 * 16 * 16))
    assert r["compute"]["time_follows"] == "predicted"
    # the predicted step carries the band measured out of sample on published runs, in words and in JSON
    from trainplan.planning.validation import measured_error_band

    band = measured_error_band("h100-sxm")  # the example's accelerator: its own runs' band
    assert r["compute"]["step_error_band"] == pytest.approx(band["band"], abs=0.005)
    assert " ".join(f"± {band['band'] * 100:.0f} %, validated on {band['runs']} published runs on this "
                    "accelerator".split()) in " ".join(r["answer"]["time"].split())
    # a step at a given MFU carries none
    assert "step_error_band" not in _report(str(EXAMPLES / "finetune-1b.toml"), [])["compute"]


def test_mfu_counts_model_flops_whatever_the_recomputation():
    # at a given MFU, the step is model FLOPs / (n x peak x MFU): full recomputation adds executed
    # FLOPs (8/6 of the matmuls) but not time; with HFU given it does, by executed / model
    base = ["model.layers=32", "model.width=4096", "model.heads=32", "model.vocab=32000", 'model.family="llama"',
            "model.ffn_width=11008", "training.seq_len=4096", "training.micro_batch=1", "data.kind=tokens",
            "training.tokens=1e10", "cluster.mfu=0.4"]
    steps = {rc: _report(None, base + [f"training.recompute={rc}"])["compute"] for rc in ("none", "selective", "full")}
    assert steps["none"]["seconds_per_step"] == pytest.approx(steps["full"]["seconds_per_step"], rel=1e-12)
    assert steps["none"]["seconds_per_step"] == pytest.approx(steps["selective"]["seconds_per_step"], rel=1e-12)
    full = steps["full"]
    # 989.5e12 bf16 peak of the H100: step = 4096 tokens x model FLOPs per token / (peak x 0.4)
    assert full["seconds_per_step"] == pytest.approx(4096 * full["flops_per_token_model"] / (989.5e12 * 0.4))
    assert full["flops_per_token_executed"] > full["flops_per_token_model"]


def test_attention_flops_by_shape_with_or_without_a_config(tmp_path):
    # the same Llama shape given by its keys and by a config.json: the same model FLOPs per token,
    # 6 N + 12 L d_attn S with attention counted (L 4, d_attn 512, S 2048)
    config = {"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
              "num_key_value_heads": 2, "intermediate_size": 1408, "vocab_size": 32000, "tie_word_embeddings": False}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "w.toml").write_text('[model]\nhf_config = "config.json"\n[training]\ntokens = "1e9"\nseq_len = 2048\n'
                                     '[data]\nkind = "tokens"\n')
    by_config = build_report(load_workload(tmp_path / "w.toml", []))["compute"]
    by_shape = _report(None, ["model.layers=4", "model.width=512", "model.heads=8", "model.kv_heads=2",
                              "model.ffn_width=1408", "model.vocab=32000", 'model.family="llama"',
                              "model.tied=false", "data.kind=tokens", "training.tokens=1e9",
                              "training.seq_len=2048"])["compute"]
    assert by_shape["flops_per_token_model"] == pytest.approx(by_config["flops_per_token_model"], rel=1e-12)
    # by hand: N = 4 x (q 512^2 + k, v 2 x 512 x 128 + o 512^2 + 3 x 512 x 1408) + head 32000 x 512
    n = 4 * (2 * 512 * 512 + 2 * 512 * 128 + 3 * 512 * 1408) + 32000 * 512
    assert by_shape["flops_per_token_model"] == pytest.approx(6 * n + 12 * 4 * 512 * 2048)


def test_a_network_bound_job_shows_it_in_time_and_cost():
    slow = _report(str(EXAMPLES / "finetune-1b.toml"), ["cluster.interconnect=1 GB/s"])
    fast = _report(str(EXAMPLES / "finetune-1b.toml"), [])
    assert slow["network"]["verdict"] == "bound" and "Network" not in fast["answer"]
    ratio = slow["compute"]["seconds_per_step"] / fast["compute"]["seconds_per_step"]
    assert slow["compute"]["wall_seconds"] / fast["compute"]["wall_seconds"] == pytest.approx(ratio, rel=1e-9)
    assert slow["training_cost"]["budget"] / fast["training_cost"]["budget"] == pytest.approx(ratio, rel=1e-9)
    assert "exposed" in slow["answer"]["network"]


def test_sweep_and_solve_under_a_layout():
    file = str(EXAMPLES / "llama3-70b-512gpu.toml")
    result = sweep.sweep(file, [], ["parallel.tensor=1,2,4,8"], figures=["memory.per_device_bytes", "memory.fits"])
    rows = list(sweep.rows(result))
    # tensor 1 breaks the example's sequence parallelism: a row without a plan that says why
    assert math.isnan(rows[0]["memory.per_device_bytes"]) and "parallel.sequence" in rows[0]["no_plan"]
    for row in rows[1:]:
        plan = _report(file, [f"parallel.tensor={row['parallel.tensor']}"])["memory"]
        assert row["memory.per_device_bytes"] == pytest.approx(plan["per_device_bytes"], rel=1e-12)
        assert bool(row["memory.fits"]) == plan["fits"] and row["no_plan"] == ""
    # the fewest devices on which TP 8 x PP 4 fits: a multiple of 32, planned point by point
    found = solve.solve(file, [], "cluster.count", ["memory.fits==true"])
    n = found["value"]
    assert n % 32 == 0
    assert _report(file, [f"cluster.count={n}"])["memory"]["fits"]
    if n > 32:
        assert not _report(file, [f"cluster.count={n - 32}"])["memory"]["fits"]


def test_a_default_micro_batch_is_chosen_to_fit_and_said():
    sets = ["model.layers=32", "model.width=4096", "model.heads=32", "model.kv_heads=8", "model.vocab=128256",
            'model.family="llama"', "model.ffn_width=14336", "training.seq_len=4096", "cluster.count=8",
            "training.zero=3", "data.kind=tokens", "training.tokens=1e10"]
    r = _report(None, sets)
    a = r["assumptions"]
    assert a["training.micro_batch"]["provenance"] == "derived" and "that fits" in a["training.micro_batch"]["source"]
    b, accum = a["training.micro_batch"]["value"], a["training.grad_accum"]["value"]
    assert b < 8
    assert b * accum == 8  # the default 8 sequences a rank a step, kept
    assert r["memory"]["fits"]
    # the next larger micro-batch does not fit
    bigger = _report(None, sets + [f"training.micro_batch={2 * b}"])
    assert not bigger["memory"]["fits"]


def test_when_it_does_not_fit_the_cheapest_change_is_named():
    sets = ["model.layers=32", "model.width=4096", "model.heads=32", "model.kv_heads=8", "model.vocab=128256",
            'model.family="llama"', "model.ffn_width=14336", "training.seq_len=16384", "training.micro_batch=1",
            "cluster.count=8", "data.kind=tokens", "training.tokens=1e10"]
    r = _report(None, sets)
    assert not r["memory"]["fits"]
    fit = r["fit"]
    assert fit["change"] and fit["per_device_bytes"] <= fit["device_memory"]
    assert fit["change"] in r["answer"]["fits"] and "no number of devices" not in r["answer"]["fits"]
    # the change, planned as a workload of its own, fits with the memory the search said
    row = fit["layout"]
    changed = sets + [f"parallel.{k}={row[k]}" for k in ("tensor", "pipeline", "context", "expert", "interleave")] + [
        f"parallel.sequence={'true' if row['sequence'] else 'false'}", f"training.micro_batch={row['micro_batch']}",
        f"training.grad_accum={row['micro_batches']}", f"training.recompute={row['recompute']}",
        f"training.zero={row['zero']}", f"parallel.schedule={row['schedule']}", f"cluster.count={fit['devices']}"]
    again = _report(None, changed)["memory"]
    assert again["fits"] and again["per_device_bytes"] == pytest.approx(fit["per_device_bytes"], rel=1e-9)
