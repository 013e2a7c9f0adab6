"""Laws the numbers are built from, checked over random valid workloads (issue 8).

Each property is stated once in words in its docstring; docs/trust.md lists them.
Workloads are hypothesis-generated dicts inside the schema's valid ranges, run through
`workload.build_workload` and `plan.build_report`, or the pure account functions directly.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from trainplan.accounts import bill as bill_mod
from trainplan.accounts import compute as compute_mod
from trainplan.accounts import memory as memory_mod
from trainplan.accounts import pipeline as pipeline_mod
from trainplan import units
from trainplan.catalogue.accelerators import accelerators
from trainplan.catalogue.dtypes import state_bytes_per_param
from trainplan.errors import UserError
from trainplan.planning.evaluate import build_report, pipeline_inputs, resolve_model
from trainplan.present.render import to_json
from trainplan.workload.schema import build_workload

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
REL = 1e-9  # float tolerance of a law that holds exactly in real numbers


def floats(*args: Any, **kwargs: Any) -> st.SearchStrategy[float]:
    """st.floats without subnormals (below 2.2e-308): the numeric boundary refuses them (units.number,
    docs/trust.md), so they are not workloads these laws speak of."""
    return st.floats(*args, allow_subnormal=False, **kwargs)


def log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    """Floats spread evenly over orders of magnitude (what a planner sees: 1e6..1e12 params)."""
    return floats(math.log10(lo), math.log10(hi)).map(lambda e: 10.0 ** e)


def fraction(lo: float = 0.01) -> st.SearchStrategy[float]:
    return floats(lo, 1.0)


@st.composite
def accelerator(draw: st.DrawFn) -> Any:
    if draw(st.booleans()):
        # the catalogue rows that state a peak for every precision the workloads draw (a TPU has no fp16
        # peak, Gaudi 3 no fp32: a plan of those refuses the precision, which test_bad_input covers)
        return draw(st.sampled_from(sorted(k for k, a in accelerators().items()
                                           if {"bf16", "fp16", "fp32"} <= set(a.peak_flops))))
    return {"peak_flops": draw(log_uniform(1e11, 5e15)), "memory": draw(log_uniform(1e9, 3e11)),
            "video_decoders": draw(st.integers(0, 8))}


@st.composite
def workloads(draw: st.DrawFn, kind: str | None = None) -> dict[str, Any]:
    """A workload dict within the schema's valid ranges (every workload key the accounts read)."""
    kind = kind or draw(st.sampled_from(["video", "tokens"]))
    side = draw(st.integers(16, 1024))
    doc: dict[str, Any] = {
        "model": {"params": draw(log_uniform(1e6, 1e12)), "layers": draw(st.integers(1, 128)),
                  "width": 64 * draw(st.integers(1, 256))},
        "training": {
            "micro_batch": draw(st.integers(1, 64)), "seq_len": draw(st.integers(1, 32768)),
            "grad_accum": draw(st.integers(1, 16)), "optimizer": draw(st.sampled_from(["adamw", "adam", "sgd"])),
            "precision": draw(st.sampled_from(["bf16", "fp16", "fp32"])),
            "recompute": draw(st.sampled_from(["none", "selective", "full"])), "zero": draw(st.integers(0, 3)),
            "epochs": draw(floats(0.1, 10.0)),
        },
        "cluster": {
            "accelerator": draw(accelerator()), "count": draw(st.integers(1, 1024)), "mfu": draw(fraction()),
            "scaling_efficiency": draw(fraction(0.1)), "cores": draw(floats(0.0, 256.0)),
            "core_fps_1080p": draw(log_uniform(1.0, 2000.0)), "nvdec": draw(st.booleans()),
            "link": draw(log_uniform(1e6, 1e11)), "host_to_device": draw(log_uniform(1e8, 1e11)),
            "runtime_buffers": draw(st.one_of(st.just(0.0), floats(1e6, 8e9))),  # under 1 MB: refused "headroom": draw(floats(0.0, 0.5)),
            "prefetch": draw(st.booleans()),
        },
        "data": {
            "kind": kind, "cameras": draw(st.integers(1, 16)), "width": draw(st.integers(16, 7680)),
            "height": draw(st.integers(16, 4320)), "fps": draw(floats(1.0, 240.0)),
            "bitrate": draw(log_uniform(1e4, 1e9)), "gop": draw(st.integers(1, 300)),
            "access": draw(st.sampled_from(["sequential", "random", "decoded"])), "side": side,
            "patch": draw(st.integers(1, side)), "hours": draw(log_uniform(0.1, 1e5)),
            "bytes_per_token": draw(floats(1.0, 8.0)), "tokenize_online": draw(st.booleans()),
            "tokenizer_rate": draw(log_uniform(1e4, 1e8)),
            "loader_cpu_per_frame": draw(st.one_of(st.just(0.0), log_uniform(1e-6, 0.1))),
        },
        "prices": {"accelerator_hour": draw(floats(0.0, 100.0)), "core_hour": draw(floats(0.0, 1.0))},
    }
    if kind == "tokens" or draw(st.booleans()):
        doc["training"]["tokens"] = draw(log_uniform(1e6, 1e13))
    return doc


