"""`trainplan validate-against megatron`: the eight runs of Korthikanti et al. 2022 (arXiv 2205.05198).

The measured step times are the paper's (Table 5), written out here from the paper, not
read from the catalogue, so a changed catalogue entry fails this test.
"""

import json
import math

import pytest

from trainplan import catalogue
from trainplan.accounts import step_ops
from trainplan.planning import validation
from trainplan.planning.validation import gpt_shape, megatron_runs, validate

PAPER = {  # name: (width, heads, layers, TP, PP, GPUs, global batch, micro-batch, seconds)
    "22B full recompute": (6144, 64, 48, 8, 1, 8, 4, 4, 1.42),
    "22B selective + SP": (6144, 64, 48, 8, 1, 8, 4, 4, 1.10),
    "175B full recompute": (12288, 96, 96, 8, 8, 64, 64, 1, 18.13),
    "175B selective + SP": (12288, 96, 96, 8, 8, 64, 64, 1, 13.75),
    "530B full recompute": (20480, 128, 105, 8, 35, 280, 280, 1, 49.05),
    "530B selective + SP": (20480, 128, 105, 8, 35, 280, 280, 1, 37.83),
    "1T full recompute": (25600, 160, 128, 8, 64, 512, 512, 1, 94.42),
    "1T selective + SP": (25600, 160, 128, 8, 64, 512, 512, 1, 71.49),
}


def test_catalogue_holds_the_papers_runs():
    runs = {r["name"]: r for r in megatron_runs()["runs"]}
    assert set(runs) == set(PAPER)
    for name, (h, a, l, t, p, n, batch, mb, seconds) in PAPER.items():
        r = runs[name]
        assert (r["width"], r["heads"], r["layers"], r["tensor"], r["pipeline"], r["devices"], r["global_batch"],
                r["micro_batch"], r["measured_seconds"]) == (h, a, l, t, p, n, batch, mb, seconds)
    assert megatron_runs()["common"]["seq_len"] == 2048 and megatron_runs()["common"]["vocab"] == 51200


@pytest.mark.parametrize("h,l,billions", [(6144, 48, 22), (12288, 96, 175), (20480, 105, 530), (25600, 128, 1000)])
def test_shapes_have_the_published_sizes(h, l, billions):
    assert gpt_shape(h, 64, l, 51200, 2048).params / 1e9 == pytest.approx(billions, rel=0.03)


def test_the_eight_within_the_target_with_one_curve():
    v = validate("megatron")
    assert len(v.rows) == 8
    # issue 23's targets on the eight (constants fitted on korthikanti and narayanan2021, stated)
    assert v.mean_abs_error <= 0.05
    assert v.max_abs_error <= 0.10
    assert abs(v.bias) <= 0.05
    assert v.fitted_on == ["korthikanti", "narayanan2021"]
    # one GEMM curve for the A100, the catalogue's, not one per run
    curve = step_ops.kernel_efficiency("a100-sxm-80gb")
    assert (v.gemm_max, v.gemm_half_intensity) == (curve.gemm_max, curve.gemm_half_intensity)
    for r in v.rows:
        assert r.measured_seconds == PAPER[r.name][-1]
        assert r.error == pytest.approx((r.predicted_seconds - r.measured_seconds) / r.measured_seconds)
        assert r.fits  # every published run ran on 80 GB cards
    errors = [r.error for r in v.rows]
    assert v.bias == pytest.approx(sum(errors) / 8)
    assert v.max_abs_error == pytest.approx(max(abs(e) for e in errors))


def test_pipeline_bubble_of_the_175b_runs():
    rows = {r.name: r for r in validate().rows}
    assert rows["175B full recompute"].bubble_share == pytest.approx(7 / 64)
    assert rows["175B selective + SP"].bubble_share == pytest.approx(7 / (64 * 3))


