"""Unit sanity of every accelerator row (issue 28): decimal units, dense peaks, memory as stated.

Expected values are the datasheet figures written out by hand, not the loader's output."""

from __future__ import annotations

import re
import tomllib
from importlib import resources

import pytest

from trainplan.catalogue.accelerators import PLAUSIBLE_FIGURES, accelerators, resolve_accelerator
from trainplan.catalogue.interconnect import platform, tiers
from trainplan.accounts.training_cost import price_table

RAW = tomllib.loads(resources.files("trainplan.catalogue").joinpath("accelerators.toml").read_text("utf-8"))
RAW_TIERS = tomllib.loads(resources.files("trainplan.catalogue").joinpath("interconnect.toml")
                          .read_text("utf-8"))["tiers"]

# the accelerators the issue names, by catalogue key
ISSUE_28 = ["l40s", "h100-pcie", "h100-nvl", "h200", "b200", "gb200", "a100-sxm-40gb", "mi300x", "gaudi3",
            "tpu-v5e", "tpu-v5p", "tpu-v6e", "trainium2"]
EXISTING = ["a100-sxm-80gb", "h100-sxm", "h200", "b200", "mi300x", "cpu-core"]
BINARY_PREFIX = re.compile(r"\b[KMGTP]iB?(/s)?\b|\b[kKMGTP]ibit")


def test_every_named_accelerator_and_every_old_key_is_there() -> None:
    assert set(ISSUE_28 + EXISTING) <= set(accelerators())
    assert resolve_accelerator("H100-SXM").key == "h100-sxm"  # old keys in any case


@pytest.mark.parametrize("key", sorted(RAW))
def test_row_units_are_decimal_and_sane(key: str) -> None:
    row = RAW[key]
    assert row["source"].strip() and "http" not in row["source"] and "www." not in row["source"]
    for field, text in row.items():
        if field in ("name", "source", "video_decoders"):
            continue
        if field == "memory" and text.endswith("MiB"):  # nvidia-smi's own unit, the one exception
            continue
        assert not BINARY_PREFIX.search(str(text)), f"{key}.{field} = {text!r} mixes in a binary prefix"
    acc = accelerators()[key]
    stated = float(row["memory_stated"].removesuffix(" GB")) * 1e9  # GB as the vendor states it
    assert row["memory_stated"].endswith(" GB")
    assert 0.95 <= acc.memory / stated <= 1.10  # the driver's figure sits just above the stated one
    for figure, value in [("memory", acc.memory), ("memory_bandwidth", acc.memory_bandwidth),
                          ("interconnect", acc.interconnect), ("tdp", acc.tdp)]:
        low, high = PLAUSIBLE_FIGURES[figure]
        assert low <= value <= high
    # dense peaks by format: fp8 = 2 x bf16, bf16 = fp16 = 2 x tf32 where given (NVIDIA, AMD dense tables)
    peaks = acc.peak_flops
    assert all(1e9 <= v <= 1e17 for v in peaks.values())
    if "fp16" in peaks:
        assert peaks["fp16"] == peaks["bf16"]
    if "fp32" in peaks:
        assert peaks["fp32"] <= peaks["bf16"]
    # memory bandwidth below 10 TB/s and per-direction link below memory bandwidth on every device
    assert acc.memory_bandwidth < 10e12 and acc.interconnect <= acc.memory_bandwidth
    # a node platform for every accelerator the issue names, with a NIC per device
    if key in ISSUE_28:
        p = platform(key)
        assert p.key == key and p.nics_per_device >= 1 and p.devices_per_node >= 8


