"""Inputs written the way people write them are read as they meant, or refused in one line.

Each natural form of issue 15, with the value it must become worked out by hand in the test:
a headroom multiplier, "8k" sequence lengths, byte sizes without a unit, durations in hours,
bit and byte rates, enumerations and catalogue names in any case, and model.params beside
model.hf_config. docs/workload.md lists the same forms.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trainplan import units
from trainplan.errors import UserError, nearest_name
from trainplan.interfaces.cli import main
from trainplan.planning.evaluate import build_report
from trainplan.workload.load import load_workload

CONFIGS = Path(__file__).parent / "fixtures" / "hf_configs"
# Llama-2-7B by hand: 32 blocks of 4 d^2 attention + 3 d f SwiGLU + 2 d RMSNorm, the embedding and the
# untied head (V d each) and the final norm (d), with d = 4096, f = 11008, V = 32000.
LLAMA2_7B = 32 * (4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096) + 2 * 32000 * 4096 + 4096


def planned(*sets: str, path: Path | None = None):  # noqa: ANN201 - a Workload
    return load_workload(path, list(sets))


def refused(*sets: str, path: Path | None = None) -> UserError:
    with pytest.raises(UserError) as err:
        load_workload(path, list(sets))
    return err.value


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as stop:
        code = int(stop.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- headroom: a multiplier, never 125 %


@pytest.mark.parametrize("written,fraction", [
    ("1.25", 0.25),  # a multiplier, as every spreadsheet writes it: 25 % kept free
    ('"1.25x"', 0.25),
    ('"x1.5"', 0.5),
    ("1", 0.0),  # a multiplier of one keeps nothing free
    ('"25 %"', 0.25),  # a percentage
    ("0.1", 0.1),  # a plain number below one is the fraction itself
    ('"125 %"', 1.25),  # 125 % only when written as a percentage
])
def test_headroom_forms(written: str, fraction: float) -> None:
    assert planned(f"cluster.headroom={written}").cluster.headroom == pytest.approx(fraction, rel=1e-12)


def test_headroom_multiplier_scales_memory_by_itself() -> None:
    """per device = (state + activations + buffers) x (1 + headroom): 1.25 multiplies by 1.25, not 2.25."""
    none = build_report(planned("cluster.headroom=0"))["memory"]["per_device_bytes"]
    multiplier = build_report(planned("cluster.headroom=1.25"))["memory"]["per_device_bytes"]
    percent = build_report(planned('cluster.headroom="25 %"'))["memory"]["per_device_bytes"]
    assert multiplier == pytest.approx(1.25 * none, rel=1e-12)
    assert multiplier == pytest.approx(percent, rel=1e-12)


def test_headroom_multiplier_below_one_is_refused() -> None:
    assert refused('cluster.headroom="0.8x"').where == "cluster.headroom"


# ---------------------------------------------------------------- sequence lengths: 8k is 8,192


@pytest.mark.parametrize("written,tokens", [
    ('"8k"', 8 * 1024), ('"8K"', 8192), ('"128k"', 128 * 1024), ('"128k tokens"', 131072), ('"1M"', 1024**2),
    ('"4.5k"', 4608), ("8000", 8000), ("2048", 2048), ('"8Ki"', 8192),
])
def test_sequence_length_forms(written: str, tokens: int) -> None:
    w = planned(f"training.seq_len={written}", f"serving.context={written}")
    assert w.training.seq_len == tokens and w.serving.context == tokens
    assert isinstance(w.training.seq_len, int)


def test_sequence_length_not_whole_is_refused() -> None:
    assert refused('training.seq_len="1.0001k"').where == "training.seq_len"  # 1024.1024 tokens


def test_sequence_length_changes_tokens_per_step() -> None:
    """Tokens per step = devices x micro-batch x sequence x accumulation = 1 x 8 x 8,192 x 1."""
    report = build_report(planned('training.seq_len="8k"'))
    assert report["compute"]["tokens_per_step"] == 8 * 8192


# ---------------------------------------------------------------- sizes: a plain number below 1 MB is refused


@pytest.mark.parametrize("key", ["cluster.accelerator.memory", "cluster.runtime_buffers"])
def test_size_without_unit_is_refused_with_a_suggestion(key: str) -> None:
    err = refused(f"{key}=80")
    assert err.where == key
    assert "80 bytes? write 80 GB" in err.expected


@pytest.mark.parametrize("written,size", [
    ('"80 GB"', 80e9), ('"80 GiB"', 80 * 2**30), ("80e9", 80e9), ('"512 MB"', 512e6),
])
def test_size_forms(written: str, size: float) -> None:
    assert planned(f"cluster.accelerator.memory={written}").accelerator.memory == size


def test_bytes_written_with_their_unit_are_read_as_bytes() -> None:
    """'80 B' is 80 bytes, not refused as a missing unit (the plausible range of the card's memory,
    docs/trust.md, is a separate check: it is met by buffers, which may be small)."""
    assert planned('cluster.runtime_buffers="80 B"').cluster.runtime_buffers == 80.0


def test_zero_buffers_is_still_zero() -> None:
    assert planned("cluster.runtime_buffers=0").cluster.runtime_buffers == 0.0
    assert planned('cluster.runtime_buffers="2 GB"').cluster.runtime_buffers == 2e9


def test_size_without_unit_cli_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["plan", "--set", "cluster.accelerator.memory=80", "--format", "json"], capsys)
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0
    assert err.startswith("trainplan: cluster.accelerator.memory: 80 bytes? write 80 GB")


def test_bytes_per_token_is_small_on_purpose() -> None:
    assert planned('data.bytes_per_token="2 B"').data.bytes_per_token == 2.0
    assert planned('data.bytes_per_token="2 bytes/token"').data.bytes_per_token == 2.0
    assert planned("data.bytes_per_token=2").data.bytes_per_token == 2.0


# ---------------------------------------------------------------- durations and counts take units


@pytest.mark.parametrize("written,hours", [
    ('"1000 h"', 1000.0), ('"1000 hours"', 1000.0), ("1000", 1000.0), ('"90 min"', 1.5), ('"2 d"', 48.0),
    ('"7200 s"', 2.0),
])
def test_data_hours_forms(written: str, hours: float) -> None:
    assert planned(f"data.hours={written}").data.hours == pytest.approx(hours, rel=1e-12)


# Video tokens of the default workload = hours x 3600 x fps x cameras x tokens per frame x epochs
# = 1000 x 3600 x 30 x 3 x floor(224 / 14)^2 x 1.
DEFAULT_TOKENS = 1000 * 3600 * 30 * 3 * (224 // 14) ** 2


def test_data_hours_with_unit_plans_the_same_tokens() -> None:
    """FLOPs = 6 P D with the default 93 M parameters and D from 1,000 hours written "1000 h"."""
    flops = build_report(planned('data.hours="1000 h"'))["compute"]["flops"]
    assert flops == pytest.approx(6 * 93e6 * DEFAULT_TOKENS, rel=1e-12)


@pytest.mark.parametrize("key,written,value", [
    ("cluster.cores", '"24 cores"', 24.0),
    ("training.epochs", '"3 epochs"', 3.0),
    ("prices.attempts", '"2 attempts"', 2.0),
    ("serving.requests_per_day", '"1M requests/day"', 1e6),
    ("serving.requests_per_day", '"250k"', 250e3),
    ("prices.storage_months", '"1 year"', 12.0),
    ("prices.storage_months", '"3 months"', 3.0),
    ("prices.storage_months", "2", 2.0),
    ("data.tokenizer_rate", '"1M tokens/s"', 1e6),
    ("data.fps", '"30 frames/s"', 30.0),
])
def test_counted_forms(key: str, written: str, value: float) -> None:
    section, name = key.split(".")
    assert getattr(getattr(planned(f"{key}={written}"), section), name) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("key,written,value", [
    ("training.tokens", '"2T tokens"', 2e12),
    ("training.tokens", '"3 Tokens"', 3.0),  # the noun, not the T suffix
    ("model.params", '"93M params"', 93e6),
    ("data.side", '"224 px"', 224),
    ("model.layers", '"24 layers"', 24),
])
def test_counts_may_name_what_they_count(key: str, written: str, value: float) -> None:
    section, name = key.split(".")
    extra = ["model.width=1024"] if key == "model.layers" else []
    assert getattr(getattr(planned(f"{key}={written}", *extra), section), name) == value


def test_count_refuses_a_unit_of_another_dimension() -> None:
    assert refused('training.tokens="8 MB"').where == "training.tokens"


@pytest.mark.parametrize("key,written,value", [
    ("prices.accelerator_hour", '"$3/h"', 3.0),
    ("prices.accelerator_hour", '"$2.50 per hour"', 2.5),
    ("prices.accelerator_hour", '"$2/gpu-hour"', 2.0),
    ("prices.core_hour", '"$0.05/core-hour"', 0.05),
    ("prices.storage_gb_month", '"$0.023/GB-month"', 0.023),
    ("prices.transfer_gb", '"$0.01 per GB"', 0.01),
    ("prices.data_hour", '"$1,234.50/h"', 1234.5),
    ("prices.accelerator_hour", "3", 3.0),
])
def test_prices_may_name_what_they_are_per(key: str, written: str, value: float) -> None:
    section, name = key.split(".")
    assert getattr(getattr(planned(f"{key}={written}"), section), name) == pytest.approx(value, rel=1e-12)


def test_price_per_the_wrong_thing_is_refused() -> None:
    assert refused('prices.transfer_gb="$0.01/h"').where == "prices.transfer_gb"


def test_storage_months_in_days() -> None:
    """A month is a twelfth of 365.25 days: 365.25 d is 12 months, 30.4375 d one."""
    assert planned('prices.storage_months="365.25 d"').prices.storage_months == pytest.approx(12.0, rel=1e-12)
    assert planned('prices.storage_months="30.4375 d"').prices.storage_months == pytest.approx(1.0, rel=1e-12)


# ---------------------------------------------------------------- bit and byte rates


@pytest.mark.parametrize("key,written,value", [
    ("cluster.link", '"400 Gbit/s"', 400e9 / 8),  # a network card: 50 GB/s
    ("cluster.link", '"10 Gbps"', 10e9 / 8),  # 1.25 GB/s
    ("cluster.link", '"25 GB/s"', 25e9),
    ("cluster.link", '"1.5 GBps"', 1.5e9),
    ("cluster.interconnect", '"400 Gbit/s"', 50e9),
    ("cluster.host_to_device", '"256 Gbit/s"', 32e9),
    ("data.bitrate", '"8 Mbit/s"', 8e6),
    ("data.bitrate", '"8 Mbps"', 8e6),
    ("data.bitrate", '"1 MB/s"', 8e6),  # a byte rate for a bit-rate key: x 8
])
def test_rate_forms(key: str, written: str, value: float) -> None:
    section, name = key.split(".")
    assert getattr(getattr(planned(f"{key}={written}"), section), name) == pytest.approx(value, rel=1e-12)


def test_bit_rate_accelerator_figure() -> None:
    w = planned('cluster.accelerator.interconnect="400 Gbit/s"')
    assert w.accelerator.interconnect == 50e9


# ---------------------------------------------------------------- enumerations and catalogue names


@pytest.mark.parametrize("key,written,canonical", [
    ("training.optimizer", "AdamW", "adamw"),
    ("training.optimizer", "SGD", "sgd"),
    ("training.precision", "BF16", "bf16"),
    ("training.recompute", "Selective", "selective"),
    ("data.access", "Random", "random"),
    ("serving.dtype", "INT8", "int8"),
    ("model.family", "GPT-NeoX", "gpt_neox"),
    ("model.family", "Llama", "llama"),
])
def test_enumerations_in_any_case(key: str, written: str, canonical: str) -> None:
    section, name = key.split(".")
    extra = ["model.layers=2", "model.width=128", "model.heads=2"] if key == "model.family" else []
    assert getattr(getattr(planned(f'{key}="{written}"', *extra), section), name) == canonical


@pytest.mark.parametrize("key,written,nearest", [
    ("training.optimizer", "adam-w", "adamw"),
    ("training.recompute", "Selectiv", "selective"),
    ("data.access", "sequental", "sequential"),
])
def test_wrong_enumeration_suggests_the_nearest(key: str, written: str, nearest: str) -> None:
    err = refused(f'{key}="{written}"')
    assert err.where == key
    assert f"did you mean {nearest!r}" in err.expected


def test_region_in_any_case_and_nearest() -> None:
    """France's row of the shipped grid table, 56 g/kWh, read by 'FR' as by 'fr'."""
    upper = build_report(planned('energy.region="FR"'))["energy"]
    lower = build_report(planned('energy.region="fr"'))["energy"]
    assert upper["grid_g_per_kwh"] == lower["grid_g_per_kwh"] == 56
    # blocking saves: a 93 M x 14 B checkpoint at 1 GB/s every hour stretches the wall time by 1.302 s / 3600 s
    saves = 1 + 93e6 * 14 / 1e9 / 3600
    assert upper["kg_co2"] == pytest.approx(700 * 93.75 * saves * 1.2 / 1000 * 56 / 1000, rel=1e-12)  # 4.41 kg
    with pytest.raises(UserError, match="did you mean 'fr'"):
        build_report(planned('energy.region="fra"'))


