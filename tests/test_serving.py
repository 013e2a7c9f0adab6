"""Serving: every figure derived by hand from the formulas of docs/serving-scaling-energy.md; the 7 B example model
(32 layers, width 4,096, vocabulary 128,000) sized from its shape alone; the KV cache checked
against the tensors transformers actually caches."""

from __future__ import annotations

import math

import pytest

from trainplan.accounts import serving
from trainplan.errors import UserError

# The 7 B example model, from its shape alone (docs/parameter-counts.md: 12 d^2 per layer + V d).
L, D, V = 32, 4096, 128_000
HEADS = D // 128  # 128-wide heads, the Llama convention: 32 heads
HEAD_DIM = D / HEADS  # 128
PARAMS_7B = 12 * D**2 * L + V * D  # 6,442,450,944 + 524,288,000

H100_PEAK = 989.5e12  # FLOP/s bf16 dense (the catalogue, catalogue/accelerators.toml)
H100_MEMORY = 81559 * 2**20  # bytes, catalogue
H100_BW = 3.35e12  # bytes/s


def model(kv_heads: int = HEADS) -> serving.ServedModel:
    return serving.ServedModel(params=PARAMS_7B, layers=L, kv_heads=kv_heads, head_dim=HEAD_DIM, name="7B")


def estimate(**kw: object) -> serving.ServingEstimate:
    args: dict[str, object] = dict(
        dtype="bf16", context=4096, tokens_per_request=500, peak_flops=H100_PEAK, device_memory=H100_MEMORY,
        memory_bandwidth=H100_BW, dollars_per_device_hour=3.0, mfu=0.3, requests_per_day=1e6,
        training_cost=1e6)
    m = kw.pop("model", model())
    args.update(kw)
    return serving.estimate_serving(m, **args)  # type: ignore[arg-type]


def test_param_split_of_the_7b_shape() -> None:
    assert 12 * D**2 * L == 6_442_450_944
    assert V * D == 524_288_000
    assert PARAMS_7B == 6_966_738_944


@pytest.mark.parametrize("dtype,per_param", [("fp32", 4), ("bf16", 2), ("fp16", 2), ("int8", 1), ("int4", 0.5)])
def test_weights_resident_per_dtype(dtype: str, per_param: float) -> None:
    assert serving.weights_bytes(PARAMS_7B, dtype) == PARAMS_7B * per_param
    assert estimate(dtype=dtype).weights_bytes == PARAMS_7B * per_param


def test_kv_bytes_per_token_mha_and_gqa() -> None:
    # 2 (K, V) x 32 layers x kv_heads x 128 x 2 bytes (bf16)
    assert serving.kv_bytes_per_token(L, 32, 128, 2) == 2 * 32 * 32 * 128 * 2 == 524_288
    assert serving.kv_bytes_per_token(L, 8, 128, 2) == 2 * 32 * 8 * 128 * 2 == 131_072
    mha, gqa = estimate(), estimate(model=model(kv_heads=8))
    assert mha.kv_bytes_per_token == 524_288 and gqa.kv_bytes_per_token == 131_072
    assert mha.kv_bytes_per_sequence == 524_288 * 4096
    # the KV cache stays bf16 when the weights are int4
    assert estimate(dtype="int4").kv_bytes_per_token == 524_288


def test_largest_batch_and_throughput_by_hand() -> None:
    e = estimate(model=model(kv_heads=8))
    w = 2 * PARAMS_7B
    kv_seq = 131_072 * 4096
    usable = H100_MEMORY * 0.9
    max_batch = math.floor((usable - w) / kv_seq)
    assert e.devices == 1 and e.fits
    assert e.max_batch == max_batch == 117
    assert e.batch == max_batch  # no batch given: the largest that fits
    t_compute = 2 * PARAMS_7B * max_batch / (H100_PEAK * 0.3)
    t_memory = (w + max_batch * kv_seq) / H100_BW
    assert e.compute_seconds_per_step == pytest.approx(t_compute)
    assert e.memory_seconds_per_step == pytest.approx(t_memory)
    assert e.tokens_per_second == pytest.approx(max_batch / max(t_compute, t_memory))
    assert e.bound == "memory"
    rps = e.tokens_per_second / 500
    assert e.requests_per_second == pytest.approx(rps)
    assert e.cost_per_request == pytest.approx(3.0 / 3600 / rps)
    assert e.cost_per_million_requests == pytest.approx(3.0 / 3600 / rps * 1e6)
    replicas = math.ceil(1e6 / 86400 / rps)
    assert e.replicas == replicas
    assert e.serving_cost_per_day == pytest.approx(replicas * 3.0 * 24)
    assert e.crossover_days == pytest.approx(1e6 / (replicas * 3.0 * 24))


