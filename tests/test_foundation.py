"""The foundation's accounts, checked against figures derived by hand from docs/accounts.md,
and the published worked example (issue 2) to its printed precision."""

import math

import pytest

from trainplan.accounts import compute
from trainplan.accounts import memory
from trainplan.accounts import storage
from trainplan.catalogue.accelerators import accelerators, resolve_accelerator
from trainplan.catalogue.dtypes import state_bytes_per_param
from trainplan.planning.evaluate import build_report
from trainplan.workload.load import load_workload

from conftest import EXAMPLES


def test_worked_example_to_printed_precision(plan_json):
    r = plan_json(str(EXAMPLES / "finetune-1b.toml"))
    c, m, n, s = r["compute"], r["memory"], r["network"], r["storage"]
    assert c["steps"] == 61036
    assert round(c["seconds"] / 3600, 1) == 8.7
    assert round(c["seconds_per_step"], 2) == 0.51
    assert round(m["state_bytes"] / 1e9) == 16
    assert round(m["activation_bytes"] / 1e9, 2) == 2.15
    assert round(m["per_device_bytes"] / 1e9, 1) == 25.2 and m["fits"] is True
    assert round(n["ring_bytes_per_step"] / 1e9) == 3
    assert round(n["floor_seconds_per_step"], 2) == 0.12
    assert round(s["data_bytes"] / 1e9) == 4
    assert round(s["checkpoint_bytes"] / 1e9) == 14 and round(s["checkpoints_bytes"] / 1e9) == 42
    assert round(s["save_seconds"]) == 14
    assert round(s["save_share"] * 100, 1) == 0.4


def _plan(*sets):  # noqa: ANN002, ANN202
    return build_report(load_workload(None, list(sets)))


# 7 B parameters by count (no shape: 6 P FLOPs a token), 2e12 tokens, 64 H100s (bf16 989.5 TFLOP/s) at
# MFU 0.45 and scaling efficiency 0.85, b 4, S 4096, 2 micro-batches; links fast enough that the
# gradient sync hides in backward
SEVEN_B = ["model.params=7e9", "training.tokens=2e12", "cluster.count=64", "training.micro_batch=4",
           "training.seq_len=4096", "training.grad_accum=2", "cluster.mfu=0.45", "cluster.scaling_efficiency=0.85",
           "data.kind=tokens", "cluster.node_link=10 TB/s"]


def test_compute_by_hand():
    c = _plan(*SEVEN_B)["compute"]
    assert c["flops"] == pytest.approx(6 * 7e9 * 2e12)
    rate = 64 * 989.5e12 * 0.45 * 0.85
    assert c["seconds"] == pytest.approx(6 * 7e9 * 2e12 / rate)
    assert c["tokens_per_step"] == 64 * 4 * 4096 * 2
    assert c["steps"] == math.ceil(2e12 / (64 * 4 * 4096 * 2))
    assert c["scaling_applied"] is True
    # the MFU convention: model FLOPs, so full recomputation neither adds FLOPs nor slows the step at a given MFU
    full = _plan(*SEVEN_B, "training.recompute=full")["compute"]
    assert full["flops"] == pytest.approx(6 * 7e9 * 2e12) and full["seconds"] == pytest.approx(c["seconds"])
    assert full["flops_per_token_executed"] == pytest.approx(8 * 7e9)
    # an end-to-end measured MFU already contains the scaling loss
    e2e = _plan(*SEVEN_B, "cluster.mfu_end_to_end=true")["compute"]
    assert e2e["sustained_flops"] == pytest.approx(64 * 989.5e12 * 0.45)
    assert compute.inference_flops_per_token(7e9) == 14e9


def test_state_bytes_per_param():
    assert state_bytes_per_param("bf16", "adamw").total == 16
    assert state_bytes_per_param("fp32", "adam").total == 16
    assert state_bytes_per_param("bf16", "adamw").restart == 14
    # SGD with momentum halves the optimizer state (8 -> 4 bytes)
    assert state_bytes_per_param("bf16", "sgd").optimizer == state_bytes_per_param("bf16", "adam").optimizer / 2


@pytest.mark.parametrize("zero,expected", [
    # DeepSpeed >= 0.16's estimators (estimate_zero2/zero3_model_states_mem_needs, GPU only), bytes per
    # parameter on 8 devices: none 2 + 2 + 12; ZeRO-1/2 2 + 18/8 (one optimizer for both stages: 16-bit
    # weights whole, the 16-bit gradients, an fp32 gradient partition, master and moments partitioned);
    # ZeRO-3 18/8 (no largest layer is known without a shape)
    (0, 2 + 2 + 12),
    (1, 2 + 18 / 8),
    (2, 2 + 18 / 8),
    (3, 18 / 8),
])
def test_zero_stages_by_hand(zero, expected):
    m = _plan("model.params=1e9", "cluster.count=8", f"training.zero={zero}", "data.kind=tokens",
              "training.tokens=1e9")["memory"]
    assert m["state_bytes"] == pytest.approx(expected * 1e9)