@pytest.mark.parametrize("written,key", [
    ("H100-SXM", "h100-sxm"), ("h100-SXM", "h100-sxm"), ("A100-SXM-80GB", "a100-sxm-80gb"), ("MI300X", "mi300x"),
])
def test_accelerator_names_in_any_case(written: str, key: str) -> None:
    assert planned(f'cluster.accelerator="{written}"').accelerator.key == key


@pytest.mark.parametrize("written,nearest", [
    ("H100", "h100-sxm"),  # the name H100 begins, not the look-alike h200
    ("h100", "h100-sxm"),
    ("A100", "a100-sxm-80gb"),
    ("mi300", "mi300x"),
    ("h210", "h200"),  # no name begins with it: the closest spelling
])
def test_wrong_accelerator_suggests_the_nearest(written: str, nearest: str) -> None:
    err = refused(f'cluster.accelerator="{written}"')
    assert err.where == "cluster.accelerator"
    assert f"did you mean {nearest!r}" in err.expected


def test_nearest_name_rules() -> None:
    names = ["h100-sxm", "h200", "a100-sxm-80gb"]
    assert nearest_name("H100", names) == "h100-sxm"
    assert nearest_name("h100 sxm", names) == "h100-sxm"
    assert nearest_name("zzzz", names) is None
    assert nearest_name("", names) is None