def test_small_batch_is_on_the_bandwidth_roofline() -> None:
    e = estimate(batch=1)
    assert e.bound == "memory"
    assert e.tokens_per_second == pytest.approx(H100_BW / (2 * PARAMS_7B + 524_288 * 4096))


def test_short_context_large_batch_turns_compute_bound() -> None:
    # with a short context the KV read is small, so a large batch is compute-bound
    e = estimate(model=model(kv_heads=8), context=128)
    f = 2 * PARAMS_7B
    kv_seq = 131_072 * 128
    b_star = (2 * PARAMS_7B / H100_BW) / (f / (H100_PEAK * 0.3) - kv_seq / H100_BW)
    assert e.compute_bound_batch == pytest.approx(b_star)
    assert e.batch > b_star and e.bound == "compute"
    assert e.tokens_per_second == pytest.approx(H100_PEAK * 0.3 / f)
    below = estimate(model=model(kv_heads=8), context=128, batch=math.floor(b_star))
    assert below.bound == "memory"


def test_requested_batch_is_capped_by_memory() -> None:
    assert estimate(batch=10_000, devices=1).batch == estimate().max_batch
    assert estimate(batch=4).batch == 4


def test_a_model_too_big_for_one_device_gets_more() -> None:
    big = serving.ServedModel(params=70e9, layers=80, kv_heads=8, head_dim=128)
    e = estimate(model=big)
    need = math.ceil((2 * 70e9 + 2 * 80 * 8 * 128 * 2 * 4096) / (H100_MEMORY * 0.9))
    assert e.devices == need == 2
    assert e.dollars_per_hour == 2 * 3.0
    forced = estimate(model=big, devices=1)
    assert not forced.fits and forced.tokens_per_second == 0 and forced.max_batch == 0
    assert math.isinf(forced.cost_per_request) and math.isinf(forced.crossover_days)
    assert forced.as_dict()["cost_per_request"] is None


def test_a_known_shape_gives_no_missing_reason() -> None:
    d = estimate().as_dict()
    assert "kv_cache_missing" not in d and d["max_batch_bound"] == "weights and KV cache"


def test_crossover_days() -> None:
    assert serving.crossover_days(1e6, 1e4) == 100
    assert math.isinf(serving.crossover_days(1e6, 0))
    e = estimate(requests_per_day=0)
    assert e.replicas == 0 and math.isinf(e.crossover_days)


def test_ladder_is_one_row_per_model_and_dtype() -> None:
    models = [model(8), serving.ServedModel(params=70e9, layers=80, kv_heads=8, head_dim=128, name="70B")]
    rows = serving.serving_ladder(models, ("bf16", "int8", "int4"), context=4096, tokens_per_request=500,
                                  peak_flops=H100_PEAK, device_memory=H100_MEMORY, memory_bandwidth=H100_BW,
                                  dollars_per_device_hour=3.0, mfu=0.3, requests_per_day=1e6)
    assert [(r.name, r.dtype) for r in rows] == [
        ("7B", "bf16"), ("7B", "int8"), ("7B", "int4"), ("70B", "bf16"), ("70B", "int8"), ("70B", "int4")]
    # smaller weights: more room for KV, faster bandwidth-bound decode, cheaper requests
    assert rows[0].max_batch < rows[1].max_batch < rows[2].max_batch
    assert rows[0].cost_per_request > rows[1].cost_per_request > rows[2].cost_per_request
    assert rows[3].devices == 2 and rows[4].devices == 1


def test_bad_input() -> None:
    with pytest.raises(UserError, match="serving.dtype"):
        estimate(dtype="fp8x")
    with pytest.raises(UserError, match="serving.mfu"):
        estimate(mfu=1.5)
    with pytest.raises(UserError, match="serving.batch"):
        estimate(batch=0)
    with pytest.raises(UserError, match="serving.context"):
        estimate(context=0)