def test_activations_and_recompute():
    # b S d bytes L k = 4 * 4096 * 4096 * 2 * 32 * 17
    assert memory.activation_bytes(4, 4096, 4096, 32, 2, 17) == 4 * 4096 * 4096 * 2 * 32 * 17
    assert memory.retained_tensors(17, "full", 0.5) == 1
    assert memory.retained_tensors(17, "selective", 23 / 34) == pytest.approx(11.5)
    assert memory.retained_tensors(17, "none", 0.5) == 17
    # and the plan's memory table carries that figure for a shape of the standard family
    m = _plan("model.params=1e9", "model.layers=32", "model.width=4096", "training.micro_batch=4",
              "training.seq_len=4096", "training.saved_tensors_per_layer=17", "data.kind=tokens",
              "training.tokens=1e9")["memory"]
    assert m["activation_bytes"] == pytest.approx(4 * 4096 * 4096 * 2 * 32 * 17)


def test_devices_to_train_and_fits():
    # 70 B params: 1,120 GB of state; 80 GB cards, no shape (no activations), 2 GB buffers, 10 % headroom
    m = _plan("model.params=70e9", "cluster.accelerator={memory = \"80 GB\", peak_flops = \"989 TFLOPS\"}",
              "data.kind=tokens", "training.tokens=1e9")["memory"]
    assert not m["fits"]
    usable = 80e9 / 1.1 - 2e9
    assert m["devices_to_train"] == math.ceil(70e9 * 16 / usable)
    assert m["devices_to_run"] == math.ceil(70e9 * 2 / usable)
    assert m["per_device_bytes"] == pytest.approx((70e9 * 16 + 2e9) * 1.1)


def test_ring_allreduce_and_an_exposed_sync_in_the_wall_time(plan_json):
    # the worked example: 2 GB of gradients over 4 devices, 2 x 3/4 x 2 GB = 3 GB, 0.12 s at 25 GB/s,
    # hidden in the backward pass (2/3 of 0.512 s)
    r = plan_json(str(EXAMPLES / "finetune-1b.toml"))
    n = r["network"]
    assert n["ring_bytes_per_step"] == pytest.approx(3e9) and n["floor_seconds_per_step"] == pytest.approx(0.12)
    assert n["verdict"] == "overlap" and n["exposed_seconds_per_step"] == 0
    # at 1 GB/s it no longer hides: the step grows by what the backward pass does not cover, and the
    # wall time with it. The sync: 3 GB over the tier's achieved bus bandwidth (1 GB/s x the default
    # platform's intra-node efficiency, catalogue/interconnect.toml) plus 2 (N - 1) hop latencies
    from trainplan.catalogue.interconnect import platform

    tier = platform("custom").intra
    slow = plan_json(str(EXAMPLES / "finetune-1b.toml"), "--set", "cluster.interconnect=1 GB/s")
    sync = 3e9 / (1e9 * tier.efficiency) + 2 * 3 * tier.latency
    step = 6 * 1e9 * 16384 / (4 * 200e12 * 0.3 * 0.8)
    assert slow["network"]["sync_seconds_per_step"] == pytest.approx(sync, rel=1e-6)
    assert slow["network"]["verdict"] == "bound"
    assert slow["compute"]["seconds_per_step"] == pytest.approx(step + sync - step * 2 / 3, rel=1e-6)
    assert slow["compute"]["wall_seconds"] / r["compute"]["wall_seconds"] == pytest.approx(
        (step + sync - step * 2 / 3) / step, rel=1e-6)


def test_storage_by_hand():
    a = storage.storage_account(4e9, 1e9, 14, 3, 2, 1, 2, 1e9, 3600, 31250, 1)
    assert a.retained_bytes == (4e9 + 42e9 + 2e9) * 2
    assert a.save_seconds == 14 and a.save_share == pytest.approx(14 / 3600)


def test_catalogue_has_the_required_entries():
    cat = accelerators()
    assert cat["a100-sxm-80gb"].peak("bf16") == 312e12 and cat["a100-sxm-80gb"].video_decoders == 5
    assert cat["h100-sxm"].peak("bf16") == 989.5e12 and cat["h100-sxm"].video_decoders == 7
    for key in ("h200", "b200", "mi300x", "cpu-core"):
        assert cat[key].source and cat[key].memory > 0


def test_set_overrides_one_figure_of_an_entry():
    w = load_workload(None, ["cluster.accelerator.peak_flops=500 TFLOPS"])
    assert w.accelerator.peak("bf16") == 500e12
    assert w.accelerator.video_decoders == 7  # the rest of the H100 entry stays
    inline = resolve_accelerator({"peak_flops": "200 TFLOPS", "memory": "32 GB"})
    assert inline.peak("bf16") == 200e12 and inline.memory == 32e9