def with_(doc: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of `doc` with the dotted `key` set."""
    out = json.loads(json.dumps(doc))
    section, name = key.split(".")
    out.setdefault(section, {})[name] = value
    return out


def report_of(doc: dict[str, Any]) -> dict[str, Any]:
    return build_report(build_workload(doc))


def close(a: float, b: float, rel: float = REL) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-300) or (a == b)


def at_least(after: float, before: float, rel: float = REL) -> bool:
    """after >= before, allowing for rounding."""
    return after >= before * (1.0 - rel) - 1e-300


# ---------------------------------------------------------------- the input pipeline


@SETTINGS
@given(workloads())
def test_busy_is_a_fraction(doc):
    """busy is in [0, 1], for every workload (report and pure account)."""
    r = report_of(doc)
    busy = r["pipeline"]["busy"]
    assert busy is not None and 0.0 <= busy <= 1.0, busy
    for s in r["bill"].get("sources", []):
        assert 0.0 <= s["busy"] <= 1.0


@SETTINGS
@given(workloads(), floats(1.0, 10.0), st.sampled_from(["cores", "link", "video_decoders", "host_to_device",
                                                           "core_fps_1080p"]))
def test_busy_never_falls_as_supply_grows(doc, factor, figure):
    """busy never falls as cores, the link, the video decoders (or host-to-device, decoder speed) grow."""
    w = build_workload(doc)
    args = pipeline_inputs(w, resolve_model(w))
    if figure == "video_decoders":
        args["nvdec"] = True
        before_value = args["video_decoders"]
        grown = before_value + math.ceil(factor)
    else:
        before_value = args[figure]
        grown = before_value * factor + (factor if figure == "cores" else 0.0)  # 0 cores grows too
    before = pipeline_mod.pipeline_account(**args).busy
    args[figure] = grown
    after = pipeline_mod.pipeline_account(**args).busy
    assert 0.0 <= before <= 1.0 and 0.0 <= after <= 1.0
    assert at_least(after, before), (figure, before_value, grown, before, after)


@SETTINGS
@given(workloads(kind="video"), floats(1.0, 10.0))
def test_busy_never_rises_as_the_hand_over_grows(doc, factor):
    """More CPU per frame used in the loader (data.loader_cpu_per_frame) never raises busy."""
    w = build_workload(doc)
    args = pipeline_inputs(w, resolve_model(w))
    before = pipeline_mod.pipeline_account(**args).busy
    args["loader_cpu_per_frame"] = args["loader_cpu_per_frame"] * factor + 1e-4 * factor
    after = pipeline_mod.pipeline_account(**args).busy
    assert at_least(before, after), (before, after)


@SETTINGS
@given(workloads(kind="video"))
def test_no_hand_over_is_the_formula_without_it(doc):
    """With o = 0 the general formula (o given as an array, so the shortcut a single 0 takes is not
    used) gives the supply, busy and cores needed of the formula without o."""
    import numpy as np

    w = build_workload(with_(doc, "data.loader_cpu_per_frame", 0.0))
    args = pipeline_inputs(w, resolve_model(w))
    plain = pipeline_mod.pipeline_arrays(**args)
    zero = pipeline_mod.pipeline_arrays(**{**args, "loader_cpu_per_frame": np.zeros(1)})
    for name in ("decode_tokens_per_second", "supply_tokens_per_second", "busy", "cores_needed",
                 "cores_needed_cpu_only", "bottleneck_index"):
        a, b = float(np.asarray(plain[name])), float(np.asarray(zero[name])[0])
        assert close(a, b, 1e-12) or (math.isnan(a) and math.isnan(b)), (name, a, b)


@SETTINGS
@given(workloads(kind="video"), floats(1.0, 10.0))
def test_busy_never_falls_as_cores_grow_in_the_report(doc, factor):
    """The same through the workload file: more cluster.cores never lowers pipeline.busy."""
    before = report_of(doc)["pipeline"]["busy"]
    cores = doc["cluster"]["cores"]
    after = report_of(with_(doc, "cluster.cores", cores * factor + factor))["pipeline"]["busy"]
    assert at_least(after, before)


# ---------------------------------------------------------------- memory


@SETTINGS
@given(workloads(), floats(1.0, 8.0), st.sampled_from(["model.params", "training.micro_batch",
                                                           "training.seq_len", "model.layers", "model.width"]))
def test_memory_never_falls_as_the_job_grows(doc, factor, key):
    """Per-device memory never falls as parameters, batch or sequence (or depth, width) grow."""
    section, name = key.split(".")
    value = doc[section][name]
    grown = value * factor if key == "model.params" else int(math.ceil(value * factor))
    if key == "model.width":
        grown = 64 * math.ceil(grown / 64)
    before = report_of(doc)["memory"]
    after = report_of(with_(doc, key, grown))["memory"]
    if key in ("model.layers", "model.width") and before["gathered_bytes"] > 0:
        # ZeRO-3 / FSDP hold their largest module gathered. At a fixed parameter count a deeper or wider shape
        # leaves less to the embedding, the largest module of a small model (1M parameters at width 64: 0.95M
        # outside one block, 0.90M outside two), so the gathered buffer may fall; the rest may not
        gathered = (before["gathered_bytes"], after["gathered_bytes"])
        before = {k: v - gathered[0] if k in ("per_device_bytes", "state_bytes") else v for k, v in before.items()}
        after = {k: v - gathered[1] if k in ("per_device_bytes", "state_bytes") else v for k, v in after.items()}
    assert at_least(after["per_device_bytes"], before["per_device_bytes"]), (key, value, grown)
    assert at_least(after["state_bytes"], before["state_bytes"])
    assert at_least(after["activation_bytes"], before["activation_bytes"])
    # and what it takes never shrinks: devices to run the weights
    assert after["devices_to_run"] >= before["devices_to_run"]


@SETTINGS
@given(workloads(), st.integers(1, 3))
def test_zero_stage_k_never_uses_more_than_k_minus_1(doc, k):
    """ZeRO stage k never uses more device memory than stage k-1 (report and pure account), from two
    devices up: on one device DeepSpeed's fp32 gradient partition (4 + 16/n bytes, its own estimator)
    makes ZeRO-1 cost more than no sharding (16), as it does in practice."""
    doc = with_(doc, "cluster.count", max(2, doc["cluster"]["count"]))
    lower = report_of(with_(doc, "training.zero", k - 1))["memory"]
    higher = report_of(with_(doc, "training.zero", k))["memory"]
    if k == 3:
        # ZeRO-3 also holds its largest module gathered in fp32 (DeepSpeed's 4 L bytes): it saves on ZeRO-2's
        # whole weights W only where 4 L <= W (n - 1) / n, so a model that is mostly one embedding on two
        # devices costs more under ZeRO-3, as DeepSpeed's estimator says; the property holds below that
        n = doc["cluster"]["count"]
        assume(higher["gathered_bytes"] <= lower["weights_bytes"] * (n - 1) / n)
    assert higher["per_device_bytes"] <= lower["per_device_bytes"] * (1 + REL)
    assert higher["state_bytes"] <= lower["state_bytes"] * (1 + REL)


@SETTINGS
@given(log_uniform(1e3, 1e13), st.sampled_from(["mixed_fp32_master", "autocast_fp32", "sgd_momentum"]),
       st.integers(2, 4096))
def test_zero_and_memory_laws_of_the_pure_account(params, recipe_name, dp):
    """The one training-state account under the layout (parallel.sharded_state): stages never grow from
    two data-parallel ranks up; state is linear in params; no sharding is params x the recipe's bytes."""
    from trainplan.accounts import parallel, training_state

    r = training_state.recipe(recipe_name)
    states = [sum(parallel.sharded_state(params, dp, z, 0.0, r)) for z in range(4)]
    for lo, hi in zip(states, states[1:]):
        assert hi <= lo * (1 + REL)
    assert close(states[0], params * r.total, 1e-12)
    assert close(sum(parallel.sharded_state(2 * params, dp, 0, 0.0, r)), 2 * states[0])


SETTINGS_PURE = settings(max_examples=100, deadline=None)


@SETTINGS_PURE
@given(st.integers(1, 64), st.integers(1, 65536), st.integers(1, 16384), st.integers(1, 256),
       floats(0.5, 4.0), floats(0.1, 40.0), floats(1.0, 4.0))
def test_activations_grow_with_batch_and_sequence(b, s, d, layers, bytes_per_value, k, factor):
    """activation_bytes = b S d bytes L k is linear in each of b and S."""
    base = memory_mod.activation_bytes(b, s, d, layers, bytes_per_value, k)
    assert close(memory_mod.activation_bytes(2 * b, s, d, layers, bytes_per_value, k), 2 * base)
    assert close(memory_mod.activation_bytes(b, 3 * s, d, layers, bytes_per_value, k), 3 * base)
    # recomputation never keeps more than no recomputation
    for mode in ("selective", "full"):
        assert memory_mod.retained_tensors(17.0, mode, 23 / 34) <= memory_mod.retained_tensors(17.0, "none", 23 / 34)


# ---------------------------------------------------------------- linear in tokens and hours


@SETTINGS_PURE
@given(log_uniform(1e3, 1e13), log_uniform(1e3, 1e15), floats(0.01, 1000.0),
       st.sampled_from(["none", "selective", "full"]))
def test_flops_linear_in_tokens(params, tokens, k, recompute):
    """F(k D) = k F(D), F(k P) = k F(P): FLOPs are linear in tokens and in parameters."""
    f = compute_mod.training_flops(params, tokens, recompute)
    assert close(compute_mod.training_flops(params, k * tokens, recompute), k * f)
    assert close(compute_mod.training_flops(k * params, tokens, recompute), k * f)


@SETTINGS
@given(workloads(), st.sampled_from([2.0, 3.0, 0.5, 10.0]))
def test_report_flops_seconds_and_bytes_linear_in_tokens(doc, k):
    """Through the report: compute.flops and compute.seconds scale by k with training.tokens;
    for a token corpus the data bytes do too."""
    doc = with_(doc, "training.tokens", doc["training"].get("tokens", 1e9))
    a = report_of(doc)
    b = report_of(with_(doc, "training.tokens", doc["training"]["tokens"] * k))
    assert close(b["compute"]["flops"], k * a["compute"]["flops"])
    assert close(b["compute"]["seconds"], k * a["compute"]["seconds"])
    if doc["data"]["kind"] == "tokens":
        assert close(b["storage"]["data_bytes"], k * a["storage"]["data_bytes"])


@SETTINGS
@given(workloads(kind="video"), st.sampled_from([2.0, 3.0, 0.5, 10.0]))
def test_report_bytes_linear_in_hours(doc, k):
    """For video, the stored data bytes and the derived token count scale by k with data.hours."""
    doc["training"].pop("tokens", None)  # tokens derived from hours
    a = report_of(doc)
    b = report_of(with_(doc, "data.hours", doc["data"]["hours"] * k))
    assert close(b["storage"]["data_bytes"], k * a["storage"]["data_bytes"])
    assert close(b["workload"]["tokens"], k * a["workload"]["tokens"])
    assert close(b["compute"]["flops"], k * a["compute"]["flops"])


@SETTINGS_PURE
@given(log_uniform(1e3, 1e9), log_uniform(1.0, 1e6), fraction(0.001), floats(0.0, 256.0),
       log_uniform(1e6, 1e13), log_uniform(1e6, 1e13), floats(0.0, 100.0), floats(0.0, 1.0),
       floats(0.0, 1.0), floats(0.0, 1.0), floats(0.0, 12.0), floats(0.01, 100.0))
def test_bill_linear_in_hours(frames, demand, busy, cores, stored, read, acc_hour, core_hour, gb_month,
                              transfer_gb, months, k):
    """Moving k hours costs k times one hour: every term of the bill is linear in hours moved."""
    def bill(h: float) -> bill_mod.BillAccount:
        return bill_mod.bill_per_hour(
            frames_per_hour=frames * h, demand_fps=demand, busy=busy, cores=cores,
            stored_bytes_per_hour=stored * h, read_bytes_per_hour=read * h, accelerator_hour=acc_hour,
            core_hour=core_hour, storage_gb_month=gb_month, transfer_gb=transfer_gb, storage_months=months)
    one, many = bill(1.0), bill(k)
    # idle = (wall - useful) x price cancels when busy is near 1: the error is relative to wall, not idle
    scale = k * (float(one.accelerator_seconds) / 3600 * (acc_hour + cores * core_hour)
                 + stored / 1e9 * gb_month * months + read / 1e9 * transfer_gb)
    for term in ("total", "bytes", "storage", "transfer", "cores", "idle_accelerator", "accelerator_seconds"):
        got, want = float(getattr(many, term)), k * float(getattr(one, term))
        assert math.isclose(got, want, rel_tol=REL, abs_tol=1e-12 * scale + 1e-300), term
    assert one.total >= 0 and all(0 <= s <= 1 + REL for s in one.shares.values())
    # and over epochs: storage once, the rest each epoch (linear in epochs past the first)
    per_epoch = float(one.transfer + one.cores + one.idle_accelerator)
    for epochs in (1, 2, 10):
        assert close(float(bill_mod.over_epochs(one, epochs)), float(one.storage) + epochs * per_epoch, 1e-9)


# ---------------------------------------------------------------- units


DIMENSIONS = ["count", "bytes", "byte_rate", "bit_rate", "flop_rate", "flops", "time", "power",
              "frequency", "dollars", "fraction"]


@SETTINGS_PURE
@given(st.sampled_from(DIMENSIONS), log_uniform(1e-3, 1e21))
def test_format_then_parse_round_trips(dimension, value):
    """parse(format_quantity(x)) == x to the digits printed."""
    if dimension == "fraction":
        value = value / 1e21  # 1e-24..1
    for digits in (3, 6, 9):
        text = units.format_quantity(value, dimension, digits=digits)
        back = units.parse(text, dimension, "x")
        tol = 10.0 ** (1 - digits) if dimension not in ("fraction", "dollars") else None
        if tol is not None:
            assert math.isclose(back, value, rel_tol=tol), (value, text, back)
        elif dimension == "fraction":  # printed to digits-2 decimals of a percent
            assert abs(back - value) <= 0.5 * 10.0 ** (-(digits - 2)) / 100 + 1e-15, (value, text, back)
        else:  # dollars: to the cent at and above 1 cent
            assert abs(back - value) <= max(0.005, value * 10.0 ** (1 - digits)), (value, text, back)


@SETTINGS_PURE
@given(st.sampled_from(DIMENSIONS), floats(-1e30, 1e30, allow_nan=False, allow_infinity=False))
def test_plain_numbers_parse_exactly(dimension, value):
    """A plain number (as a number or as its repr) is already in SI units: parsed unchanged."""
    assert units.parse(value, dimension, "x") == value
    assert units.parse(repr(value), dimension, "x") == value


UNIT_EXAMPLES = {
    "bytes": {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30},
    "byte_rate": {"B/s": 1, "MB/s": 1e6, "GB/s": 1e9, "GiB/s": 2**30, "GBps": 1e9},
    "bit_rate": {"bit/s": 1, "kbit/s": 1e3, "Mbit/s": 1e6, "Gbit/s": 1e9, "Mbps": 1e6},
    "flop_rate": {"FLOPS": 1, "TFLOPS": 1e12, "PFLOPS": 1e15, "GFLOP/s": 1e9},
    "time": {"s": 1, "ms": 1e-3, "min": 60, "h": 3600, "d": 86400},
    "power": {"W": 1, "kW": 1e3, "MW": 1e6},
    "count": {"k": 1e3, "M": 1e6, "B": 1e9, "T": 1e12},
    "fraction": {"%": 0.01},
}


@SETTINGS_PURE
@given(st.sampled_from(sorted(UNIT_EXAMPLES)), st.data(), floats(0.0, 1e6), st.sampled_from(["", " ", "  "]))
def test_number_with_unit_is_number_times_factor(dimension, data, number, space):
    """'x UNIT' parses to x times the unit's factor, with or without a space."""
    unit, factor = data.draw(st.sampled_from(sorted(UNIT_EXAMPLES[dimension].items())))
    assume(number * factor == 0 or number * factor >= units.SMALLEST_NUMBER)  # a subnormal SI value is refused
    got = units.parse(f"{number!r}{space}{unit}", dimension, "x")
    assert math.isclose(got, number * factor, rel_tol=1e-12, abs_tol=0.0)


@SETTINGS_PURE
@given(st.text(max_size=30), st.sampled_from(DIMENSIONS))
def test_parse_any_text_is_a_finite_number_or_a_user_error(text, dimension):
    """Any text either parses to a finite float or raises UserError naming the key."""
    try:
        value = units.parse(text, dimension, "the.key")
    except UserError as err:
        assert err.where == "the.key"
    else:
        assert isinstance(value, float) and math.isfinite(value)


# ---------------------------------------------------------------- the JSON report


def _numbers(obj: Any) -> list[float]:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _numbers(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _numbers(v)]
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        return [obj]
    return []


def _refuse_constant(name: str) -> float:
    raise AssertionError(f"JSON holds {name}")


@SETTINGS
@given(workloads())
def test_json_report_round_trips_with_finite_numbers(doc):
    """The JSON report loads back with json.loads to the same object, every number finite."""
    report = report_of(doc)
    text = to_json(report)
    back = json.loads(text, parse_constant=_refuse_constant)
    assert all(math.isfinite(x) for x in _numbers(back))
    assert json.loads(to_json(back)) == back
    for account in ("compute", "memory", "network", "storage", "pipeline", "bill"):
        assert isinstance(back[account], dict)
    # the figures a reader acts on are numbers, never missing, on a workload that can run
    assert back["compute"]["flops"] > 0 and back["compute"]["seconds"] > 0
    assert back["memory"]["per_device_bytes"] > 0


@pytest.mark.parametrize("figure", ["busy", "supply_fps", "demand_fps"])
def test_default_workload_figures_are_finite(figure):
    assert math.isfinite(report_of({})["pipeline"][figure])