# ---------------------------------------------------------------- model.params beside model.hf_config


def _config_workload(tmp_path: Path, config: str, params: str | None = None) -> Path:
    body = f'[model]\nhf_config = "{CONFIGS / config}"\n'
    if params is not None:
        body += f'params = "{params}"\n'
    path = tmp_path / "w.toml"
    path.write_text(body)
    return path


def test_llama_count_by_hand() -> None:
    assert LLAMA2_7B == 6_738_415_616


def test_params_agreeing_with_config_plans_the_exact_count(tmp_path: Path) -> None:
    """7B is 3.9 % from 6,738,415,616: within the 10 % tolerance, so the config's exact count is planned."""
    w = load_workload(_config_workload(tmp_path, "llama-2-7b.json", "7B"))
    report = build_report(w)
    # the config's count is planned (compute.flops now adds attention to 6 N: docs/memory-and-flops.md)
    assert report["workload"]["params"] == LLAMA2_7B
    row = report["assumptions"]["model.params"]
    assert row["value"] == LLAMA2_7B and row["provenance"] == "derived"
    assert "agrees" in row["source"]


@pytest.mark.parametrize("params", ["13B", "6B", "7.5B"])  # 92.9 %, 11.0 %, 11.3 % off
def test_params_disagreeing_with_config_is_refused(tmp_path: Path, params: str) -> None:
    err = refused(path=_config_workload(tmp_path, "llama-2-7b.json", params))
    assert err.where == "model.params"
    assert "6,738,415,616" in err.expected and "10 %" in err.expected


