"""Which model a workload plans, when it names one in more than one way.

`model.hf_config` gives the exact count and shape. A `model.params` written next to it
("7B" beside Llama-2-7B's config.json) must agree with that count to within
PARAMS_CONFIG_TOLERANCE, else the workload is refused: the two cannot both be the model.
When they agree, the config's exact count is the one planned.

`planned_model` then says, for the assumptions table, what the plan actually used for
each model key the user left out: the config's figures, or the count of the given shape,
never the built-in default model's.
"""

from __future__ import annotations

from typing import Any

from trainplan.errors import UserError
from trainplan.workload.params import ParamCount, count_from_hf_config, load_hf_config
from trainplan.workload.schema import Provenance, Workload

# A count written by hand is rounded to a name: "7B" for Llama-2-7B's 6.74 B is 3.9 % off, "8B"
# for Llama-3-8B's 8.03 B 0.4 %. Ten per cent admits every such one-or-two-digit name and refuses
# a count that belongs to another model (7B beside a 13 B config is 46 % off).
PARAMS_CONFIG_TOLERANCE = 0.10

# The model keys a config.json determines, and the ParamCount field each one reads.
CONFIG_KEYS = {
    "model.params": "total", "model.layers": "layers", "model.width": "width", "model.vocab": "vocab",
    "model.ffn_width": "ffn_width", "model.heads": "heads", "model.kv_heads": "kv_heads",
    "model.family": "family", "model.tied": "tied", "model.experts": "experts",
    "model.experts_per_token": "experts_per_token",
}


def config_count(workload: Workload) -> ParamCount | None:
    """The exact count of `model.hf_config` (relative to the workload file), or None without one."""
    name = workload.model.hf_config
    if name is None:
        return None
    path = workload.base_dir / name
    try:
        return count_from_hf_config(load_hf_config(path))
    except UserError as err:  # name the workload key and the file
        where = err.where if str(path) in err.where else f"model.hf_config ({name}): {err.where}"
        raise UserError(where, err.expected) from None


# The shape keys checked against a config.json (issue 29): each one given beside model.hf_config must
# say what the config says, else the two name different models and neither silently wins.
CHECKED_KEYS = ("layers", "width", "heads", "kv_heads", "vocab", "ffn_width", "family", "tied", "experts",
                "experts_per_token", "head_dim")


def check_keys_against_config(workload: Workload, count: ParamCount) -> None:
    """UserError naming the first model key given beside model.hf_config that disagrees with the
    config's figure (the config's own figures were held to the workload keys' ranges when it was read:
    params.load_hf_config)."""
    name = workload.model.hf_config
    for key in CHECKED_KEYS:
        if not _user_given(workload, f"model.{key}"):
            continue
        given, said = getattr(workload.model, key), getattr(count, key, None)
        if key == "family":  # the config's family may say how it was counted: "gemma (transformers, ...)"
            said = str(said).split(" ")[0]
        if given is not None and said is not None and given != said:
            raise UserError(f"model.{key}", f"expected {said!r} as model.hf_config {name} says, got {given!r}; "
                            "give one of the two")


def reconcile_params_with_config(workload: Workload, count: ParamCount | None = None) -> Workload:
    """Refuse a model.params that disagrees with model.hf_config; when they agree, plan the config's
    exact count (the given figure is dropped and the provenance says it agreed). `count`: the config's
    count when the caller has it."""
    if workload.model.hf_config is None:
        return workload
    count = count if count is not None else config_count(workload)
    assert count is not None
    check_keys_against_config(workload, count)
    given = workload.model.params
    if given is None:
        return workload
    name = workload.model.hf_config
    which, miss = check_params_against_count(given, count, f"model.hf_config {name}")
    planned = workload.model_copy(update={"model": workload.model.model_copy(update={"params": None})})
    planned._provenance = dict(workload.provenance)
    planned._provenance["model.params"] = Provenance(
        "derived", f"exact count from {name} ({count.family}); the given {given:,.0f} agrees with its "
        f"{which} count within {miss * 100:.1f} %")
    return planned


def check_params_against_count(given: float, count: ParamCount, counted_by: str) -> tuple[str, float]:
    """(which count it agrees with, "total" or "active", and how far off): a given model.params against the
    count of a config.json or a shape (`counted_by` names it); UserError beyond PARAMS_CONFIG_TOLERANCE of
    both. A mixture of experts is also named by its active count."""
    candidates = {"total": float(count.total)}
    if count.active != count.total:
        candidates["active"] = float(count.active)
    misses = {which: abs(given - n) / n for which, n in candidates.items()}
    which = min(misses, key=misses.__getitem__)
    if misses[which] > PARAMS_CONFIG_TOLERANCE:
        shown = f"{count.total:,} parameters" + (f", {count.active:,} active" if "active" in candidates else "")
        raise UserError("model.params", f"expected a count within {PARAMS_CONFIG_TOLERANCE * 100:.0f} % of "
                        f"{counted_by} ({shown}), got {given:,.0f} ({misses[which] * 100:.1f} % off); "
                        "give one of the two")
    return which, misses[which]


def _user_given(workload: Workload, key: str) -> bool:
    return workload.given(key)


def planned_model(workload: Workload, facts: Any) -> dict[str, dict[str, Any]]:
    """Assumption rows for the model keys the plan filled in itself.

    `facts` is the resolved model (planning.evaluate.ModelFacts: params, layers, width, heads,
    kv_heads, vocab, source). With a config.json every key it determines is shown with the config's
    value; with a shape alone the counted parameters are shown. Keys the user gave are left alone."""
    rows: dict[str, dict[str, Any]] = {}
    count = config_count(workload)
    if count is not None:
        source = f"{workload.model.hf_config} ({count.family})"
        for key, field_name in CONFIG_KEYS.items():
            if key != "model.params" and _user_given(workload, key):
                continue
            value = getattr(count, field_name)
            prov = workload.provenance.get(key)
            if key == "model.params":  # keep the note that a given count agreed (reconcile_params_with_config)
                text = prov.source if prov is not None and prov.kind == "derived" else f"exact count from {source}"
            else:
                text = f"from {source}"
            rows[key] = {"value": value, "provenance": "derived", "source": text}
        return rows
    if workload.model.params is None:
        rows["model.params"] = {"value": facts.params, "provenance": "derived", "source": facts.source}
    for key, value in (("model.heads", facts.heads), ("model.kv_heads", facts.kv_heads)):
        if getattr(workload.model, key.split(".")[1]) is None and value is not None:
            rows[key] = {"value": value, "provenance": "derived", "source": "width / 64 (64-wide heads)"
                         if key == "model.heads" else "equal to model.heads (no grouped-query attention)"}
    return rows
