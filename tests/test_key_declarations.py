"""Each workload key is declared once, on its field (issue 27): its range, the figures it feeds and its
sweep role live in `Q(...)` in workload/schema.py, and docs/keys.md is generated from them.

The declared feeds are checked against the report itself: each key is changed on a set of workloads
and the figures that move must be exactly the ones declared (first-screen figures, or where a key
moves none of them, the figures it does move)."""

from __future__ import annotations

import inspect
import math
from typing import Any

import pytest

from trainplan.accounts import pipeline as pipeline_mod
from trainplan.errors import UserError
from trainplan.planning.evaluate import build_report
from trainplan.planning.figures import FIGURES
from trainplan.planning import inputs as inputs_mod
from trainplan.present import keydocs
from trainplan.workload import schema
from trainplan.workload.load import load_workload

ANSWER = ("memory.per_device_bytes", "compute.seconds_per_step", "compute.wall_seconds", "training_cost.budget",
          "pipeline.busy", "pipeline.cores_needed", "bill.total", "storage.retained_bytes", "energy.kg_co2",
          "serving.cost_per_request")
_SHAPE = ["model.layers=32", "model.width=4096", "model.vocab=32000", "model.ffn_width=11008", "data.kind=tokens",
          "training.tokens=1e12", "training.micro_batch=1", "model.heads=32"]
BASES: dict[str, tuple[str | None, list[str]]] = {
    "video": (None, []),
    "tokens": ("examples/llama2-7b-pretrain.toml", []),
    "shape": (None, [*_SHAPE, "model.family=llama", "cluster.count=64", "training.recompute='selective'"]),
    "layout": (None, [*_SHAPE, "model.family=mixtral", "cluster.count=64", "model.kv_heads=8", "model.experts=8",
                      "model.experts_per_token=2", "parallel.tensor=2", "parallel.pipeline=4",
                      "parallel.schedule='interleaved'", "parallel.interleave=2", "parallel.expert=2",
                      "training.grad_accum=8"]),
    "lora": (None, [*_SHAPE, "model.family=llama", "training.tokens=1e9", "training.method='lora'"]),
    "video_more": (None, ["cluster.nvdec=true", "data.access=random", "data.loader_cpu_per_frame=0.0002",
                          'storage.cache_size="5 TB"', "cluster.prefetch=false"]),
    "images": ("examples/imagenet-vit.toml", []),
    "tokens_more": ("examples/llama2-7b-pretrain.toml", ["data.tokenize_online=true", 'cluster.link="10 MB/s"',
                                                          "serving.revenue_per_request=1e-9",
                                                          'training.retrain_every="30 d"']),
}
# a value to try for a key whose default is none (its value is derived or absent)
TRIAL: dict[str, str] = {
    "model.params": "3e9", "model.layers": "16", "model.width": "1024", "model.vocab": "50000",
    "model.ffn_width": "8192", "model.heads": "8", "model.kv_heads": "2", "model.head_dim": "64",
    "model.norm": "'layernorm'", "model.mlp": "'gelu'", "training.tokens": "1e11", "training.retrain_every": '"30 d"',
    "training.activation_bytes_per_layer_token": "2e4", "training.activation_bytes_outside_token": "1e7",
    "training.state_recipe": "'pure_bf16'", "training.sharding": "'zero3'", "cluster.hfu": "0.5",
    "cluster.interconnect": '"100 GB/s"', "cluster.devices_per_node": "4", "cluster.node_link": '"10 GB/s"',
    "data.random_decodes": "40", "data.pixels_per_frame": "1e6", "data.image_bytes": '"300 kB"', "data.dataset_size": '"10 TB"',
    "energy.watts": "300", "energy.grid_intensity": "100", "serving.tensor": "2", "serving.training_cost": "1e6",
    "serving.revenue_per_request": "1e-4", "serving.tokens_per_request": "1000", "parallel.data": "2", "parallel.efficiency": "0.5",
    "storage.cache_size": '"1 TB"',
}
EXTRA: dict[str, list[str]] = {"energy.region": ["'us'"], "cluster.accelerator": ["'a100-sxm-80gb'"],
                               "training.lora_targets": ["['q', 'v']"], "data.codec": ["'hevc'"],
                               # a vocabulary the ViT's 86 M parameters admit (1,000 classes: about 86 M by its shape);
                               # TRIAL's 50,000 would make its shape count 123 M, refused beside model.params
                               "model.vocab": ["1000"]}
EVERY = [p for p, s in FIGURES.items() if s.numeric and not p.startswith(("answer.", "sample_range.", "simulation."))]


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def _moved(a: Any, b: Any) -> bool:
    try:
        fa, fb = float(a), float(b)
    except (TypeError, ValueError):
        return a != b
    if math.isnan(fa) and math.isnan(fb):
        return False
    return not math.isclose(fa, fb, rel_tol=1e-9)