def test_params_set_beside_config_is_refused_on_the_command_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _config_workload(tmp_path, "llama-2-7b.json")
    code, out, err = run_cli(["plan", str(path), "--set", "model.params=13B", "--format", "json"], capsys)
    assert code == 2 and out == ""
    assert err.startswith("trainplan: model.params: expected a count within 10 %")


def test_mixture_of_experts_is_named_by_total_or_active(tmp_path: Path) -> None:
    """Mixtral-8x7B: 46,702,792,704 stored, 12,879,925,248 active (test_params checks both against
    transformers); 47B is 0.6 % off the first, 13B 0.9 % off the second, 30B far from both."""
    for params in ("47B", "13B"):
        w = load_workload(_config_workload(tmp_path, "mixtral-8x7b.json", params))
        assert build_report(w)["assumptions"]["model.params"]["value"] == 46_702_792_704
    assert refused(path=_config_workload(tmp_path, "mixtral-8x7b.json", "30B")).where == "model.params"


def test_assumptions_describe_the_config_model(tmp_path: Path) -> None:
    """With a config.json alone the table shows Llama-2-7B, not the default 93 M ViT."""
    rows = build_report(load_workload(_config_workload(tmp_path, "llama-2-7b.json")))["assumptions"]
    expected = {"model.params": LLAMA2_7B, "model.layers": 32, "model.width": 4096, "model.vocab": 32000,
                "model.ffn_width": 11008, "model.heads": 32, "model.kv_heads": 32, "model.family": "llama",
                "model.tied": False}
    for key, value in expected.items():
        assert rows[key]["value"] == value, key
        assert rows[key]["provenance"] == "derived" and "llama-2-7b.json" in rows[key]["source"], key