def test_cli_json_rows(cli):
    res = cli("validate-against", "megatron", "-f", "json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert len(out["rows"]) == 8
    assert {"predicted_seconds", "measured_seconds", "error"} <= set(out["rows"][0])
    table = cli("validate-against", "megatron")
    assert "mean absolute error" in table.stdout


def test_cli_unknown_suite(cli):
    res = cli("validate-against", "calculon")
    assert res.returncode == 2
    assert res.stderr.strip().startswith("trainplan: SUITE: expected one of megatron, korthikanti, narayanan2021")
    assert "got 'calculon'" in res.stderr


# ---------------------------------------------------------------- the published sets beyond the eight (issue 23)

NARAYANAN = {  # Narayanan et al. 2021, Table 1: name: (h, a, l, TP, PP, GPUs, batch, achieved TFLOP/s per GPU)
    "1.7B": (2304, 24, 24, 1, 1, 32, 512, 137), "3.6B": (3072, 32, 30, 2, 1, 64, 512, 138),
    "7.5B": (4096, 32, 36, 4, 1, 128, 512, 142), "18.4B": (6144, 48, 40, 8, 1, 256, 1024, 135),
    "39.1B": (8192, 64, 48, 8, 2, 512, 1536, 138), "76.1B": (10240, 80, 60, 8, 4, 1024, 1792, 140),
    "145.6B": (12288, 96, 80, 8, 8, 1536, 2304, 148), "310.1B": (16384, 128, 96, 8, 16, 1920, 2160, 155),
    "529.6B": (20480, 128, 105, 8, 35, 2520, 2520, 163), "1008B": (25600, 160, 128, 8, 64, 3072, 3072, 163),
}
MTNLG = {2240: 60.1, 2800: 50.2, 3360: 44.4}  # Smith et al. 2022: GPUs -> seconds per iteration (batch 1920)
MTNLG_TFLOPS = {2240: 126, 2800: 121, 3360: 113}


def _eq3(batch, s, l, h, vocab):
    """Narayanan et al. 2021 eq. 3 (full recomputation): 96 B s l h^2 (1 + s/(6h) + V/(16 l h))."""
    return 96 * batch * s * l * h**2 * (1 + s / (6 * h) + vocab / (16 * l * h))


def test_narayanan_table_and_the_step_times_it_implies():
    runs = {r.name: r for r in validation.runs_of("narayanan2021")}
    assert set(runs) == set(NARAYANAN)
    for name, (h, a, l, t, p, n, batch, tflops) in NARAYANAN.items():
        r = runs[name]
        got = (r.width, r.heads, r.layers, r.tensor, r.pipeline, r.devices, r.global_batch)
        assert got == (h, a, l, t, p, n, batch)
        assert r.measured["tflops_per_gpu"] == tflops
        assert validation.measured_seconds(r) == pytest.approx(_eq3(batch, 2048, l, h, 51200) / (n * tflops * 1e12))
    # by hand for the 1.7B run: about 3.53 s
    assert validation.measured_seconds(runs["1.7B"]) == pytest.approx(3.53, abs=0.01)


def test_mtnlg_times_agree_with_its_own_flop_rates():
    # the paper's seconds and its teraFLOP/s are one measurement: eq. 3 over (GPUs x rate) gives the seconds
    runs = {r.devices: r for r in validation.runs_of("mtnlg")}
    for n, seconds in MTNLG.items():
        assert validation.measured_seconds(runs[n]) == seconds
        assert _eq3(1920, 2048, 105, 20480, 51200) / (n * MTNLG_TFLOPS[n] * 1e12) == pytest.approx(seconds, rel=0.01)
        assert runs[n].data * 8 * 35 == n and runs[n].micro_batches == 1920 // runs[n].data


def test_every_set_states_its_source_and_assumptions():
    for name in validation.set_names():
        source, assumed = validation.set_source(name)
        assert source and assumed, name
        for r in validation.runs_of(name):
            assert r.devices % (r.tensor * r.pipeline) == 0 and r.global_batch % (r.micro_batch * r.data) == 0
    assert validation.runs_of("megatron") == validation.runs_of("korthikanti")


ZERO3 = {  # Narayanan et al. 2021, Table 2, ZeRO-3 without model parallelism: (GPUs, batch, micro-batch, TFLOP/s)
    "175B ZeRO-3 on 384": (384, 1536, 4, 144), "175B ZeRO-3 on 768": (768, 1536, 2, 88),
    "175B ZeRO-3 on 1536": (1536, 1536, 1, 44), "530B ZeRO-3 on 640": (640, 2560, 4, 138),
    "530B ZeRO-3 on 1120": (1120, 2240, 2, 98), "530B ZeRO-3 on 2240": (2240, 2240, 1, 48),
}


def test_zero3_rows_of_the_paper():
    runs = {r.name: r for r in validation.runs_of("zero3")}
    assert set(runs) == set(ZERO3)
    for name, (n, batch, mb, tflops) in ZERO3.items():
        r = runs[name]
        assert (r.devices, r.global_batch, r.micro_batch, r.measured["tflops_per_gpu"], r.zero, r.tensor,
                r.pipeline) == (n, batch, mb, tflops, 3, 1, 1)
        assert r.micro_batches == 1  # one micro-batch of b sequences on each GPU
    # with the catalogue's constants (its overlap cost and one NIC's rate a GPU, both read from this set)
    # every ZeRO-3 run is within 10 % (the issue saw -21 to -35 %)
    for r in runs.values():
        assert abs(validation.plan_run(r).step_seconds / validation.measured_seconds(r) - 1) <= 0.10, r.name
    # out of sample nothing else measures DeepSpeed's ZeRO-3 engine: it is planned at the default a node's
    # NICs and the overlap cost fitted on the other frameworks, and comes out far too fast (docs/parallel.md)
    held = next(h for h in validation.leave_one_set_out().held_out if h.set == "zero3")
    assert all(r.error < -0.15 for r in held.rows)
    assert step_ops.framework("deepspeed-zero3").dp_links_chosen_on == ("zero3",)


def test_bloom_and_llama3_run_on_uneven_stages():
    bloom = validation.runs_of("bloom")[0]
    assert (bloom.layers, bloom.pipeline, bloom.embedding_stages) == (70, 12, 1)
    assert validation.run_shape(bloom).params / 1e9 == pytest.approx(176, rel=0.01)  # BLOOM's 176 B
    llama = validation.runs_of("llama3")[0]
    assert (llama.layers, llama.pipeline, llama.embedding_stages) == (126, 16, 1)
    assert validation.run_shape(llama).params / 1e9 == pytest.approx(405, rel=0.01)  # Llama 3's 405 B
    for run in (bloom, llama):
        assert validation.plan_run(run).step_seconds > 0


def test_catalogue_constants_are_the_fit_on_the_stated_sets():
    fitted = validation.fit(step_ops.fit_sets())
    curve = step_ops.kernel_efficiency("a100-sxm-80gb")
    assert fitted.gemm_max == pytest.approx(curve.gemm_max, abs=0.002)
    assert fitted.gemm_half_intensity == pytest.approx(curve.gemm_half_intensity, abs=2.0)
    kernels = {"a100-sxm-80gb": fitted}
    rows = catalogue.table("kernel_efficiency")["frameworks"]
    # each measured framework's efficiency (and overlap cost, where it overlaps) on its own fit_sets
    for key in ("deepspeed", "fsdp", "deepspeed-zero3", "llama3"):
        share, overlap = validation.fit_framework(rows[key]["fit_sets"], key, kernels)
        fw = step_ops.framework(key)
        assert share == pytest.approx(fw.efficiency, abs=0.002), key
        assert (overlap is None) == (not fw.dp_overlap), key
        if overlap is not None:
            assert overlap == pytest.approx(fw.overlap_cost, abs=0.005), key
    # one set cannot separate slow kernels from a costly overlap: its efficiency stays assumed
    assert step_ops.framework("deepspeed-zero3").efficiency == validation.ASSUMED_FRAMEWORK_EFFICIENCY
    # the cost charged for a framework no set measures: every overlapping set, each framework at its own speed
    table = catalogue.table("kernel_efficiency")
    shares = {key: step_ops.framework(key).efficiency for key in rows}
    overlap = validation.fit_overlap(table["overlap_fit_sets"], kernels, shares)
    assert overlap == pytest.approx(step_ops.overlap_cost(), abs=0.005)
    assert step_ops.framework("megatron-core").overlap_cost == step_ops.overlap_cost()
    assert step_ops.framework("megatron-2021").overlap_cost == 0.0  # no overlap, nothing to charge


#: the sets the step model was developed against (issue 23); the MosaicML sets came after it
BUILT_AGAINST = ("korthikanti", "narayanan2021", "mtnlg", "bloom", "llama3", "opt", "narayanan2021_ptd", "zero3")


def test_leave_one_set_out_is_out_of_sample_and_within_the_target():
    loso = validation.leave_one_set_out()
    assert [h.set for h in loso.held_out] == list(validation.set_names())
    for h in loso.held_out:
        assert h.set not in h.fitted_on
    # the eight predicted with the curve fitted on the other sets' Megatron runs (narayanan2021 only)
    k = next(h for h in loso.held_out if h.set == "korthikanti")
    refit = validation.fit([s for s in validation.set_names() if s != "korthikanti"])
    assert (k.gemm_max, k.gemm_half_intensity) == (refit.gemm_max, refit.gemm_half_intensity)
    errors = [r.error for h in loso.held_out for r in h.rows]
    n = sum(len(validation.runs_of(s)) for s in validation.set_names())
    assert loso.runs == len(errors) == n == 37 + 68
    assert loso.mean_abs_error == pytest.approx(sum(abs(e) for e in errors) / n)
    assert loso.bias == pytest.approx(sum(errors) / n)
    # issue 23's targets out of sample (mean <= 10 %, no sign bias beyond 5 %) hold on all 105 runs, on the
    # 68 MosaicML runs (added after the step model was built) and on the runs it was built against but
    # DeepSpeed's ZeRO-3 rows, whose engine no other set measures (docs/parallel.md)
    def within(errs: list[float]) -> bool:
        return sum(abs(e) for e in errs) / len(errs) <= 0.10 and abs(sum(errs) / len(errs)) <= 0.05
    assert within(errors)
    mosaic = [r.error for h in loso.held_out if h.set not in BUILT_AGAINST for r in h.rows]
    assert len(mosaic) == 68 and within(mosaic)
    built = [r.error for h in loso.held_out if h.set in BUILT_AGAINST and h.set != "zero3" for r in h.rows]
    assert len(built) == 31 and within(built)


def test_step_error_band_is_the_out_of_sample_mean_rounded_up():
    band = validation.measured_error_band()
    loso = validation.leave_one_set_out()
    assert band["band"] >= loso.mean_abs_error and band["band"] - loso.mean_abs_error < 0.01
    assert band["runs"] == 105
    assert band["text"] == f"± {band['band'] * 100:.0f} %, validated on 105 published runs (out of sample)"
    # the catalogue's band (what a plan shows, read without refitting) is the one measured now
    assert validation.step_error_band() == band


def test_cli_all_sets_json_and_table(cli):
    res = cli("validate-against", "all", "-f", "json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert len(out["rows"]) == 105 and out["leave_one_set_out"]["runs"] == 105
    table = cli("validate-against", "narayanan2021")
    assert table.returncode == 0 and "bias" in table.stdout and "out of sample" in table.stdout


def test_fsdp_full_shard_keeps_fsdp_state_and_mpt_30b_at_8k_fits():
    # FULL_SHARD is FSDP's stage 3: 16 bytes a parameter sharded (2 + 2 + 12, no separate fp32 gradient
    # partition) and two wrapped blocks gathered, so MosaicML's MPT-30B at 8,192 tokens on 8 H100 (a run
    # they made) fits; DeepSpeed's ZeRO-3 accounting (18 bytes a parameter) did not
    run = next(r for r in validation.runs_of("mpt_h100") if r.name == "MPT-30b s8192 on 8")
    acct = validation.plan_run(run)
    params = validation.run_model_shape(run.set, run.name).params
    assert float(acct.weights_bytes + acct.grads_bytes + acct.optimizer_bytes) == pytest.approx(16 * params / 8)
    assert bool(acct.fits)
    assert step_ops.framework("fsdp").zero3_sharding == "fsdp"
    assert step_ops.framework("deepspeed-zero3").zero3_sharding == "zero3"


def test_the_530b_zero3_run_on_640_gpus_fits():
    # ZeRO-3 budgets the largest module gathered (the 4 h^2 MLP matrix), not two full layers
    run = next(r for r in validation.runs_of("zero3") if r.devices == 640)
    acct = validation.plan_run(run)
    assert bool(acct.fits)
    assert float(acct.gathered_bytes) < 2 * 12 * 20480**2 * 2  # less than two 16-bit layers


# ---------------------------------------------------------------- issue 23: the published layouts in the search

# The practitioners' own layouts (each paper's TP x PP, as published), and the ones the search does not
# yet place in its first five, with why (the note of issue 23 gives the table):
#   narayanan2021 18.4B: TP 8 on 256 GPUs, 6th (TP 4 x PP 2 interleaved predicted 7 % faster)
#   bloom: TP 4 x PP 12, 6th (TP 8 x PP 6 predicted 3 % faster)
#   llama3 (both): TP 8 x PP 16 without recomputation does not fit in our activation account at 8K tokens
#   (Meta trained it so), so the search puts CP 2 or full recomputation first
#   mpt_h100 MPT-30B at 8K tokens on 8 GPUs: FSDP with full recomputation does not fit in our account
SEARCH_MISSES = {("narayanan2021", "18.4B"), ("bloom", "BLOOM 176B"), ("llama3", "405B on 8192"),
                 ("llama3", "405B on 16384")}


def _chosen_runs():
    return [r for name in validation.set_names() if not validation.is_baseline(name)
            for r in validation.runs_of(name)]


@pytest.mark.parametrize("run", [r for r in _chosen_runs() if (r.set, r.name) not in SEARCH_MISSES],
                         ids=lambda r: f"{r.set}-{r.name}")
def test_the_published_layout_is_in_the_search_top_five(run):
    place, first = validation.search_place(run)
    assert place is not None and place <= 5, (run.set, run.name, place, first)


def test_the_search_misses_are_the_stated_ones():
    # each stated miss is still a miss: a mend that brings one into the first five must update the list
    for run in _chosen_runs():
        if (run.set, run.name) in SEARCH_MISSES:
            place, _ = validation.search_place(run)
            assert place is None or place > 5, (run.set, run.name, place)


def test_workload_keys_plan_the_runs_model():
    # the run written as workload keys gives the model the paper states: 12 l h^2 for the GPT block
    # (175.0 B for GPT-3 with its embeddings), Llama 3 405B's 405.9 B
    from trainplan.planning.evaluate import resolve_model
    from trainplan.planning import execution
    from trainplan.workload.load import load_workload

    for set_name, name, billions in (("korthikanti", "175B selective + SP", 174.6), ("llama3", "405B on 8192", 405.85)):
        run = next(r for r in validation.runs_of(set_name) if r.name == name)
        w = load_workload(None, validation.workload_keys(run))
        shape = execution.model_shape(w, resolve_model(w))
        assert shape.params / 1e9 == pytest.approx(billions, rel=2e-3)
        assert int(w.training.micro_batch * w.training.grad_accum * run.data) == run.global_batch


def test_baseline_sets_are_reported_not_held(cli):
    res = cli("validate-against", "zero3", "-f", "json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert all(r["baseline"] and r["search_rank"] for r in out["rows"])
    assert out["chosen_runs"] == 0 and out["in_top_five"] == 0
    table = cli("validate-against", "zero3").stdout
    assert "b: a baseline the paper ran to compare against" in table


def test_help_names_every_set(cli):
    text = " ".join(cli("validate-against", "--help").stdout.split())
    for name in validation.SUITES:
        assert name in text, name


def test_a_plan_of_each_run_gives_the_validated_step_and_memory():
    # one job, one answer: the run written as workload keys and planned as a user would gives the step
    # and the memory validate-against reports (to rounding: the GPT shape's learned positions)
    from trainplan.planning.inputs import PlanInputs
    from trainplan.workload.load import load_workload

    for name in validation.set_names():
        for run in validation.runs_of(name):
            ex = PlanInputs.of(load_workload(None, validation.plan_keys(run))).execution
            acct = validation.plan_run(run)
            assert float(ex.step_seconds) == pytest.approx(float(acct.step_seconds), rel=1e-3), (name, run.name)
            assert float(ex.per_device_bytes) == pytest.approx(float(acct.per_device_bytes), rel=5e-3), (name, run.name)


def test_a_plan_shows_the_band_of_its_own_accelerator(cli):
    # the H100's curve is assumed, not fitted: its published runs (llama3 and MosaicML's) are its band, and
    # their bias is said; an A100 plan gets the A100 runs' band; an accelerator no run used, the overall one
    for key in validation.step_ops_accelerators(list(validation.set_names())):
        assert validation.step_error_band(key) == validation.measured_error_band(key), key
    h100 = validation.measured_error_band("h100-sxm")
    on_h100 = [r for h in validation.leave_one_set_out().held_out if h.set in ("llama3", "mpt_h100_large", "mpt_h100")
               for r in h.rows]
    mean = sum(abs(r.error) for r in on_h100) / len(on_h100)
    assert h100["runs"] == 2 + 18 + 43 and h100["band"] == math.ceil(mean * 100) / 100
    # a bias beyond 5 % is said beside the band, in its direction
    for key in ("h100-sxm", "a100-sxm-80gb"):
        band = validation.measured_error_band(key)
        said = f", which it predicts {abs(band['bias']) * 100:.0f} % {'fast' if band['bias'] < 0 else 'slow'} on average"
        assert band["text"].endswith(said if abs(band["bias"]) > 0.05 else "on this accelerator (out of sample)"), key
    res = cli("plan", "examples/llama3-70b-512gpu.toml", "-f", "json")
    assert res.returncode == 0, res.stderr
    c = json.loads(res.stdout)["compute"]
    assert c["step_error_band"] == h100["band"] and c["step_error_runs"] == 63
    other = cli("plan", "examples/llama3-70b-512gpu.toml", "--set", "cluster.accelerator=mi300x", "-f", "json")
    assert other.returncode == 0, other.stderr
    text = json.loads(other.stdout)["compute"]["step_error_text"]
    assert text.endswith("published runs (out of sample), none of them on this accelerator")