def test_provenance_and_set(tmp_path):
    f = tmp_path / "w.toml"
    f.write_text('[data]\nbitrate = "4 Mbit/s"\n')
    w = load_workload(f, ["cluster.cores=16"])
    assert w.data.bitrate == 4e6 and w.cluster.cores == 16
    assert w.provenance["cluster.cores"].source == "--set on the command line"
    assert "w.toml" in w.provenance["data.bitrate"].source
    assert w.provenance["cluster.mfu"].kind == "assumed" and "0.4" in w.provenance["cluster.mfu"].source
    r = build_report(w)
    assert r["assumptions"]["data.bitrate"]["value"] == 4e6


@pytest.mark.parametrize("content,args,key", [
    ("[model]\nparmas = 3\n", [], "model.parmas"),
    ('[data]\nbitrate = "8 furlongs"\n', [], "data.bitrate"),
    ("[cluster]\ncount = 0\n", [], "cluster.count"),
    ("[cluster]\ncount = -2\n", [], "cluster.count"),
    ("[cluster]\nmfu = 1.5\n", [], "cluster.mfu"),
    ('[cluster]\naccelerator = "h100-pcie-9000"\n', [], "cluster.accelerator"),
    ("[model\nparams = 3\n", [], "w.toml"),
    ("", ["data.bogus=3"], "data.bogus"),
    ("", ["data.patch=300"], "data.patch"),
    ("[data]\nside = 9223372036854775807\n", [], "data.side"),  # found by fuzz_workload: int64 overflow
])
def test_bad_input_exit_2_one_line(tmp_path, cli, content, args, key):
    f = tmp_path / "w.toml"
    f.write_text(content)
    sets = [x for a in args for x in ("--set", a)]
    res = cli("plan", str(f), *sets)
    assert res.returncode == 2, res.stdout
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0], res.stderr
    assert "Traceback" not in res.stderr


def test_missing_file(cli):
    res = cli("plan", "no/such/file.toml")
    assert res.returncode == 2 and "no such workload file" in res.stderr


def test_did_you_mean(cli, tmp_path):
    f = tmp_path / "w.toml"
    f.write_text("[cluster]\ncorez = 3\n")
    res = cli("plan", str(f))
    assert "did you mean 'cluster.cores'" in res.stderr


def test_formats(cli, tmp_path):
    table = cli("plan")
    assert table.returncode == 0 and "Waits on  decode" in table.stdout and "provenance" not in table.stdout
    full = cli("plan", "--all")
    assert full.returncode == 0 and "provenance" in full.stdout and "cluster.core_fps_1080p" in full.stdout
    md = cli("plan", "--format", "markdown")
    assert md.stdout.startswith("# trainplan") and "| accelerator busy | 34.6 % | share of time the accelerator computes |" in md.stdout
    out = tmp_path / "r.json"
    res = cli("plan", "--format", "json", "--output", str(out))
    assert res.returncode == 0 and out.read_text().startswith("{")


def test_hf_config_workload_gets_the_exact_count_not_the_default_model(plan_json):
    r = plan_json(str(EXAMPLES / "llama2-7b-pretrain.toml"))
    assert r["workload"]["params"] == 6_738_415_616
    # activations from the architecture (issue 12; docs/memory-and-flops.md), per token, bf16, SDPA:
    # a layer keeps 2 (4d + 4 + 2d) [RMSNorms] + 2 (2d) [linear inputs] + 8d + 4h [q k v out, lse] + 8f [SwiGLU];
    # selective recomputation drops the lse (4h) but for the layer running its backward; outside the layers
    # ids 8 + final norm (6d + 4) + head input 2d + fp32 log-softmax 4V + labels 8 + rotary cos/sin 2*2*128;
    # and the bf16 logits 2V the model returns
    d, f, h, V, L, S = 4096, 11008, 32, 32000, 32, 4096
    layer = 2 * (6 * d + 4) + 4 * d + 8 * d + 4 * h + 8 * f
    outside = 8 + (6 * d + 4) + 2 * d + 4 * V + 8 + 2 * 2 * 128
    assert r["memory"]["activation_bytes"] == pytest.approx(S * (L * (layer - 4 * h) + 4 * h + outside + 2 * V))
    # ZeRO-1 over 256 devices: bf16 weights whole; bf16 grads, the fp32 gradient partition, fp32 master and
    # moments sharded: 2 P + 18 P / n (DeepSpeed 0.19.8's estimate_zero2_model_states_mem_needs)
    assert r["memory"]["state_bytes"] == pytest.approx(6_738_415_616 * (2 + 18 / 256))


def test_params_alone_do_not_inherit_the_default_shape():
    w = load_workload(None, ["model.params=7e9"])
    assert w.model.layers is None and w.model.width is None
    assert load_workload().model.params == 93e6 and load_workload().model.width == 768