@pytest.mark.parametrize(("key", "bf16", "memory", "bandwidth", "link"), [
    # datasheet figures, dense (the sparse figure halved where the datasheet gives only that)
    ("l40s", 362.05e12, 48e9, 864e9, 64e9 / 2),
    ("h100-pcie", 1513e12 / 2, 80e9, 2.0e12, 128e9 / 2),
    ("h100-nvl", 1671e12 / 2, 94e9, 3.9e12, 128e9 / 2),
    ("gb200", 360e15 / 72 / 2, 186e9, 576e12 / 72, 1.8e12 / 2),
    ("a100-sxm-40gb", 312e12, 40e9, 1555e9, 600e9 / 2),
    ("gaudi3", 1835e12, 128e9, 3.7e12, 21 * 200e9 / 8),
    ("tpu-v5e", 197e12, 16e9, 819e9, 1600e9 / 8),
    ("tpu-v5p", 459e12, 95e9, 2765e9, 4800e9 / 8),
    ("tpu-v6e", 918e12, 32e9, 1640e9, 3200e9 / 8),
    ("trainium2", 667e12, 96e9, 2.9e12, 1.28e12 / 2),
])
def test_new_rows_match_their_datasheets(key: str, bf16: float, memory: float, bandwidth: float,
                                         link: float) -> None:
    acc = accelerators()[key]
    assert acc.peak("bf16") == pytest.approx(bf16, rel=1e-3)
    assert acc.memory == pytest.approx(memory)
    assert acc.memory_bandwidth == pytest.approx(bandwidth)
    assert acc.interconnect == pytest.approx(link, rel=0.01)


def test_tier_bandwidths_are_decimal() -> None:
    # 400 Gbit/s = 50e9 B/s; 4800 Gbit/s = 600e9 B/s
    assert tiers()["ib-ndr"].bandwidth == pytest.approx(50e9)
    assert tiers()["ici-v5p"].bandwidth == pytest.approx(600e9)
    for key, t in RAW_TIERS.items():
        assert not BINARY_PREFIX.search(t["bandwidth"]), key
        assert "http" not in t["source"]


def test_prices_name_catalogue_keys_and_a_source() -> None:
    table = price_table()
    assert set(table) <= set(accelerators())
    for row in table.values():
        assert 0.1 <= row.dollars_per_hour <= 100 and row.source


def test_per_device_prices_are_their_sources_instance_price_divided_by_its_devices() -> None:
    # the rows quoted per instance: CoreWeave's GB200 NVL72 at $42.00/h for 4 GPUs, AWS's trn2.48xlarge
    # Capacity Block at $35.7608/h for 16 Trainium2 chips
    table = price_table()
    assert table["gb200"].dollars_per_hour == pytest.approx(42.00 / 4)
    assert table["trainium2"].dollars_per_hour == pytest.approx(35.7608 / 16, abs=5e-4)
    assert "gaudi3" not in table  # no sourced rental price: the comparison shows hours, not dollars


def test_every_network_tier_has_a_collective_size_curve():
    # the step model reads each tier's message-size curve (catalogue/collective_efficiency.toml): a tier
    # added to interconnect.toml without one would make every plan on it an internal error
    from trainplan.catalogue import table

    tiers = set(table("interconnect")["tiers"])
    curves = set(table("collective_efficiency")["tiers"])
    assert tiers <= curves, sorted(tiers - curves)


@pytest.mark.parametrize("key", sorted(accelerators()))
def test_every_accelerator_plans_a_laid_out_job(key):
    # every row reaches the whole plan: a 16-device TP 2 x PP 2 layout over two nodes (every tier in use)
    import math

    from trainplan.planning.evaluate import build_report
    from trainplan.workload.load import load_workload

    sets = [f"cluster.accelerator={key}", "cluster.count=16", "parallel.tensor=2", "parallel.pipeline=2",
            "cluster.devices_per_node=2", "model.layers=8", "model.width=1024", "model.heads=16",
            "model.vocab=32000", 'model.family="llama"', "model.ffn_width=2816", "training.micro_batch=1",
            "training.grad_accum=4", "training.seq_len=1024", "data.kind=tokens", "training.tokens=1e9"]
    r = build_report(load_workload(None, sets))
    assert math.isfinite(r["compute"]["seconds_per_step"]) and r["compute"]["seconds_per_step"] > 0
    assert r["memory"]["per_device_bytes"] == r["parallel"]["memory"]["per_device_bytes"]