@pytest.mark.slow
def test_kv_cache_matches_transformers() -> None:
    """The bytes transformers keeps in its cache per token equal 2 L kv_heads head_dim bytes."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                   num_attention_heads=8, num_key_value_heads=2, vocab_size=100)
    torch.manual_seed(0)
    m = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    tokens = 5
    with torch.no_grad():
        out = m(torch.zeros(1, tokens, dtype=torch.long), use_cache=True)
    cache = out.past_key_values
    tensors = []
    for layer in getattr(cache, "layers", []):
        tensors += [layer.keys, layer.values]
    if not tensors:  # older cache layout
        tensors = list(cache.key_cache) + list(cache.value_cache)
    cached = sum(t.numel() * t.element_size() for t in tensors)
    assert cached / tokens == serving.kv_bytes_per_token(3, 2, 64 // 8, 2)


def test_devices_are_sized_for_the_requested_batch() -> None:
    big = serving.ServedModel(params=70e9, layers=80, kv_heads=8, head_dim=128)
    kv_seq = 2 * 80 * 8 * 128 * 2 * 4096
    e = estimate(model=big, batch=64)
    assert e.devices == math.ceil((2 * 70e9 + 64 * kv_seq) / (H100_MEMORY * 0.9)) == 3
    assert e.batch == 64 and e.max_batch >= 64


# ---------------------------------------------------------------- the command line (docs/index.md)


def _cli(args: list[str]) -> tuple[int, str, str]:
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "trainplan", *args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


SHAPE_7B = ["--set", "model.layers=32", "--set", "model.width=4096", "--set", "model.vocab=128000",
            "--set", "model.heads=32", "--set", "model.params=6966738944"]


def test_cli_serve_keys_match_the_account() -> None:
    import json

    sets = SHAPE_7B + ["--set", "serving.training_cost=1000000", "--set", "serving.batch=16",
                       "--set", "serving.mfu=0.3", "--set", "serving.tokens_per_request=500",
                       "--set", "serving.requests_per_day=1e6", "--set", "serving.context=4096",
                       "--set", "serving.dtype=bf16", "--set", "prices.accelerator_hour=3"]
    rc, out, err = _cli(["serve", *sets, "-f", "json"])
    assert rc == 0, err
    data = json.loads(out)
    expected = estimate(batch=16)
    for key in ("tokens_per_second", "requests_per_second", "cost_per_million_requests", "kv_bytes_per_token",
                "weights_bytes", "crossover_days"):
        assert data[key] == pytest.approx(getattr(expected, key)), key
    assert data["kv_bytes_per_token"] == 524_288 and data["weights_bytes"] == 2 * PARAMS_7B


def test_cli_serve_ladder_and_errors() -> None:
    import json

    rc, out, err = _cli(["serve", *SHAPE_7B, "--set", "serving.training_cost=1e6", "--ladder", "-f", "json"])
    assert rc == 0, err
    rows = json.loads(out)
    assert [r["dtype"] for r in rows[:4]] == ["fp32", "bf16", "int8", "int4"]
    assert {r["name"] for r in rows} >= {"workload model", "llama-3.1-8b", "llama-3.1-70b"}
    rc, _, err = _cli(["serve", "--set", "serving.dtype=int3"])
    assert rc == 2 and "serving.dtype" in err
    rc, _, err = _cli(["serve", "--format", "xml"])
    assert rc == 2 and "--format" in err


# ---------------------------------------------------------------- a model given by its parameter count alone
# Throughput and cost need only P: weights W = P x bytes per element, decode FLOPs 2 P per token. The
# KV cache needs the shape, so without one its figures are None, `kv_cache_missing` says what is
# missing, the memory time counts the weights' read only (W / BW, an upper bound on tokens/s) and the
# largest batch is bounded by weights only: the requested batch is served.

P_ONLY = 7e9


def count_only(params: float = P_ONLY) -> serving.ServedModel:
    return serving.ServedModel(params=params, layers=None, kv_heads=None, head_dim=None,
                               kv_missing="model.layers and model.width are needed")


def test_count_only_figures_by_hand() -> None:
    e = estimate(model=count_only(), batch=32)
    w = P_ONLY * 2  # bf16: 2 bytes per weight
    assert e.weights_bytes == w == 14e9
    assert e.devices == math.ceil(w / (H100_MEMORY * 0.9)) == 1
    assert e.kv_bytes_per_token is None and e.kv_bytes_per_sequence is None
    assert e.max_batch is None and e.max_batch_bound == "weights only" and e.fits
    assert e.kv_cache_missing == "model.layers and model.width are needed"
    assert e.batch == 32  # the batch asked for: nothing known caps it
    t_compute = 2 * P_ONLY * 32 / (H100_PEAK * 0.3)  # 4.48e11 / 2.9685e14 = 1.509 ms
    t_memory = w / H100_BW  # 14e9 / 3.35e12 = 4.179 ms: the weights' read only
    assert e.compute_seconds_per_step == pytest.approx(t_compute)
    assert e.memory_seconds_per_step == pytest.approx(t_memory)
    assert e.bound == "memory"
    assert e.tokens_per_second == pytest.approx(32 / t_memory) == pytest.approx(7657.142857)
    rps = 32 / t_memory / 500
    assert e.requests_per_second == pytest.approx(rps)
    assert e.cost_per_request == pytest.approx(3.0 / 3600 / rps)
    assert e.cost_per_million_requests == pytest.approx(3.0 / 3600 / rps * 1e6) == pytest.approx(54.4154229)
    assert e.replicas == math.ceil(1e6 / 86400 / rps) == 1
    assert e.crossover_days == pytest.approx(1e6 / (1 * 3.0 * 24))
    # compute time equals the weights' read at B* = (W / BW) / (2 P / (peak x MFU))
    assert e.compute_bound_batch == pytest.approx((w / H100_BW) / (2 * P_ONLY / (H100_PEAK * 0.3)))
    d = e.as_dict()
    assert d["kv_bytes_per_token"] is None and d["kv_bytes_per_sequence"] is None and d["max_batch"] is None
    assert d["kv_cache_missing"] and d["max_batch_bound"] == "weights only"


def test_count_only_large_batch_is_compute_bound_and_int4_is_a_quarter_of_fp16() -> None:
    e = estimate(model=count_only(), batch=128)  # above B* = 88.6
    assert e.bound == "compute"
    assert e.tokens_per_second == pytest.approx(H100_PEAK * 0.3 / (2 * P_ONLY))
    assert estimate(model=count_only(), batch=1, dtype="int4").weights_bytes == P_ONLY * 0.5
    assert estimate(model=count_only(), batch=1, dtype="int4").tokens_per_second == pytest.approx(
        1 / (P_ONLY * 0.5 / H100_BW))


def test_count_only_devices_hold_the_weights() -> None:
    e = estimate(model=count_only(70e9), batch=8)
    assert e.devices == math.ceil(2 * 70e9 / (H100_MEMORY * 0.9)) == 2
    assert e.dollars_per_hour == 2 * 3.0
    forced = estimate(model=count_only(70e9), batch=8, devices=1)
    assert not forced.fits and forced.tokens_per_second == 0 and forced.max_batch is None
    assert forced.as_dict()["cost_per_request"] is None


def test_count_only_needs_a_batch() -> None:
    with pytest.raises(UserError, match="serving.batch"):
        estimate(model=count_only())  # no batch and no KV cache to bound one


def test_served_model_names_what_is_missing() -> None:
    from types import SimpleNamespace

    from trainplan.planning.served import served_model

    def facts(**kw: object) -> SimpleNamespace:
        base: dict[str, object] = dict(params=7e9, active_params=7e9, layers=None, width=None, heads=None,
                                       kv_heads=None, head_dim=None)
        return SimpleNamespace(**(base | kw))

    bare = served_model(facts())
    assert not bare.kv_known and bare.kv_missing.startswith("model.layers and model.width ")
    assert "model.hf_config" in bare.kv_missing
    assert served_model(facts(layers=32)).kv_missing.startswith("model.width ")
    assert served_model(facts(width=4096, heads=32, kv_heads=8)).kv_missing.startswith("model.layers ")
    shaped = served_model(facts(layers=32, width=4096, heads=32, kv_heads=8))
    assert shaped.kv_known and shaped.kv_missing == "" and shaped.head_dim == 128 and shaped.kv_heads == 8


COUNT_ONLY_SERVING = ["--set", "serving.training_cost=1000000", "--set", "serving.batch=32",
                      "--set", "serving.mfu=0.3", "--set", "serving.tokens_per_request=500",
                      "--set", "serving.requests_per_day=1e6", "--set", "serving.context=4096",
                      "--set", "serving.dtype=bf16", "--set", "prices.accelerator_hour=3",
                      "--set", "serving.mode=decode"]  # a language model given by its count on the video workload


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from trainplan.interfaces.cli import main

    try:
        main(argv)
        code = 0
    except SystemExit as stop:
        code = int(stop.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_serve_from_a_parameter_count(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    rc, out, err = _main(["serve", "--set", "model.params=7e9", *COUNT_ONLY_SERVING, "-f", "json"], capsys)
    assert rc == 0, err
    data = json.loads(out)
    t_memory = 2 * P_ONLY / H100_BW
    assert data["weights_bytes"] == 2 * P_ONLY
    assert data["tokens_per_second"] == pytest.approx(32 / t_memory)
    assert data["cost_per_million_requests"] == pytest.approx(3.0 / 3600 / (32 / t_memory / 500) * 1e6)
    assert data["kv_bytes_per_token"] is None and data["max_batch"] is None
    assert data["kv_cache_missing"].startswith("model.layers and model.width")
    assert data["max_batch_bound"] == "weights only"
    rc, out, err = _main(["serve", "--set", "model.params=7e9", "--format", "table", *COUNT_ONLY_SERVING], capsys)
    assert rc == 0, err
    assert "KV cache                unknown: model.layers and model.width" in out
    assert "bounded by weights only" in out and "7.66 k tokens/s" in out  # 32 / t_memory, as format_figure writes it
    assert "nan" not in out and "inf" not in out and "None" not in out


def test_cli_serve_a_workload_with_only_params(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    from pathlib import Path

    toml = Path(str(tmp_path)) / "count.toml"
    toml.write_text('[model]\nparams = "7B"\n\n[serving]\nbatch = 32\n', encoding="utf-8")
    rc, out, err = _main(["serve", str(toml), "-f", "json"], capsys)
    assert rc == 0, err
    data = json.loads(out)
    assert data["params"] == 7e9 and data["weights_bytes"] == 14e9 and data["kv_bytes_per_token"] is None
    rc, out, err = _main(["serve", str(toml), "--ladder", "--format", "table"], capsys)
    assert rc == 0, err
    assert "weights only" in out and "llama-3.1-8b" in out
    # a shape gives the KV cache back, with no reason key
    rc, out, err = _main(["serve", str(toml), *SHAPE_7B[:-2], "--set", "model.params=6966738944", "-f", "json"], capsys)
    assert rc == 0, err
    data = json.loads(out)
    assert data["kv_bytes_per_token"] == 524_288 and "kv_cache_missing" not in data


def test_a_vision_encoder_is_served_one_forward_pass_a_request(capsys: pytest.CaptureFixture[str]) -> None:
    """The default workload's model (no vocabulary, video data) is served as an encoder: a request is one
    frame's (224 / 14)^2 = 256 tokens in one pass, no KV cache; 32 requests a pass on one H100.
    By hand: compute 32 x 256 x 2 P / (989.4e12 x 0.3) against the weights' read 2 P / 3.35e12."""
    import json

    from trainplan.workload.load import load_workload

    rc, out, err = _main(["serve", "-f", "json"], capsys)
    assert rc == 0, err
    assert out, (rc, err)
    data = json.loads(out)
    params = data["params"]
    peak = load_workload(None).accelerator.peak("bf16")
    t_compute = 32 * 256 * 2 * params / (peak * 0.3)
    t_memory = 2 * params / H100_BW
    assert data["mode"] == "encode" and data["tokens_per_request"] == 256
    assert data["kv_bytes_per_token"] is None and "kv_cache_missing" not in data
    assert data["tokens_per_second"] == pytest.approx(32 * 256 / max(t_compute, t_memory))
    assert data["bound"] == ("compute" if t_compute > t_memory else "memory")
    assert data["requests_per_second"] == pytest.approx(32 / max(t_compute, t_memory))
    assert data["cost_per_million_requests"] == pytest.approx(3.0 / 3600 / data["requests_per_second"] * 1e6)
    rc, out, err = _main(["serve"], capsys)
    assert "KV cache                none: an encoder" in out and "encode" in out
    # named as a decoder, the same model generates 500 tokens a request from a KV cache
    rc, out, err = _main(["serve", "--set", "serving.mode=decode", "-f", "json"], capsys)
    decoded = json.loads(out)
    assert decoded["mode"] == "decode" and decoded["tokens_per_request"] == 500 and decoded["kv_bytes_per_token"] > 0
    # a model with a vocabulary on video data is a decoder by default
    rc, out, err = _main(["serve", "--set", "model.vocab=32000", "-f", "json"], capsys)
    assert json.loads(out)["mode"] == "decode"


