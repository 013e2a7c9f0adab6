"""`trainplan layout`: the search over layouts, vectorised over the candidate grid."""

import json
import re

import numpy as np
import pytest

from trainplan.accounts import parallel
from trainplan.planning.evaluate import resolve_model
from trainplan.planning.layout import candidate_grid, search
from trainplan.planning.validation import gpt_shape
from trainplan.workload.load import load_workload

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
    # the layers (or the layers and the two embedding units) split into p x v chunks
    assert np.all((32 + 2 * g.embedding_stages) % (g.pipeline * g.interleave) == 0)
    assert np.all((g.embedding_stages == 0) | (g.pipeline > 1))
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
    """The JSON's layouts against what any layout of these 64 A100s must satisfy, by hand: degrees that
    multiply to the devices and keep the global batch (16 micro-batches of 1 on each of 64 / (t p) ranks),
    tokens per second = global batch x S / step, MFU = 6 N x tokens/s / (64 x 312 TFLOP/s) with N counted
    by hand, memory within the card, fastest first; and the table shows the same three in that order."""
    args = [a for s in SETS for a in ("--set", s)]
    res = cli("layout", *args, "--top", "3", "-f", "json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    layouts = out["layouts"]
    assert len(layouts) == 3 and out["devices"] == 64
    global_batch = 16 * 1 * 64  # grad_accum x micro_batch x data ranks of the plain data-parallel layout
    d, layers, vocab, seq = 4096, 32, 32000, 2048
    n = layers * 12 * d * d + vocab * d  # the textbook block (4 d^2 attention, 8 d^2 MLP) and the head
    attention = 12 * layers * d * seq  # 12 L d S a token
    steps = [x["step_seconds"] for x in layouts]
    assert steps == sorted(steps)
    for x in layouts:
        assert x["tensor"] * x["pipeline"] * x["context"] * x["data"] == 64
        assert x["micro_batch"] * x["micro_batches"] * x["data"] == global_batch == out["global_batch"]
        assert x["fits"] and x["per_device_bytes"] <= out["device_memory"] == 80 * 2**30
        assert x["tokens_per_second"] == pytest.approx(global_batch * seq / x["step_seconds"], rel=1e-9)
        assert x["mfu"] == pytest.approx((6 * n + attention) * x["tokens_per_second"] / (64 * 312e12), rel=1e-3)
    table = cli("layout", *args, "--top", "3")
    assert table.returncode == 0
    rows = [line.split() for line in table.stdout.splitlines() if re.match(r"\s+\d+\s+\d+\s+\d+\s", line)]
    assert len(rows) == 3, table.stdout
    for row, x in zip(rows, layouts):  # columns TP PP v CP EP DP SP b m ...
        assert [int(v) for v in (row[0], row[1], row[5], row[7], row[8])] == [
            x["tensor"], x["pipeline"], x["data"], x["micro_batch"], x["micro_batches"]], (row, x)


def test_layout_without_a_shape_exit_2(cli):
    res = cli("layout", "--set", "model.params=7e9", "-f", "json")
    assert res.returncode == 2
    assert res.stderr.strip().startswith("trainplan: model.layers: a shape")


# ---------------------------------------------------------------- issue 23: a search a practitioner recognises

from trainplan.planning.layout import collapse_twins, rank_of  # noqa: E402

NEMO_70B = ["model.family=llama", "model.layers=80", "model.width=8192", "model.heads=64", "model.kv_heads=8",
            "model.ffn_width=28672", "model.vocab=32000", "model.tied=false", "training.seq_len=4096",
            "training.micro_batch=1", "training.grad_accum=32", "cluster.count=512", "cluster.accelerator=h100-sxm",
            "parallel.tensor=4", "parallel.pipeline=4", "training.precision=bf16", "data.kind=tokens",
            "training.tokens=2e12"]


def test_interleave_any_divisor_and_uneven_stages_in_the_grid():
    # 96 layers on 16 stages: 6 a stage, so 1, 2, 3 or 6 virtual stages; 98 units do not split in 16
    g = candidate_grid(gpt_shape(12288, 96, 96, 51200, 2048), 1024, 1536)
    sixteen = g.interleave[g.pipeline == 16]
    assert set(sixteen.tolist()) == {1, 2, 3, 6}
    assert not np.any(g.embedding_stages[g.pipeline == 16])
    # BLOOM: 70 layers on 12 stages only with the embedding and head as units (72 = 12 x 6)
    g = candidate_grid(gpt_shape(14336, 112, 70, 250880, 2048), 384, 2048)
    twelve = g.pipeline == 12
    assert np.any(twelve) and np.all(g.embedding_stages[twelve] == 1)
    # interleaving needs micro-batches in groups of p: 2048 / (b d) is never a multiple of 12 here
    assert set(g.interleave[twelve].tolist()) == {1}


def test_context_parallelism_only_for_long_sequences():
    assert set(candidate_grid(gpt_shape(4096, 32, 32, 32000, 2048), 64, 1024).context.tolist()) == {1}
    g = candidate_grid(gpt_shape(4096, 32, 32, 32000, 16384), 64, 64)
    assert set(g.context.tolist()) == {1, 2, 4}  # at least 4,096 tokens a rank


def test_twins_collapse_to_the_least_memory_by_hand():
    step = np.array([1.0, 1.0005, 1.2, 1.0009, 1.3])
    memory = np.array([50.0, 40.0, 10.0, 45.0, 5.0])
    order = np.argsort(step, kind="stable")
    # 1.0, 1.0005 and 1.0009 tie (within 0.1 % of 1.0): the one of 40 shown, two ties
    assert collapse_twins(order, step, memory) == [(1, 2), (2, 0), (4, 0)]


def test_no_zero1_zero2_twins_and_a_reason_for_the_top_five():
    w = load_workload(None, SETS)
    out = search(w, resolve_model(w), top=10)
    steps = [r["step_seconds"] for r in out["layouts"]]
    # no identical twins (ZeRO-1 / ZeRO-2 at one step time used to fill two places); ties are counted
    assert all(b > a * (1 + 1e-6) for a, b in zip(steps, steps[1:]))
    assert sum(r["ties"] for r in out["layouts"]) > 0
    for r in out["layouts"]:
        assert r["reason"] and ("no recomputation" in r["reason"] or "recomputation to fit" in r["reason"]
                                or "recomputation: the least memory at this step" in r["reason"])
        if r["pipeline"] > 1:
            assert f"cuts the bubble to {r['bubble_share'] * 100:.1f} %" in r["reason"]  # the reports' "34.6 %"


@pytest.mark.parametrize("framework", [[], ["parallel.framework=megatron-core"]], ids=["assumed", "named"])
def test_nemo_70b_layout_in_the_top_five(framework):
    # NeMo's published Llama-2 70B layout on 512 H100 at a 4,096 sequence: TP 4 x PP 4 (20 virtual
    # stages); the batch is Llama 2's 4M tokens (1,024 sequences). Named, Megatron-core's fused kernels
    # keep fewer activations, so TP 2 layouts fit too; NeMo's stays in the first five.
    w = load_workload(None, NEMO_70B + framework)
    out = search(w, resolve_model(w), top=5, by="layout")
    assert rank_of(out, tensor=4, pipeline=4, context=1) is not None
    assert all(r["context"] == 1 for r in out["layouts"])  # no context parallelism at 4K


def test_layout_cli_by_layout(cli):
    args = [a for s in SETS for a in ("--set", s)]
    res = cli("layout", *args, "--top", "3", "--by", "layout", "-f", "json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)["layouts"]
    assert len({(r["tensor"], r["pipeline"], r["context"], r["expert"]) for r in rows}) == 3
    bad = cli("layout", *args, "--by", "stage")
    assert bad.returncode == 2 and bad.stderr.strip() == "trainplan: --by: expected one of setting, layout, got 'stage'"


def test_framework_key_scales_kernels_and_sets_overlap():
    # the same layout under DeepSpeed's pipeline engine: every kernel at 0.756 of Megatron-core's speed
    # (catalogue, fitted on mtnlg and bloom), so the compute term is 1 / 0.756 times as long
    from trainplan.accounts import step_ops
    from trainplan.planning.inputs import PlanInputs

    core = load_workload(None, SETS + ["parallel.tensor=2", "parallel.pipeline=2"])
    ds = load_workload(None, SETS + ["parallel.tensor=2", "parallel.pipeline=2", "parallel.framework=deepspeed"])
    a = PlanInputs.of(core).execution
    b = PlanInputs.of(ds).execution
    share = step_ops.framework("deepspeed").efficiency
    assert float(b.compute_seconds) == pytest.approx(float(a.compute_seconds) / share)
    assert float(b.step_seconds) > float(a.step_seconds)


def test_uneven_stages_from_the_command_line(cli):
    # Llama-3-405B's PP 16 on 126 layers (the embedding and head as partition units) is planned; 127 is not
    base = ["--set", "model.layers=126", "--set", "model.width=16384", "--set", "model.heads=128",
            "--set", "model.kv_heads=8", "--set", "model.vocab=128256", "--set", "cluster.count=1024",
            "--set", "parallel.tensor=8", "--set", "parallel.pipeline=16", "--set", "training.grad_accum=16",
            "-f", "json"]
    ok = cli("plan", *base)
    assert ok.returncode == 0, ok.stderr
    bad = cli("plan", *[x.replace("model.layers=126", "model.layers=127") for x in base])
    assert bad.returncode == 2 and bad.stderr.startswith("trainplan: parallel.pipeline: expected")


# GPT-3 175B on 1,024 A100 80 GB as Narayanan et al. 2021 ran it (Table 1): sequence 2,048, 1,536 sequences a
# step, fp16, no flash attention, in the Megatron-LM of that paper, which had no distributed optimizer
MEGATRON_175B = ["model.layers=96", "model.width=12288", "model.heads=96", "model.vocab=51200",
                 "training.seq_len=2048", "training.micro_batch=1", "training.grad_accum=192", "parallel.tensor=8",
                 "parallel.pipeline=16", "cluster.count=1024", "cluster.accelerator=a100-sxm-80gb",
                 "training.precision=fp16", "parallel.flash_attention=false", "parallel.framework=megatron-2021",
                 "data.kind=tokens", "training.tokens=3e11"]


def test_megatron_175b_layout_in_the_top_five():
    w = load_workload(None, MEGATRON_175B)
    out = search(w, resolve_model(w), top=5, by="layout")
    assert rank_of(out, tensor=8, pipeline=16, context=1) is not None
    # the framework offers no ZeRO: every layout keeps its optimizer state whole (16 bytes a parameter)
    assert all(r["zero"] == 0 for r in out["layouts"])


def test_the_search_offers_only_the_zero_stages_a_framework_has():
    def stages(framework: str, pipeline_only: bool) -> set[int]:
        w = load_workload(None, SETS + [f"parallel.framework={framework}"])
        rows = search(w, resolve_model(w), top=100000, include_unfit=True)["layouts"]
        return {r["zero"] for r in rows if (r["pipeline"] > 1) == pipeline_only}
    # Megatron-core: its distributed optimizer is ZeRO-1; DeepSpeed's pipeline engine refuses ZeRO-2 and 3
    assert stages("megatron-core", True) == stages("megatron-core", False) == {0, 1}
    assert stages("deepspeed", True) == {0, 1} and stages("deepspeed", False) == {0, 1, 2, 3}
    assert stages("megatron-2021", True) == {0}


def test_a_shape_only_model_keeps_korthikantis_block_under_tensor_parallelism():
    # Korthikanti et al. 2022 eq. 2, TP t without SP, eager attention: s b h (10 + 24 / t + 5 a s / (h t)) bytes a
    # layer; 175B at t = 8, b = 1: 2048 x 12288 x (10 + 3 + 10) = 578.8 MB a layer. PP 16 under 1F1B: the first
    # stage holds 16 micro-batches of its 6 layers = 96 layer-micro-batches, plus the embedding's dropout mask
    # (s b h / t... kept whole without SP: s b h bytes per micro-batch in flight)
    from trainplan.planning.inputs import PlanInputs

    w = load_workload(None, MEGATRON_175B + ["training.recompute=none"])
    layer = 2048 * 12288 * (10 + 24 / 8 + 5 * 96 * 2048 / (12288 * 8))
    embedding = 2048 * 12288 * 1.0 * 16
    ex = PlanInputs.of(w).execution
    assert float(ex.activation_bytes) == pytest.approx(96 * layer + embedding, rel=0.02)


def test_the_search_offers_only_the_parallelisms_a_framework_has():
    # FSDP has no pipeline schedule; Megatron-LM of 2021 no context parallelism; DeepSpeed's ZeRO-3
    # engine no pipeline and no stage but 3 (catalogue/kernel_efficiency.toml [frameworks])
    def rows(framework: str, extra: list[str] = ()) -> list[dict]:
        w = load_workload(None, SETS + [f"parallel.framework={framework}", *extra])
        return search(w, resolve_model(w), top=100000, include_unfit=True)["layouts"]
    assert {r["pipeline"] for r in rows("fsdp")} == {1}
    assert {r["zero"] for r in rows("fsdp")} <= {0, 2, 3}
    long = ["training.seq_len=16384", "training.grad_accum=1"]
    assert {r["context"] for r in rows("megatron-2021", long)} == {1}
    assert {r["context"] for r in rows("megatron-core", long)} > {1}
    z3 = rows("deepspeed-zero3", ["training.zero=3"])
    assert {r["pipeline"] for r in z3} == {1} and {r["zero"] for r in z3} == {3}


def test_a_named_framework_refuses_what_it_does_not_have(cli):
    # one line naming the key and what was expected, exit 2; an assumed framework is not held to it
    cases = [(["parallel.framework=fsdp", "parallel.pipeline=2", "cluster.count=2"],
              "trainplan: parallel.pipeline: expected 1: parallel.framework 'fsdp' has no pipeline parallelism "
              "(it has tensor), got 2"),
             (["parallel.framework=megatron-2021", "training.zero=1", "cluster.count=2"],
              "trainplan: training.zero: expected one of 0: parallel.framework 'megatron-2021' has those ZeRO "
              "stages, got 1"),
             (["parallel.framework=deepspeed", "parallel.pipeline=2", "training.zero=2", "cluster.count=4"],
              "trainplan: training.zero: expected one of 0, 1: parallel.framework 'deepspeed' has those ZeRO "
              "stages with pipeline parallelism, got 2")]
    for keys, line in cases:
        res = cli("plan", *[a for k in keys for a in ("--set", k)], "-f", "json")
        assert res.returncode == 2 and res.stderr.strip() == line and res.stdout == ""
    ok = cli("plan", "--set", "training.zero=3", "--set", "cluster.count=2", "-f", "json")
    assert ok.returncode == 0, ok.stderr


def test_a_bubble_longer_than_the_work_is_said_as_a_multiple():
    """(p - 1)/(m v) of the ideal step: 4 stages, 2 micro-batches, no interleaving is 3/2 = 1.5 of it. The
    reason says the pipeline idles 1.5x the compute, not that it "cuts the bubble to 150 %"; 4 micro-batches
    give 3/4, which it does cut to."""
    from trainplan.planning.layout import reason

    row = dict(tensor=1, sequence=False, pipeline=4, interleave=1, embedding_stages=0, context=1, zero=0,
               recompute="none", micro_batches=2, bubble_share=3 / 2, seq_tokens=128, expert=1)
    text = reason(row, None, 8)
    assert "PP 4 with 2 micro-batches idles 1.5x the compute in its bubble" in text and "cuts" not in text
    assert "PP 4 cuts the bubble to 75" in reason(dict(row, micro_batches=4, bubble_share=3 / 4), None, 8)