def test_assumptions_describe_a_shape_model() -> None:
    """A shape alone, standard block without vocabulary: 12 d^2 L = 12 x 1024^2 x 24 = 301,989,888."""
    rows = build_report(planned("model.layers=24", "model.width=1024"))["assumptions"]
    assert rows["model.params"]["value"] == 12 * 1024**2 * 24
    assert rows["model.params"]["provenance"] == "derived"
    assert rows["model.heads"]["value"] == 1024 // 64


# ---------------------------------------------------------------- the readers themselves


def test_parse_size_reads_units_and_zero() -> None:
    assert units.parse_size("80 GB", "k") == 80e9
    assert units.parse_size(0, "k") == 0.0
    assert units.parse_size(2e9, "k") == 2e9
    with pytest.raises(UserError, match="999999 bytes"):
        units.parse_size(999_999, "k")


def test_format_sequence_length_round_trips() -> None:
    assert units.format_quantity(8192, "sequence_length") == "8192"
    assert units.parse(units.format_quantity(131072, "sequence_length"), "sequence_length") == 131072


def test_config_relative_to_the_workload_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/llama2-7b-pretrain.toml names configs/llama-2-7b.json beside it; from another folder,
    7B beside it still agrees and the exact count is planned."""
    monkeypatch.chdir(tmp_path)
    example = Path(__file__).resolve().parents[1] / "examples" / "llama2-7b-pretrain.toml"
    rows = build_report(load_workload(example, ["model.params=7B"]))["assumptions"]
    assert rows["model.params"]["value"] == LLAMA2_7B