def _changes(key: str, value: Any, info: Any) -> list[str]:
    """The values tried for `key` at its base value: x 1.5 and x 0.5 (a count x 2 and / 2), the other
    choices of a choice, the other truth value, or the trial value of a key whose default is none."""
    if isinstance(value, bool):
        tried = [str(not value).lower()]
    elif value is None:
        tried = [TRIAL[key]] if key in TRIAL else []
    elif isinstance(value, float):
        tried = [repr(value * 1.5), repr(value * 0.5)]
    elif isinstance(value, int):
        tried = [repr(value * 2 if value else 1), repr(max(1, value // 2))]
    elif isinstance(value, str):
        tried = [repr(c) for c in schema._literal_choices(info.annotation) if c != value]
    else:
        tried = []
    return tried + EXTRA.get(key, [])


@pytest.fixture(scope="module")
def moved_figures() -> dict[str, set[str]]:
    """Each key -> every figure (of EVERY) a change of it moves, on any base workload."""
    out: dict[str, set[str]] = {}
    for path, overrides in BASES.values():
        base_w = load_workload(path, overrides)
        base = _flat(build_report(base_w))
        for section, model in schema.SECTIONS.items():
            for name, info in model.model_fields.items():
                key = f"{section}.{name}"
                for change in _changes(key, schema.leaf_value(base_w, key), info):
                    try:
                        report = _flat(build_report(load_workload(path, [*overrides, f"{key}={change}"])))
                    except UserError:
                        continue  # not a plan in this setting (e.g. kv_heads without heads)
                    out.setdefault(key, set()).update(f for f in EVERY if _moved(base.get(f), report.get(f)))
    return out


def test_declared_feeds_are_the_figures_a_change_moves(moved_figures: dict[str, set[str]]) -> None:
    wrong = []
    for key, role in schema.KEY_ROLES.items():
        if key.startswith("sources."):
            continue
        moved = moved_figures.get(key, set())
        expected = sorted(moved & set(ANSWER)) or sorted(moved)
        if sorted(role.feeds) != expected:
            wrong.append(f"{key}: declared {sorted(role.feeds)}, moves {expected}")
    assert not wrong, "\n".join(wrong)


def test_every_key_is_declared_with_q() -> None:
    """Each field has a default with its source and a role (a data source's name is the one required key)."""
    for section, model in (*schema.SECTIONS.items(), ("sources", schema.SourceSpec)):
        for name, info in model.model_fields.items():
            if (section, name) == ("sources", "name"):
                continue
            assert isinstance(info.json_schema_extra, dict) and "role" in info.json_schema_extra, f"{section}.{name}"
            assert info.description, f"{section}.{name}: no source of its default"


def test_plausible_range_is_enforced_from_the_declaration() -> None:
    """The range on the field is the one the boundary applies: just past each end is refused."""
    key, (low, high) = "cluster.link", schema.KEY_ROLES["cluster.link"].plausible
    assert (low, high) == (1e3, 1e16)
    for bad in (low, high):
        with pytest.raises(UserError, match="cluster.link"):
            load_workload(None, [f"cluster.link={bad!r}"])
    assert load_workload(None, [f"cluster.link={low * 2!r}"]).cluster.link == low * 2


def test_each_pipeline_argument_is_an_argument_of_the_account() -> None:
    """A key's declared `argument` names a parameter of accounts.pipeline.pipeline_arrays, and every
    key so declared is varied as an array by a sweep."""
    params = set(inspect.signature(pipeline_mod.PipelineArrays.__init__).parameters)
    declared = {k: r.argument for k, r in schema.KEY_ROLES.items() if r.argument}
    assert declared and set(declared.values()) <= params
    assert set(declared) <= inputs_mod.VECTOR_KEYS
    assert inputs_mod.PIPELINE_ARGS == declared


def test_the_key_reference_is_generated_from_the_declarations() -> None:
    assert keydocs.main(["--check"]) == 0, "docs/keys.md is out of date: python -m trainplan.present.keydocs"
    text = keydocs.DOCS_FILE.read_text(encoding="utf-8")
    for key in schema.KEY_ROLES:
        assert f"| `{key}` |" in text, key
    # a row read back: cluster.cores's unit, default, range and source as declared
    row = next(line for line in text.splitlines() if line.startswith("| `cluster.cores` |"))
    assert "| cores | 8 cores |" in row and ">= 0; plausible below 1e7" in row and "reference workload" in row


KIND_BASES = {"video": ("video", "video_more"), "images": ("images",), "tokens": ("tokens", "tokens_more")}


def test_a_key_declared_for_one_kind_of_data_moves_no_first_screen_figure_of_another() -> None:
    """`kinds` (KeyRole.kinds) leaves a key out of the human reports of other kinds of workload: a change of
    it there must move none of the first-screen figures (data.fps on a token workload plans the same)."""
    declared = {k: r for k, r in schema.KEY_ROLES.items() if r.kinds}
    assert {"data.fps", "cluster.core_fps_1080p", "data.bytes_per_token"} <= set(declared)
    wrong = []
    for kind, names in KIND_BASES.items():
        for name in names:
            path, overrides = BASES[name]
            base_w = load_workload(path, overrides)
            base = _flat(build_report(base_w))
            for key, role in declared.items():
                if role.applies_to(kind):
                    continue
                section, field_name = key.split(".")
                info = schema.SECTIONS[section].model_fields[field_name]
                for change in _changes(key, schema.leaf_value(base_w, key), info):
                    try:
                        report = _flat(build_report(load_workload(path, [*overrides, f"{key}={change}"])))
                    except UserError:
                        continue  # refused there (a camera's fps beside an image corpus): not used either
                    wrong += [f"{key}={change} on {name}: moves {f}" for f in ANSWER if _moved(base.get(f), report.get(f))]
    assert not wrong, "\n".join(wrong)


def test_every_figure_a_sweep_writes_has_its_own_label():
    # the sweep's table heads its columns with the labels: two columns both headed "demand" told a reader nothing
    from collections import Counter

    from trainplan.planning.figures import FIGURES

    labels = Counter(f.label for k, f in FIGURES.items() if f.sweep and not k.startswith("simulation."))
    assert [label for label, n in labels.items() if n > 1] == []