def test_a_replica_over_two_nodes_shares_their_nics() -> None:
    # TP 16 over two 8-GPU nodes: each node's eight ranks drive its eight NICs (50 GB/s each), 400 GB/s a
    # node, capped at the 360 GB/s inside it; a ring all-reduce of batch x width x 2 bytes over 16 ranks,
    # 2 x 15/16 of it on the wire and 2 x 15 latency steps, twice a layer
    from trainplan.accounts.serving import ServedModel, tensor_parallel_seconds

    model = ServedModel(params=70e9, layers=80, kv_heads=8, head_dim=128, heads=64, width=8192)
    seconds = tensor_parallel_seconds(model, 32, 16, (360e9, 5e-6, 8, 50e9, 1e-5))
    message = 32 * 8192 * 2
    assert seconds == pytest.approx(2 * 80 * (2 * 15 / 16 * message / 360e9 + 30 * 1e-5))
    # inside one node: NVLink's rate and latency
    inside = tensor_parallel_seconds(model, 32, 8, (360e9, 5e-6, 8, 50e9, 1e-5))
    assert inside == pytest.approx(2 * 80 * (2 * 7 / 8 * message / 360e9 + 14 * 5e-6))


def test_a_replica_given_too_few_devices_or_too_short_a_context_is_refused() -> None:
    """serving.tensor = 1 for 70.6 B parameters in bf16 (141 GB on an 85.5 GB H100) serves nothing: refused
    rather than a plan of 0 tokens/s and 0 replicas (the account itself still reports such a replica as not
    fitting, above). A request generating more tokens than serving.context holds has no room in the KV cache;
    the default 500 generated tokens stops at a shorter context."""
    from pathlib import Path

    from trainplan.errors import UserError
    from trainplan.planning.evaluate import serving_estimate, tokens_per_request
    from trainplan.workload.load import load_workload

    example = Path(__file__).resolve().parents[1] / "examples" / "llama3-70b-512gpu.toml"
    with pytest.raises(UserError, match=r"serving.tensor.*141 GB.*got 1"):
        serving_estimate(load_workload(example, ["serving.tensor=1"]))
    assert serving_estimate(load_workload(example, ["serving.tensor=2"])).fits
    # the weights fit on two devices; a million-token context's KV cache does not: the key to lower is the
    # context, and the longest that fits is (2 x memory x 0.9 - 2 bytes x 70,553,706,496) / (80 layers x 8 KV
    # heads x 128 x K and V x 2 bytes) = 39,154 tokens on the catalogue's 85,520,809,984-byte H100
    w2 = load_workload(example, ["serving.tensor=2", "serving.context=1000000"])
    longest = int((2 * w2.accelerator.memory * 0.9 - 2 * 70_553_706_496) / (80 * 8 * 128 * 2 * 2))
    assert longest == 39_154
    with pytest.raises(UserError, match=rf"serving.context: expected at most {longest:,} tokens.*got 1,000,000"):
        serving_estimate(w2)
    with pytest.raises(UserError, match=r"serving.tokens_per_request: expected at most serving.context \(16\)"):
        serving_estimate(load_workload(example, ["serving.context=16", "serving.tokens_per_request=100000"]))
    short = load_workload(example, ["serving.context=256"])
    assert tokens_per_request(short, "decode") == 256
