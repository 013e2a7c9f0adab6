"""`trainplan validate-against megatron`: the eight runs of Korthikanti et al. 2022 (arXiv 2205.05198).

The measured step times are the paper's (Table 5), written out here from the paper, not
read from the catalogue, so a changed catalogue entry fails this test.
"""

import json

import pytest

from trainplan.catalogue.interconnect import platform
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


def test_within_the_target_with_one_efficiency():
    v = validate("megatron")
    assert len(v.rows) == 8
    assert v.mean_abs_error <= 0.10
    assert v.max_abs_error <= 0.20
    # one GEMM curve for the A100, the catalogue's, not one per run
    assert (v.gemm_max, v.gemm_half_intensity) == (0.85, 200.0)
    for r in v.rows:
        assert r.measured_seconds == PAPER[r.name][-1]
        assert r.error == pytest.approx((r.predicted_seconds - r.measured_seconds) / r.measured_seconds)
        assert r.fits  # every published run ran on 80 GB cards


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
    assert res.stderr.strip().startswith("trainplan: set: expected one of megatron, korthikanti, narayanan2021")
    assert "got 'calculon'" in res.stderr
