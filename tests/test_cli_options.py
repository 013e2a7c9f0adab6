"""One set of options on every command that plans, one wording per mistake (issue 28)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LLAMA_CONFIG = ROOT / "examples" / "configs" / "llama-2-7b.json"
FORMAT_REFUSAL = "trainplan: --format: expected one of "


@pytest.mark.parametrize("argv", [
    ["plan"], ["serve"], ["roofline"], ["layout", "--devices", "1", "--top", "1"], ["solve", "cluster.cores", "--for", "pipeline.busy>=0.5"],
    ["simulate", "--frames", "2000"], ["params", str(LLAMA_CONFIG)], ["data", "demos", "10"],
    ["data", "mix", "--tokens", "1T", "--source", "web:2T:1"],
])
def test_a_wrong_format_is_refused_in_one_wording(cli, argv: list[str]) -> None:  # noqa: ANN001
    res = cli(*argv, "-f", "yaml")
    assert res.returncode == 2
    assert res.stderr.startswith(FORMAT_REFUSAL) and res.stderr.strip().endswith("got 'yaml'"), res.stderr
    assert res.stderr.count("\n") == 1


def test_plan_names_its_formats(cli) -> None:  # noqa: ANN001
    res = cli("plan", "--format", "xml")
    assert res.returncode == 2 and res.stderr.strip() == (
        "trainplan: --format: expected one of table, json, markdown, html, csv, got 'xml'")


def test_serve_writes_markdown_and_json_to_a_file(cli, tmp_path: Path) -> None:  # noqa: ANN001
    md = tmp_path / "serve.md"
    res = cli("serve", "--format", "markdown", "--output", str(md))
    assert res.returncode == 0, res.stderr
    text = md.read_text()
    assert text.startswith("# Serving on NVIDIA H100-SXM5-80GB") and "| figure | value |" in text
    out = tmp_path / "serve.json"
    assert cli("serve", "-f", "json", "-o", str(out), "--set", "cluster.cores=16").returncode == 0
    assert json.loads(out.read_text())["accelerator"] == "h100-sxm"


def test_params_takes_f_and_o_and_refuses_a_workload_toml_in_words(cli, tmp_path: Path) -> None:  # noqa: ANN001
    out = tmp_path / "p.json"
    assert cli("params", str(LLAMA_CONFIG), "-f", "json", "-o", str(out)).returncode == 0
    assert json.loads(out.read_text())["total"] == 6_738_415_616  # Meta's published Llama-2-7b count
    res = cli("params", str(ROOT / "examples" / "finetune-1b.toml"))
    assert res.returncode == 2 and "valid JSON" not in res.stderr and "TOML file" in res.stderr


def test_data_commands_take_f_and_o(cli, tmp_path: Path) -> None:  # noqa: ANN001
    res = cli("data", "demos", "100", "-f", "table")
    # 100 demonstrations x (60 s + 20 s) = 8,000 s = 2.22 person-hours
    assert res.returncode == 0 and "8,000" in res.stdout and "2.22" in res.stdout
    out = tmp_path / "mix.json"
    assert cli("data", "mix", "--tokens", "1T", "--source", "web:2T:1", "-o", str(out)).returncode == 0
    assert json.loads(out.read_text())["max_epochs"] == pytest.approx(0.5)  # 1 T read of 2 T


def test_sweep_writes_a_table_and_no_inf_in_csv(cli) -> None:  # noqa: ANN001
    res = cli("sweep", "--vary", "cluster.cores=0:2", "--figures", "pipeline.busy,compute.wall_seconds", "-f", "table")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "accelerator busy" in lines[0] and "wall time" in lines[0]
    assert lines[1].split()[:3] == ["0", "cores", "0"] and "no limit" in lines[1]  # no supply: never ends
    csv = cli("sweep", "--vary", "cluster.cores=0:2", "--figures", "pipeline.busy,compute.wall_seconds").stdout
    assert "inf" not in csv and csv.splitlines()[1] == "0,0,"  # an unbounded figure is an empty field


def test_help_lists_data_inspect(cli) -> None:  # noqa: ANN001
    top = cli("--help").stdout
    assert "`data inspect` measures your files" in top
    assert "`data inspect` measures your files" in cli("data", "--help").stdout


def test_unknown_keys_suggest_what_people_mean(cli) -> None:  # noqa: ANN001
    res = cli("plan", "--set", "cluster.gpus=8")
    assert res.returncode == 2 and "(did you mean 'cluster.count'?)" in res.stderr
    for name in ("adam8bit", "adamw8bit", "paged_adamw_8bit"):  # bitsandbytes' names, one recipe
        res = cli("plan", "--set", f"training.optimizer={name}")
        assert res.returncode == 2 and "training.state_recipe = 'adam_8bit'" in res.stderr, name


def test_layout_writes_the_card_in_gb_as_plan_does(cli) -> None:  # noqa: ANN001
    res = cli("layout", "--devices", "1", "--top", "1")
    # the H100's 81,559 MiB = 85.52e9 B: "85.5 GB" in plan's Fits? line and here, never 79.6 GiB
    assert res.returncode == 0 and "85.5 GB" in res.stdout and "GiB" not in res.stdout


def test_serve_compares_with_a_training_bill_only_when_one_is_described(cli) -> None:  # noqa: ANN001
    assert "passes the training bill" not in cli("serve").stdout  # the default describes no training run
    out = cli("serve", str(ROOT / "examples" / "llama2-7b-pretrain.toml")).stdout
    assert "passes the training bill" in out


def test_plan_writes_csv_a_figure_a_row(cli) -> None:  # noqa: ANN001
    """`plan --format csv`: one row a figure, in SI units; training FLOPs 6 N D by hand for the reference
    workload: 6 x 93e6 x 82.944e9 (3 cameras x 30 frames/s x 1,000 h x 256 tokens a frame) = 4.628e19."""
    import csv
    import io

    res = cli("plan", "--format", "csv")
    assert res.returncode == 0, res.stderr
    rows = {r["figure"]: r for r in csv.DictReader(io.StringIO(res.stdout))}
    assert float(rows["compute.flops"]["value"]) == pytest.approx(6 * 93e6 * 3 * 30 * 3600 * 1000 * 256, rel=1e-12)
    assert rows["compute.flops"]["dimension"] == "flops" and rows["pipeline.busy"]["label"] == "accelerator busy"
    assert "nan" not in res.stdout and "inf" not in res.stdout


def test_human_reports_leave_out_keys_of_other_kinds_of_data(tmp_path) -> None:
    """A token workload's table, Markdown and HTML leave out the camera keys (data.fps) unless given;
    JSON keeps every key."""
    import json as _json

    from trainplan.planning.evaluate import build_report
    from trainplan.present import html, render
    from trainplan.workload.load import load_workload

    report = build_report(load_workload("examples/llama2-7b-pretrain.toml"))
    assert "data.fps" in report["assumptions"] and "data.bytes_per_token" in report["assumptions"]
    shown, note = render.shown_assumptions(report)
    keys = {k for k, _ in shown}
    assert "data.fps" not in keys and "cluster.core_fps_1080p" not in keys and "data.bytes_per_token" in keys
    frame_keys = [k for k, r in render.KEY_ROLES.items() if r.kinds and "tokens" not in r.kinds]
    assert note.startswith(f"Left out: {len(frame_keys)} keys of image or video data, which a token workload")
    markdown = render.to_markdown(report)
    page = html.render_html(report)
    assert "| data.fps |" not in markdown and "| data.bytes_per_token |" in markdown and note in markdown
    assert "'>data.fps</td>" not in page and "'>data.bytes_per_token</td>" in page
    assert "data.fps" in _json.loads(render.to_json(report))["assumptions"]
    given = build_report(load_workload("examples/llama2-7b-pretrain.toml", ["data.fps=25"]))
    assert "data.fps" in {k for k, _ in render.shown_assumptions(given)[0]}
    # and the first screen says that a key the user wrote is not read, rather than showing it as applied
    assert "unused" not in report["answer"]
    assert given["answer"]["unused"] == "data.fps is given but not used: data.kind = 'tokens' does not read it."
    two = build_report(load_workload("examples/llama2-7b-pretrain.toml", ["data.fps=25", "data.bitrate=5e6"]))
    assert two["answer"]["unused"].startswith("data.") and " and data." in two["answer"]["unused"]
    assert {"data.fps", "data.bitrate"} <= set(two["answer"]["unused"].replace(" and ", ", ").split(" are ")[0]
                                               .split(", "))


@pytest.mark.parametrize("argv", [
    ["plan"], ["serve"], ["roofline"], ["layout", "--devices", "1", "--top", "1"],
    ["sweep", "--vary", "cluster.cores=4,8"], ["solve", "cluster.cores", "--for", "pipeline.busy>=0.5"],
    ["validate"], ["simulate", "--frames", "1000"]])
def test_every_command_that_plans_takes_a_calibration_and_says_when_it_is_missing(cli, argv, tmp_path) -> None:  # noqa: ANN001
    missing = tmp_path / "none.toml"
    res = cli(*argv, "--calibration", str(missing))
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip() == f"trainplan: {missing}: no such calibration file (write one with `trainplan probe " \
                                 "decode --output FILE`)"


def test_roofline_writes_its_intensities_with_their_unit(cli) -> None:  # noqa: ANN001
    # ridge = peak / bandwidth = 989.5 TFLOP/s / 3.35 TB/s = 295 FLOP a byte (the H100's catalogue figures)
    out = cli("roofline").stdout
    assert "ridge intensity            295 FLOP/B" in out
    assert "layer weights              2.36 M parameters" in out  # 768 x 3072
