"""The workload file: one TOML document naming every assumption of a job (docs/workload.md).

Every leaf has a default with a unit and a source; the source of a default is
the `description` of its field, so `trainplan validate` and the report can say
where each number came from. Values are validated here, at the boundary, and
converted to SI base units; the accounts downstream trust them.

Provenance of a leaf: `assumed` (a default, or a value the user wrote — a
user's figure is still an assumption until measured), `measured` (from a
calibration file written by a probe), or `derived` (computed by trainplan).
"""

from __future__ import annotations

import copy
import re
import difflib
import math
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Callable, Final, Literal, Union, get_args, get_origin

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError,
                      ValidationInfo, field_validator)
from pydantic_core import PydanticCustomError

from trainplan import units
from trainplan.catalogue.accelerators import Accelerator, PriceRow, price_table, resolve_accelerator
from trainplan.errors import UserError, did_you_mean, expected_wording
from trainplan.workload.codecs import CODEC_ALIASES, CODECS, FRAME_KINDS

# ---------------------------------------------------------------- unit-aware field types


def _unit(dimension: units.Dimension):  # noqa: ANN202 - a pydantic validator factory
    def convert(value: Any) -> Any:
        if value is None:
            return None
        try:
            return units.parse(value, dimension)
        except UserError as err:  # re-raised as ValueError so pydantic attaches the key
            raise ValueError(err.expected) from None

    return BeforeValidator(convert)


# The largest count float64 holds exactly; no real layer, camera or frame count comes near it.
LARGEST_WHOLE = units.LARGEST_WHOLE


#: The nouns a whole-number key may name what it counts with ("32 layers", "8 gpus"), by field name; a count
#: noun of another thing ("8 tokens" for a micro-batch of sequences) is refused, not read as the number
#: (issue 29). A field not listed takes a number alone.
OWN_NOUNS: Final[dict[str, tuple[str, ...]]] = {
    "layers": ("layers", "layer"), "heads": ("heads", "head"), "kv_heads": ("heads", "head"),
    "experts": ("experts", "expert"), "experts_per_token": ("experts", "expert"),
    "cameras": ("cameras", "camera"), "count": ("devices", "device", "gpus", "gpu", "accelerators", "accelerator"),
    "micro_batch": ("sequences", "sequence"), "batch": ("sequences", "sequence", "requests", "request"),
    "side": ("px", "pixels", "pixel"), "width": ("px", "pixels", "pixel"), "height": ("px", "pixels", "pixel"),
    "patch": ("px", "pixels", "pixel"), "gop": ("frames", "frame"), "vocab": ("tokens", "token"),
    "context": ("tokens", "token"), "grad_accum": ("steps", "step"),
}
#: What each rate key counts a second: a frame rate written "30 tokens/s" names another thing (issue 29).
RATE_NOUN: Final[dict[str, str]] = {"tokenizer_rate": "tokens"}


def _refuse_other_noun(value: Any, field: str | None) -> None:
    """ValueError where `value` ends in a count noun that is not one of `field`'s own (OWN_NOUNS)."""
    if not isinstance(value, str) or field is None:
        return
    last = re.search(r"([A-Za-z]+)\s*$", value)
    if last is None or last.group(1).lower() not in units.COUNT_NOUNS:
        return
    own = OWN_NOUNS.get(field, ())
    if last.group(1).lower() not in own:
        also = f", optionally followed by {own[0]!r}" if own else " (a number alone)"
        raise ValueError(f"expected a whole number{also}, got {value!r}")


def _whole(value: Any, info: ValidationInfo) -> Any:
    """Counts of things (layers, cameras) may be written 1e3 or "4k" but must be whole, and may name only
    what they count (OWN_NOUNS)."""
    if value is None or isinstance(value, bool):
        return value
    _refuse_other_noun(value, info.field_name)
    try:
        number = units.parse(value, "count")
    except UserError as err:
        raise ValueError(err.expected) from None
    if number != math.floor(number):
        raise ValueError(f"expected a whole number, got {value!r}")
    if abs(number) > LARGEST_WHOLE:
        # beyond 2^53 a count is no longer exact in float64, and numpy's int64 overflows silently
        raise ValueError(f"expected a whole number below 2^53 ({LARGEST_WHOLE:.3g}), got {value!r}")
    return int(number)


def _natural(reader: Any, *args: Any):  # noqa: ANN202 - a pydantic validator factory
    """A validator from one of units' natural-form readers (sizes, hours, headroom, counted nouns)."""
    def convert(value: Any) -> Any:
        if value is None:
            return None
        try:
            return reader(value, *args)
        except UserError as err:  # re-raised as ValueError so pydantic attaches the key
            raise ValueError(err.expected) from None

    return BeforeValidator(convert)


def _whole_sequence(value: Any) -> Any:
    """A sequence length in whole tokens: 2048, "8k" (8,192), "128k tokens" (131,072)."""
    if value is None or isinstance(value, bool):
        return value
    try:
        number = units.parse(value, "sequence_length")
    except UserError as err:
        raise ValueError(err.expected) from None
    if number != math.floor(number) or abs(number) > LARGEST_WHOLE:
        raise ValueError(f"expected a whole number of tokens, got {value!r}")
    return int(number)


def _codec(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    name = value.strip().lower()
    return CODEC_ALIASES.get(name, name)


def _bytes_per_token(value: Any) -> Any:
    """Bytes per token, "4", "4 B" or "4 bytes/token": small on purpose, so no size floor here."""
    if isinstance(value, str):
        text = value.strip()
        for per in ("/token", " per token"):
            if text.endswith(per):
                text = text[: -len(per)]
        value = text
    try:
        return units.parse(value, "bytes")
    except UserError as err:
        raise ValueError(err.expected) from None


Count = Annotated[float, _unit("count")]
Whole = Annotated[int, BeforeValidator(_whole)]
# A plain number below a megabyte is refused ("80 bytes? write 80 GB"): see units.parse_size.
Bytes = Annotated[float, _natural(units.parse_size)]
# The size of one image: a plain number is read in bytes (a JPEG is tens to hundreds of kB), without the
# "80 bytes? write 80 GB" refusal of sizes of memory and datasets.
ImageBytes = Annotated[float, _unit("bytes")]
BytesPerToken = Annotated[float, BeforeValidator(_bytes_per_token)]
SequenceLength = Annotated[int, BeforeValidator(_whole_sequence)]
Hours = Annotated[float, _natural(units.parse_hours)]
Months = Annotated[float, _natural(units.parse_months)]
Headroom = Annotated[float, _natural(units.parse_headroom)]
Cores = Annotated[float, _natural(units.parse_counted, ("cores", "core"))]
# counts that may name what they count, and may not name another thing ("7B tokens" is not a model size)
Params = Annotated[float, _natural(units.parse_counted, units.PARAM_NOUNS)]
Tokens = Annotated[float, _natural(units.parse_counted, units.TOKEN_NOUNS)]
Epochs = Annotated[float, _natural(units.parse_counted, ("epochs", "epoch"))]
Attempts = Annotated[float, _natural(units.parse_counted, ("attempts", "attempt"))]
# Prices may name what they are per: "$3/h", "$0.023/GB-month", "$0.01 per GB".
HOUR_SUFFIXES = ("/h", "/hr", "/hour", " per hour", " an hour", "/accelerator-hour", "/gpu-hour", "/core-hour",
                 "/device-hour", " per accelerator-hour", " per core-hour")
PerHourPrice = Annotated[float, _natural(units.parse_price, HOUR_SUFFIXES)]
PerGBPrice = Annotated[float, _natural(units.parse_price, ("/GB", " per GB"))]
PerGBMonthPrice = Annotated[float, _natural(units.parse_price, ("/GB-month", "/GB/month", "/GB per month",
                                                               " per GB-month", " per GB per month"))]
PerDay = Annotated[float, _natural(units.parse_counted, ("requests a day", "requests per day", "requests/day",
                                                         "per day", "a day", "/day", "requests"))]
ByteRate = Annotated[float, _unit("byte_rate")]
BitRate = Annotated[float, _unit("bit_rate")]
FlopRate = Annotated[float, _unit("flop_rate")]
Seconds = Annotated[float, _unit("time")]
Watts = Annotated[float, _unit("power")]
Fraction = Annotated[float, _unit("fraction")]
def _rate(value: Any, info: ValidationInfo) -> Any:
    """A rate a second: "30", "30 fps", "1M tokens/s"; a rate of frames may not be written in tokens, nor a
    rate of tokens in frames (RATE_NOUN; issue 29)."""
    if value is None:
        return None
    if isinstance(value, str):
        counted = RATE_NOUN.get(info.field_name or "", "frames")
        other = "frames" if counted == "tokens" else "tokens"
        text = value.strip().lower()
        if text.endswith(f"{other}/s") or (counted == "tokens" and text.endswith("fps")):
            raise ValueError(f"expected a rate of {counted} a second such as 30 or 30 {counted}/s, got {value!r}")
    try:
        return units.parse(value, "frequency")
    except UserError as err:
        raise ValueError(err.expected) from None


PerSecond = Annotated[float, BeforeValidator(_rate)]
Dollars = Annotated[float, _unit("dollars")]
CarbonIntensity = Annotated[float, _unit("carbon")]


#: Field types pydantic turns text into a float for, without a unit's parser (which checks the number itself).
_PLAIN_FLOATS: Final = (float, float | None)


def _number_as_text(text: str) -> None:
    """Nothing, or the numeric boundary's refusal of a number written as text ("5e-324", "1e400", 401
    digits) as a ValueError: the same words as the number unquoted gets, never 'inf'. Text that is not a
    number passes (pydantic says so, naming the key)."""
    try:
        float(text.strip().replace("_", ""))
    except ValueError:
        return
    try:
        units.number(text)
    except UserError as err:
        raise ValueError(err.expected) from None


class Section(BaseModel):
    # allow_inf_nan=False: plain float fields (cores, hours, epochs...) refuse inf and nan too
    model_config = ConfigDict(extra="forbid", validate_default=False, frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        """pydantic's lax mode reads true as 1.0; only a true/false key takes true or false."""
        if isinstance(value, bool) and cls.model_fields[info.field_name].annotation is not bool:
            raise ValueError("expected a number or a name, not true or false")
        # and the other way round: a true/false key takes only true or false, not 1 or "yes"
        if not isinstance(value, bool) and cls.model_fields[info.field_name].annotation is bool:
            raise ValueError("expected true or false")
        if isinstance(value, str):  # text reaches a terminal: no escape sequences (issue 16)
            from trainplan.limits import printable

            text = printable(value)
            if cls.model_fields[info.field_name].annotation in _PLAIN_FLOATS:
                _number_as_text(text)
            return text
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:  # the numeric boundary: past float range, inf, nan, subnormal (issue 29)
                units.number(value)
            except UserError as err:
                raise ValueError(err.expected) from None
        return value

    @field_validator("*", mode="before")
    @classmethod
    def _choice_in_any_case(cls, value: Any, info: ValidationInfo) -> Any:
        """Enumerations read in any case and with - or _ ("AdamW", "GPT-NeoX"); a wrong one gets the
        nearest name."""
        choices = _literal_choices(cls.model_fields[info.field_name].annotation)
        if not choices or not isinstance(value, str):
            return value
        return match_choice(value, choices)


def _literal_choices(annotation: Any) -> tuple[str, ...]:
    """The string choices of a Literal annotation (or of Optional[Literal]); empty for anything else."""
    if get_origin(annotation) is Literal:
        return tuple(a for a in get_args(annotation) if isinstance(a, str))
    if get_origin(annotation) in (Union, UnionType):
        return tuple(c for arg in get_args(annotation) for c in _literal_choices(arg))
    return ()


def match_choice(value: str, choices: tuple[str, ...]) -> str:
    """`value` as one of `choices`, ignoring case, spaces, - and _; else ValueError naming the nearest."""
    def norm(text: str) -> str:
        return text.strip().lower().replace("-", "_").replace(" ", "_")

    by_norm = {norm(c): c for c in choices}
    if norm(value) in by_norm:
        return by_norm[norm(value)]
    listed = ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}" if len(choices) > 1 else repr(choices[0])
    raise ValueError(f"expected {listed}{did_you_mean(value, choices)}")


SweepRole = Literal["array", "shape", "rebuild"]


#: KeyRole.kinds of the keys that mean something for one kind of data only
VIDEO: Final = ("video",)
IMAGES: Final = ("images",)
TOKENS: Final = ("tokens",)


@dataclass(frozen=True)
class KeyRole:
    """What a workload key is beyond its type, declared on its field with `Q` (the docs' key reference,
    docs/keys.md, is generated from it by present/keydocs.py)."""

    plausible: tuple[float | None, float | None] | None  # exclusive: beyond it a typo or a unit slip, not a plan
    feeds: tuple[str, ...]  # report figures a change of the key moves (tests/test_key_declarations.py checks)
    sweep: SweepRole  # array: enters the formulas as an array; shape: an array while the count is
    #                   model.params and the shape sizes activations alone; rebuild: a workload per value
    argument: str | None  # the argument of accounts.pipeline.pipeline_arrays the key is, if any
    execution: bool  # the execution model (planning/execution.py) reads it
    kinds: tuple[str, ...] = ()  # the data.kind values the key means something for; () for every kind

    def applies_to(self, kind: str) -> bool:
        """Whether the key means something for a workload of data.kind `kind` (a camera's fps does not for tokens)."""
        return not self.kinds or kind in self.kinds


def Q(default: Any, source: str, *, plausible: tuple[float | None, float | None] | None = None,  # noqa: N802
      feeds: tuple[str, ...] = (), sweep: SweepRole | None = None, argument: str | None = None,
      execution: bool = False, kinds: tuple[str, ...] = (), **constraints: Any) -> Any:
    """A field with its default and the source of that default, and its role (KeyRole): its plausible
    range (added to the field's bounds), the figures it feeds, how a sweep varies it and the data kinds
    it applies to."""
    role = {"plausible": plausible, "feeds": list(feeds), "sweep": sweep or ("array" if argument else "rebuild"),
            "argument": argument, "execution": execution, "kinds": list(kinds)}
    info = Field(default=default, description=source, json_schema_extra={"role": role}, **constraints)
    # the plausible range is checked after the field's own parsing and constraints (the unit's parser, gt=0),
    # so a value outside the key's meaning (0 hours) is refused in those words first; added here, before the
    # section is built, so each model's validator is built once at import
    if plausible is not None and plausible != (None, None):
        info.metadata.append(AfterValidator(_plausible_check(*plausible)))
    return info


def _plausible_check(low: float | None, high: float | None) -> Callable[[Any], Any]:
    """The check of a plausible range (exclusive), raising pydantic's own greater_than / less_than errors so
    they are worded as any bound is (workload_error)."""
    def check(value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if low is not None and not value > low:
                raise PydanticCustomError("greater_than", "Input should be greater than {gt}", {"gt": low})
            if high is not None and not value < high:
                raise PydanticCustomError("less_than", "Input should be less than {lt}", {"lt": high})
        return value
    return check


def key_role(info: Any) -> KeyRole:
    """The KeyRole a field was declared with (a field declared without Q: no range, feeds nothing)."""
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    role = extra.get("role") or {}
    plausible = role.get("plausible")
    return KeyRole(tuple(plausible) if plausible is not None else None, tuple(role.get("feeds", ())),
                   role.get("sweep", "rebuild"), role.get("argument"), bool(role.get("execution", False)),
                   tuple(role.get("kinds", ())))


# ---------------------------------------------------------------- sections


class ModelSection(Section):
    params: Params | None = Q(None, "assumed (no model given): the 93 M-parameter video model of the "
                             "reference workload", ge=1,
        plausible=(None, 1e15), sweep="array", execution=True, feeds=("bill.total", "compute.seconds_per_step",
          "compute.wall_seconds", "energy.kg_co2", "memory.per_device_bytes", "pipeline.busy",
          "pipeline.cores_needed", "serving.cost_per_request", "storage.retained_bytes", "training_cost.budget"))
    layers: Whole | None = Q(None, "assumed (no model given): a ViT-Base shape (Dosovitskiy et al. 2021), "
                             "12 layers", gt=0,
        plausible=(None, 100000), sweep="shape", execution=True, feeds=("bill.total", "compute.seconds_per_step",
          "compute.wall_seconds", "energy.kg_co2", "memory.per_device_bytes", "pipeline.cores_needed",
          "serving.cost_per_request", "storage.retained_bytes", "training_cost.budget"))
    width: Whole | None = Q(None, "assumed (no model given): a ViT-Base shape, width 768", gt=0,
        plausible=(None, 1e7), sweep="shape", execution=True, feeds=("bill.total", "compute.seconds_per_step",
          "compute.wall_seconds", "energy.kg_co2", "memory.per_device_bytes", "pipeline.cores_needed",
          "serving.cost_per_request", "storage.retained_bytes", "training_cost.budget"))
    vocab: Whole | None = Q(None, "none: not given (a vision model has no vocabulary; with model.params the "
                            "count is as given, with a shape alone no embedding is counted)", gt=0,
        plausible=(None, 1e9), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "memory.per_device_bytes", "pipeline.busy", "pipeline.cores_needed",
          "serving.cost_per_request", "storage.retained_bytes", "training_cost.budget"))
    ffn_width: Whole | None = Q(None, "none: 4 x width, the standard block of docs/parameter-counts.md", gt=0,
        plausible=(None, 1e8), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "memory.per_device_bytes", "pipeline.busy", "pipeline.cores_needed",
          "serving.cost_per_request", "storage.retained_bytes", "training_cost.budget"))
    heads: Whole | None = Q(None, "none: width / 64 when needed (64-wide heads, GPT-2/ViT convention)", gt=0,
        plausible=(None, 1e6), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "memory.per_device_bytes", "pipeline.busy", "pipeline.cores_needed",
          "serving.cost_per_request", "storage.retained_bytes", "training_cost.budget"))
    kv_heads: Whole | None = Q(None, "none: equal to heads (no grouped-query attention)", gt=0,
        plausible=(None, 1e6), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "memory.per_device_bytes", "serving.cost_per_request", "storage.retained_bytes",
          "training_cost.budget"))
    # min_length: a path that is empty names the workload's own folder, not a file
    hf_config: str | None = Q(None, "none: a Hugging Face config.json gives the exact count", min_length=1)
    family: Literal["standard", "llama", "mistral", "qwen2", "gpt2", "gpt_neox", "mixtral"] = Q(
        "standard", "the standard 12 d^2 block (docs/parameter-counts.md) unless a family is named",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "pipeline.busy", "pipeline.cores_needed", "serving.cost_per_request",
          "storage.retained_bytes", "training_cost.budget"))
    tied: bool = Q(True, "assumed: input and output embeddings tied",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "pipeline.busy", "pipeline.cores_needed", "serving.cost_per_request",
          "storage.retained_bytes", "training_cost.budget"))
    experts: Whole = Q(1, "dense model: one expert", gt=0,
        plausible=(None, 1e6), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "memory.per_device_bytes", "pipeline.busy", "pipeline.cores_needed",
          "serving.cost_per_request", "storage.retained_bytes", "training_cost.budget"))
    experts_per_token: Whole = Q(1, "dense model: one expert per token", gt=0,
        plausible=(None, 1e6), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "memory.per_device_bytes", "pipeline.busy", "pipeline.cores_needed",
          "training_cost.budget"))
    head_dim: Whole | None = Q(None, "none: width / heads (set it for models whose head size differs, e.g. Gemma's 256)",
                               gt=0,
        plausible=(None, 100000), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "memory.per_device_bytes", "serving.cost_per_request", "storage.retained_bytes",
          "training_cost.budget"))
    norm: Literal["rmsnorm_fp32", "rmsnorm", "layernorm"] | None = Q(
        None, "derived from model.family (catalogue/activation_traits.toml)",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "pipeline.busy", "pipeline.cores_needed", "training_cost.budget"))
    mlp: Literal["swiglu", "gelu", "gelu_new"] | None = Q(
        None, "derived from model.family (catalogue/activation_traits.toml)",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "pipeline.busy", "pipeline.cores_needed", "training_cost.budget"))


def sharding_of_zero(zero: int) -> str:
    """The sharding training.zero names when training.sharding is left out: 0 none, 1-3 DeepSpeed's stages."""
    return ("none", "zero1", "zero2", "zero3")[zero]


class TrainingSection(Section):
    tokens: Tokens | None = Q(None, "derived: data.hours of video x tokens per hour x epochs", ge=1,
        plausible=(None, 1e18), sweep="array", feeds=("compute.wall_seconds", "energy.kg_co2",
          "storage.retained_bytes", "training_cost.budget"))
    micro_batch: Whole = Q(8, "assumed: 8 sequences per device per micro-step", gt=0,
        plausible=(None, 1e7), sweep="array", execution=True, feeds=("bill.total", "compute.seconds_per_step",
          "compute.wall_seconds", "energy.kg_co2", "memory.per_device_bytes", "pipeline.cores_needed",
          "training_cost.budget"))
    seq_len: SequenceLength = Q(2048, "assumed: 2,048 tokens per sequence", gt=0,
        plausible=(None, 1e9), sweep="array", execution=True, feeds=("bill.total", "compute.seconds_per_step",
          "compute.wall_seconds", "energy.kg_co2", "memory.per_device_bytes", "pipeline.cores_needed",
          "training_cost.budget"))
    grad_accum: Whole = Q(1, "assumed: no gradient accumulation", gt=0,
        plausible=(None, 1e7), sweep="array", execution=True, feeds=("bill.total", "compute.seconds_per_step",
          "compute.wall_seconds", "energy.kg_co2", "pipeline.cores_needed", "training_cost.budget"))
    optimizer: Literal["adamw", "adam", "sgd"] = Q("adamw", "assumed: AdamW, the field's default",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "pipeline.cores_needed", "storage.retained_bytes", "training_cost.budget"))
    precision: Literal["bf16", "fp16", "fp32"] = Q("bf16", "assumed: bf16 mixed precision with fp32 master weights",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "pipeline.busy", "pipeline.cores_needed", "storage.retained_bytes",
          "training_cost.budget"))
    recompute: Literal["none", "selective", "full"] = Q("none", "assumed: no activation recomputation",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "pipeline.cores_needed", "training_cost.budget"))
    zero: int = Q(0, "assumed: no ZeRO/FSDP sharding", ge=0, le=3,
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "pipeline.cores_needed", "training_cost.budget"))
    saved_tensors_per_layer: float = Q(
        17.0,
        "Korthikanti et al. 2022 eq. 1: 34 s.b.h bytes per layer at 2 bytes = 17 width-sized tensors "
        "per token, attention scores not stored (flash attention)",
        gt=0,
        plausible=(0.001, 10000), sweep="array", feeds=("bill.total", "compute.seconds_per_step",
          "compute.wall_seconds", "energy.kg_co2", "memory.per_device_bytes", "pipeline.cores_needed",
          "training_cost.budget"))
    selective_keep: Fraction = Q(
        23 / 34,
        "Korthikanti et al. 2022 eq. 1: selective recomputation re-runs the attention block "
        "(11 of 34 s.b.h bytes), keeping 23/34 of the tensors",
        gt=0,
        le=1,
        sweep="array")
    epochs: Epochs = Q(1.0, "assumed: one pass over the data", gt=0,
        plausible=(1e-06, 1e7), sweep="array", feeds=("compute.wall_seconds", "energy.kg_co2",
          "storage.retained_bytes", "training_cost.budget"))
    retrain_every: Seconds | None = Q(
        None, "assumed: trained once; a duration such as 30 days makes training a recurring cost a year", gt=0,
        plausible=(59, 3.2e9), feeds=("decisions.recurring.retrain_every_seconds",
          "decisions.recurring.total_per_year", "decisions.recurring.training_per_year",
          "decisions.recurring.trainings_per_year"))
    attention: Literal["sdpa", "flash", "eager"] = Q(
        "sdpa", "assumed: fused attention (SDPA/FlashAttention): no S^2 tensor kept, causal half executed",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "pipeline.cores_needed", "training_cost.budget"))
    dropout: bool = Q(False, "assumed: no dropout, as in current LLM pre-training (Llama, Mistral, Qwen2)",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "training_cost.budget"))
    method: Literal["full", "lora", "qlora"] = Q("full", "assumed: every weight trained",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "training_cost.budget"))
    lora_rank: Whole = Q(16, "assumed: LoRA rank 16 (Hu et al. 2021 use 1-64)", gt=0,
        plausible=(None, 100000), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "memory.per_device_bytes", "training_cost.budget"))
    lora_targets: list[Literal["q", "k", "v", "o", "gate", "up", "down"]] = Q(
        ["q", "k", "v", "o"], "assumed: the attention projections, LoRA's original targets (Hu et al. 2021 §7.1)",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "training_cost.budget"))
    state_recipe: Literal["mixed_fp32_master", "autocast_fp32", "pure_bf16", "adam_8bit", "sgd_momentum",
                          "bf16_fp32_master_grads", "fp8_te", "megatron_fp32_main_grad"] | None = Q(
        None, "derived: from training.precision and training.optimizer (catalogue/state_recipes.toml)",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "pipeline.cores_needed", "training_cost.budget"))
    sharding: Literal["none", "zero1", "zero2", "zero3", "fsdp"] | None = Q(
        None, "derived: from training.zero (0 none, 1-3 DeepSpeed ZeRO stages)",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "pipeline.cores_needed", "training_cost.budget"))
    activation_bytes_per_layer_token: float | None = Q(
        None, "none: from the architecture; `trainplan probe model --output` measures it", gt=0,
        plausible=(None, 1e9), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "memory.per_device_bytes", "pipeline.cores_needed", "training_cost.budget"))
    activation_bytes_outside_token: float | None = Q(
        None, "none: from the architecture; `trainplan probe model --output` measures it", ge=0,
        plausible=(None, 1e10))

    @field_validator("lora_targets")
    @classmethod
    def _each_target_once(cls, value: list[str]) -> list[str]:
        """A target named twice would count its adapters twice (issue 29)."""
        twice = sorted({t for t in value if value.count(t) > 1})
        if twice:
            raise ValueError(f"expected each projection once, got {', '.join(repr(t) for t in twice)} more than once")
        if not value:
            raise ValueError("expected at least one projection to adapt (q, k, v, o, gate, up, down)")
        return value


class ClusterSection(Section):
    accelerator: str | dict[str, Any] = Q("h100-sxm", "reference workload: one H100-SXM",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2", "pipeline.busy",
          "pipeline.cores_needed", "serving.cost_per_request", "training_cost.budget"))
    count: Whole = Q(1, "reference workload: one accelerator", gt=0,
        plausible=(None, 1e8), sweep="array", execution=True, feeds=("bill.total", "compute.seconds_per_step",
          "compute.wall_seconds", "energy.kg_co2", "memory.per_device_bytes", "pipeline.cores_needed",
          "training_cost.budget"))
    # an MFU of 1e-20 plans a run of 10^20 times its compute (issue 29): below 0.01 % no training run is meant
    mfu: Fraction = Q(0.4, "reference workload: MFU 0.4, typical of dense transformer training", gt=0, le=1,
        plausible=(1e-4, None), argument="mfu", execution=True, feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "pipeline.busy", "pipeline.cores_needed", "training_cost.budget"))
    hfu: Fraction | None = Q(None, "none: time follows cluster.mfu; give hfu (executed FLOPs, recomputation and "
                             "causal attention as run) to have time follow it instead", gt=0, le=1,
        plausible=(1e-4, None), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2", "pipeline.busy",
          "pipeline.cores_needed", "training_cost.budget"))
    mfu_end_to_end: bool = Q(False, "assumed: MFU is a single-device figure, so scaling efficiency applies",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "training_cost.budget"))
    scaling_efficiency: Fraction = Q(
        0.9, "assumed: 90 % data-parallel efficiency at modest scale; 1 by definition on one device", gt=0, le=1,
        sweep="array", execution=True, feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "training_cost.budget"))
    cores: Cores = Q(8.0, "reference workload: 8 CPU cores per accelerator", ge=0,
        plausible=(None, 1e7), argument="cores", feeds=("bill.total", "compute.wall_seconds", "energy.kg_co2",
          "pipeline.busy", "training_cost.budget"))
    core_fps_1080p: PerSecond = Q(
        120.0, "reference workload: a CPU core decodes 120 frames/s of 1080p H.264, colour conversion and resize included",
        gt=0,
        plausible=(0.001, 1e8), argument="core_fps_1080p", feeds=("bill.total", "compute.wall_seconds",
          "energy.kg_co2", "pipeline.busy", "pipeline.cores_needed", "training_cost.budget"), kinds=FRAME_KINDS)
    nvdec: bool = Q(False, "assumed: decode on CPU cores only",
        feeds=("bill.total", "compute.wall_seconds", "energy.kg_co2", "pipeline.busy", "pipeline.cores_needed",
          "training_cost.budget"), kinds=VIDEO)
    nvdec_fps_1080p: PerSecond = Q(
        771.0, "assumed: one NVDEC engine decodes 771 frames/s of 1080p H.264 (NVIDIA application note, indicative)",
        gt=0,
        plausible=(0.001, 1e9), argument="nvdec_fps_1080p", feeds=("bill.total", "compute.wall_seconds",
          "energy.kg_co2", "pipeline.busy", "pipeline.cores_needed", "training_cost.budget"), kinds=VIDEO)
    link: ByteRate = Q(1.5e9, "reference workload: 1.5 GB/s from storage to the host", gt=0,
        plausible=(1000, 1e16), argument="link", feeds=("bill.add_cores.busy_after",
          "bill.add_cores.extra_core_cost", "bill.add_cores.idle_removed", "bill.add_cores.net_saving",
          "bill.epoch_seconds_at_cores_needed", "decisions.loading.load_seconds",
          "decisions.loading.serial_step_seconds", "decisions.loading.serial_utilisation",
          "decisions.loading.speedup", "pipeline.cache.read_rate", "pipeline.cache.remote_rate",
          "pipeline.stages.read.tokens_per_second", "pipeline.supply_fps", "pipeline.supply_tokens_per_second",
          "pipeline.threshold_params"))
    interconnect: ByteRate | None = Q(None, "catalogue: the accelerator's interconnect per direction", gt=0,
        plausible=(1000, 1e16), sweep="array", execution=True, feeds=("bill.total", "compute.seconds_per_step",
          "compute.wall_seconds", "energy.kg_co2", "pipeline.cores_needed", "serving.cost_per_request",
          "training_cost.budget"))
    host_to_device: ByteRate = Q(
        25e9, "assumed: 25 GB/s usable host-to-device, PCIe Gen4 x16 (32 GB/s raw) at ~80 %", gt=0,
        plausible=(1000, 1e17), argument="host_to_device", feeds=("pipeline.stages.transfer.tokens_per_second",))
    runtime_buffers: Bytes = Q(
        2e9, "assumed: 2 GB per device for the CUDA context, NCCL buffers and allocator fragmentation", ge=0,
        plausible=(None, 1e16), sweep="array", execution=True, feeds=("memory.per_device_bytes",))
    headroom: Headroom = Q(0.1, "assumed: keep 10 % of the card free (1.25 or 1.25x is a multiplier: 25 %)",
                           ge=0, le=10,
        sweep="array", execution=True, feeds=("memory.per_device_bytes",))
    prefetch: bool = Q(True, "assumed: the loader prefetches, so a step costs max(load, compute)",
        feeds=("bill.total", "compute.wall_seconds", "energy.kg_co2", "pipeline.busy", "training_cost.budget"))
    devices_per_node: Whole | None = Q(None, "catalogue: the accelerator's node platform (interconnect.toml; "
                                       "8 for DGX/HGX nodes)", gt=0,
        plausible=(None, 10000), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "pipeline.cores_needed", "training_cost.budget"))
    node_link: ByteRate | None = Q(None, "catalogue: the platform's inter-node NIC rate per device "
                                   "(interconnect.toml; A100: one HDR 200 Gb/s port per GPU)", gt=0,
        plausible=(1000, 1e16), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "training_cost.budget"))


class ParallelSection(Section):
    """The layout over cluster.count devices (issue 13); training.micro_batch is the micro-batch
    and training.grad_accum the micro-batches per step of each pipeline."""

    tensor: Whole = Q(1, "assumed: no tensor parallelism", gt=0,
        plausible=(None, 1e6), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "memory.per_device_bytes", "pipeline.cores_needed", "training_cost.budget"))
    pipeline: Whole = Q(1, "assumed: no pipeline parallelism", gt=0,
        plausible=(None, 1e6), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "memory.per_device_bytes", "pipeline.cores_needed", "training_cost.budget"))
    interleave: Whole = Q(1, "assumed: one model chunk per pipeline stage (no interleaving)", gt=0,
        plausible=(None, 10000), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "memory.per_device_bytes", "training_cost.budget"))
    schedule: Literal["1f1b", "interleaved", "gpipe"] = Q(
        "1f1b", "Narayanan et al. 2021: 1F1B, Megatron-LM's default pipeline schedule",
        feeds=("memory.per_device_bytes",))
    sequence: bool = Q(False, "assumed: no sequence parallelism (Korthikanti et al. 2022)",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "training_cost.budget"))
    context: Whole = Q(1, "assumed: no context parallelism", gt=0,
        plausible=(None, 1e6), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "memory.per_device_bytes", "pipeline.cores_needed", "training_cost.budget"))
    expert: Whole = Q(1, "assumed: no expert parallelism", gt=0,
        plausible=(None, 1e6), feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds",
          "energy.kg_co2", "memory.per_device_bytes", "training_cost.budget"))
    data: Whole | None = Q(None, "derived: cluster.count / (tensor x pipeline x context)", gt=0,
        plausible=(None, 1e8))
    flash_attention: bool = Q(True, "assumed: a fused (flash) attention kernel that never stores the s x s "
                              "scores (Dao et al. 2022), as training.saved_tensors_per_layer assumes",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "pipeline.cores_needed", "training_cost.budget"))
    flash_kernel: Literal["flash2", "flash1"] = Q(
        "flash2", "assumed: FlashAttention-2's kernel (or one as fast: PyTorch SDPA's flash backend); flash1: "
        "FlashAttention 1.x or its Triton port, half as fast (catalogue/kernel_efficiency.toml [flash_kernels])",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "training_cost.budget"))
    efficiency: Fraction | None = Q(None, "catalogue: the accelerator's GEMM efficiency curve (kernel_efficiency.toml); "
                                    "a value given here is one flat matmul efficiency instead", gt=0, le=1,
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "pipeline.cores_needed", "training_cost.budget"))
    framework: Literal["megatron-core", "megatron-2021", "deepspeed", "deepspeed-zero3", "fsdp", "llama3",
                       "transformers"] = Q(
        "megatron-core", "assumed: Megatron-core's overlaps (gradient reduce and parameter gather behind compute); "
        "catalogue/kernel_efficiency.toml [frameworks]. Named, it also sets the layout and ZeRO stages allowed and "
        "the kernels the layers run (Megatron's fused norm and SwiGLU keep fewer activations)",
        feeds=("bill.total", "compute.seconds_per_step", "compute.wall_seconds", "energy.kg_co2",
          "memory.per_device_bytes", "pipeline.cores_needed", "training_cost.budget"))


class DataSection(Section):
    kind: Literal["video", "images", "tokens"] = Q("video", "reference workload: video (images: a folder of "
                                                   "JPEG, PNG or WebP files, each planned as one intra-coded frame)",
        feeds=("bill.total", "compute.wall_seconds", "energy.kg_co2", "pipeline.busy", "pipeline.cores_needed",
          "storage.retained_bytes", "training_cost.budget"))
    cameras: Whole = Q(3, "reference workload: three cameras", gt=0,
        plausible=(None, 100000), argument="cameras", feeds=("bill.total", "compute.wall_seconds", "energy.kg_co2",
          "storage.retained_bytes", "training_cost.budget"), kinds=VIDEO)
    width: Whole = Q(1920, "reference workload: 1080p", gt=0,
        plausible=(None, 100000), argument="width", feeds=("bill.total", "compute.wall_seconds", "energy.kg_co2",
          "pipeline.busy", "pipeline.cores_needed", "training_cost.budget"), kinds=FRAME_KINDS)
    height: Whole = Q(1080, "reference workload: 1080p", gt=0,
        plausible=(None, 100000), argument="height", feeds=("bill.total", "compute.wall_seconds", "energy.kg_co2",
          "pipeline.busy", "pipeline.cores_needed", "training_cost.budget"), kinds=FRAME_KINDS)
    fps: PerSecond = Q(30.0, "reference workload: 30 frames/s", gt=0,
        plausible=(0.001, 100000), argument="fps", feeds=("bill.total", "compute.wall_seconds", "energy.kg_co2",
          "training_cost.budget"), kinds=VIDEO)
    bitrate: BitRate = Q(8e6, "reference workload: H.264 at 8 Mbit/s", gt=0,
        plausible=(1000, 1e13), argument="bitrate", feeds=("bill.total", "storage.retained_bytes"), kinds=VIDEO)
    gop: Whole = Q(30, "assumed: a keyframe every 30 frames (one a second at 30 fps)", gt=0,
        plausible=(None, 1e6), argument="gop", feeds=("bill.total", "compute.wall_seconds", "energy.kg_co2",
          "pipeline.busy", "pipeline.cores_needed", "training_cost.budget"), kinds=VIDEO)
    codec: Annotated[Literal[CODECS], BeforeValidator(_codec)] = Q(  # type: ignore[valid-type]
        "h264", "reference workload: H.264 (the codec a decode rate is measured and applied on)", kinds=FRAME_KINDS)
    random_decodes: float | None = Q(
        None, "derived: (gop + 1) / 2 frames decoded per frame used at random access (one GOP length); data "
        "inspect measures it frame-weighted over the corpus's GOPs", ge=1,
        plausible=(None, 1e6), argument="random_decodes", feeds=("bill.total", "compute.wall_seconds",
          "energy.kg_co2", "pipeline.busy", "pipeline.cores_needed", "training_cost.budget"), kinds=VIDEO)
    pixels_per_frame: float | None = Q(
        None, "derived: width x height; data inspect writes the frame-weighted mean of a mixed-size corpus", ge=1,
        plausible=(None, 1e10), argument="pixels_per_frame", feeds=("bill.total", "compute.wall_seconds",
          "energy.kg_co2", "pipeline.busy", "pipeline.cores_needed", "training_cost.budget"), kinds=FRAME_KINDS)
    access: Literal["sequential", "random", "decoded"] = Q("sequential", "reference workload: frames in order",
        feeds=("bill.total", "compute.wall_seconds", "energy.kg_co2", "pipeline.busy", "pipeline.cores_needed",
          "storage.retained_bytes", "training_cost.budget"))
    side: Whole = Q(224, "reference workload: 224 px images", gt=0,
        plausible=(None, 100000), argument="side", feeds=("bill.total", "compute.wall_seconds", "energy.kg_co2",
          "pipeline.busy", "pipeline.cores_needed", "serving.cost_per_request",
          "training_cost.budget"), kinds=FRAME_KINDS)
    patch: Whole = Q(14, "reference workload: 14 px patches", gt=0,
        plausible=(None, 100000), argument="patch", feeds=("bill.total", "compute.wall_seconds", "energy.kg_co2",
          "pipeline.busy", "pipeline.cores_needed", "serving.cost_per_request",
          "training_cost.budget"), kinds=FRAME_KINDS)
    buffer: Whole = Q(64, "docs/simulation.md: a 64-frame buffer between decoders and accelerator", gt=0,
        plausible=(None, 1e7), kinds=FRAME_KINDS)
    loader_cpu_per_frame: Seconds = Q(
        0.0, "assumed: 0, not counted (CPU a loader worker spends on each frame used besides decoding it: the "
        "tensor, collation, the copy into shared memory, the hand-over); measure it with examples/"
        "video_pipeline_e2e.py's hand-over probe", ge=0,
        plausible=(None, 1), argument="loader_cpu_per_frame", feeds=("bill.total", "compute.wall_seconds",
          "energy.kg_co2", "pipeline.busy", "pipeline.cores_needed", "training_cost.budget"), kinds=FRAME_KINDS)
    bytes_per_token: BytesPerToken = Q(4.0, "assumed: 4-byte (int32) token ids", gt=0,
        plausible=(0.001, 1e7), argument="bytes_per_token", feeds=("bill.total", "storage.retained_bytes"),
        kinds=TOKENS)
    tokenizer_rate: PerSecond = Q(
        1e6, "assumed: 1 M tokens/s per core for a fast BPE tokenizer (Hugging Face tokenizers, indicative)", gt=0,
        plausible=(0.001, 1e13), argument="tokenizer_rate", feeds=("decisions.loading.load_seconds",
          "decisions.loading.serial_step_seconds", "decisions.loading.serial_utilisation",
          "decisions.loading.speedup", "pipeline.stages.tokenize.tokens_per_second", "pipeline.supply_fps",
          "pipeline.supply_tokens_per_second", "pipeline.threshold_params"), kinds=TOKENS)
    tokenize_online: bool = Q(False, "assumed: token ids are packed ahead of time, no tokenizer in the loop",
        feeds=("decisions.loading.load_seconds", "decisions.loading.serial_step_seconds",
          "decisions.loading.serial_utilisation", "decisions.loading.speedup",
          "pipeline.stages.tokenize.tokens_per_second", "pipeline.supply_fps", "pipeline.supply_tokens_per_second",
          "pipeline.threshold_params"), kinds=TOKENS)
    hours: Hours = Q(1000.0, "assumed: a 1,000-hour corpus", gt=0,
        plausible=(1e-06, 1e10), sweep="array", feeds=("compute.wall_seconds", "energy.kg_co2",
          "storage.retained_bytes", "training_cost.budget"), kinds=VIDEO)
    images: Count = Q(1.28e6, "assumed: 1.28 M images, ImageNet-1k's training set", gt=0,
        plausible=(None, 1e15), kinds=IMAGES, feeds=("compute.wall_seconds", "energy.kg_co2",
          "storage.retained_bytes", "training_cost.budget"))
    # a plain number is bytes here: an image of 150000 bytes is common, and "150000 GB" no hint (issue 29)
    image_bytes: ImageBytes | None = Q(None, "derived: 0.6 bytes a pixel of data.width x data.height, as ImageNet-1k's "
                                  "JPEGs (about 140 GB in 1.28 M images of about 470 x 390 px)", gt=0,
        plausible=(None, 1e10), kinds=IMAGES, feeds=("bill.total", "storage.retained_bytes"))
    dataset_size: Bytes | None = Q(None, "derived: hours x cameras x bit rate for video (decoded: 1.5 W H a "
                                   "frame), tokens / epochs x bytes per token for token ids", gt=0,
        plausible=(None, 1e18), feeds=("pipeline.cache.cached_fraction", "pipeline.cache.dataset_size",
          "pipeline.cache.hit_ratio", "pipeline.cache.read_rate", "pipeline.stages.read.tokens_per_second"))


class StorageSection(Section):
    checkpoints_kept: Whole = Q(3, "assumed: the last three checkpoints kept", ge=0,
        plausible=(None, 1e6), sweep="array", feeds=("storage.retained_bytes",))
    write_rate: ByteRate = Q(1e9, "assumed: 1 GB/s sustained checkpoint writes", gt=0,
        plausible=(1000, 1e16), sweep="array", feeds=("compute.wall_seconds", "energy.kg_co2",
          "training_cost.budget"))
    save_every: Seconds = Q(3600.0, "assumed: one checkpoint an hour", gt=0,
        plausible=(0.001, 1e10), sweep="array", feeds=("compute.wall_seconds", "energy.kg_co2",
          "training_cost.budget"))
    exports: Whole = Q(0, "assumed: no exported bf16 weight copies", ge=0,
        plausible=(None, 1e6), sweep="array", feeds=("storage.retained_bytes",))
    copies: Whole = Q(1, "assumed: storage keeps one copy (replication is the provider's)", gt=0,
        plausible=(None, 10000), sweep="array", feeds=("storage.retained_bytes",))
    cache_size: Bytes = Q(0.0, "assumed: no page cache or local NVMe cache holds the dataset", ge=0,
        plausible=(None, 1e18), feeds=("pipeline.cache.cache_size", "pipeline.cache.cached_fraction",
          "pipeline.cache.hit_ratio", "pipeline.cache.read_rate", "pipeline.stages.read.tokens_per_second"))
    cache_rate: ByteRate = Q(
        10e9, "assumed: 10 GB/s reading cached bytes (page cache: a memory copy; local NVMe Gen4 reads "
        "~7 GB/s); measure it with `trainplan probe read` (warm)", gt=0,
        plausible=(1000, 1e16), feeds=("pipeline.cache.cache_rate", "pipeline.cache.read_rate",
          "pipeline.stages.read.tokens_per_second"))
    cache_order: Literal["shuffle", "fixed", "sharded", "uniform"] = Q(
        "shuffle", "assumed: a fresh shuffle each epoch (a shuffling DataLoader); the order sets how often "
        "an LRU cache of a fraction of the data hits (docs/measurement.md)",
        feeds=("pipeline.cache.hit_ratio", "pipeline.cache.read_rate", "pipeline.stages.read.tokens_per_second"))


#: prices.accelerator_hour's figure where neither the user nor the price table gives one
ASSUMED_ACCELERATOR_HOUR: Final = "assumed: $3.00 per accelerator-hour, an on-demand H100 price (2025)"


class PricesSection(Section):
    accelerator_hour: PerHourPrice = Q(3.0, f"{ASSUMED_ACCELERATOR_HOUR}; left out, a catalogue accelerator's "
        "dated price (catalogue/accelerator_prices.toml) stands in", ge=0,
        plausible=(None, 1e7), sweep="array", feeds=("bill.total", "serving.cost_per_request",
          "training_cost.budget"))
    core_hour: PerHourPrice = Q(0.05, "assumed: $0.05 per CPU core-hour (two vCPUs of a compute-optimised VM)", ge=0,
        plausible=(None, 100000), sweep="array", feeds=("bill.total",))
    storage_gb_month: PerGBMonthPrice = Q(0.023, "AWS S3 Standard price per GB-month, first 50 TB (us-east-1)", ge=0,
        plausible=(None, 100000), sweep="array", feeds=("bill.total",))
    transfer_gb: PerGBPrice = Q(0.01, "assumed: $0.01 per GB read across zones (AWS inter-AZ rate)", ge=0,
        plausible=(None, 100000), sweep="array", feeds=("bill.total",))
    attempts: Attempts = Q(3.0, "assumed: budget for 3 attempts, failed runs and restarts included", ge=1,
        plausible=(None, 1e6), feeds=("training_cost.budget",))
    storage_months: Months = Q(1.0, "assumed: an hour of data is kept one month", ge=0,
        plausible=(None, 1e6), sweep="array", feeds=("bill.total",))
    data_hour: PerHourPrice = Q(10.0, "assumed: $10 to buy or collect one hour of multi-camera recording", ge=0,
        plausible=(None, 1e9), sweep="array", feeds=("bill.transport_share",))


class EnergySection(Section):
    watts: Watts | None = Q(None, "catalogue: the accelerator's TDP", gt=0,
        plausible=(0.001, 1e6), feeds=("energy.kg_co2",))
    pue: float = Q(1.2, "assumed: PUE 1.2, a modern hyperscale data centre (Uptime Institute survey range 1.1-1.6)",
                   ge=1,
        plausible=(None, 10), feeds=("energy.kg_co2",))
    grid_intensity: CarbonIntensity | None = Q(None, "the region's figure from the grid-intensity table", ge=0,
        plausible=(None, 10000), feeds=("energy.kg_co2",))
    region: str = Q("world", "assumed: the world-average grid",
        feeds=("energy.kg_co2",))


class ServingSection(Section):
    mfu: Fraction = Q(0.3, "assumed: inference MFU 0.3 at large batch", gt=0, le=1, plausible=(1e-4, None),
        feeds=("serving.cost_per_request",))
    mode: Literal["auto", "decode", "encode"] = Q(
        "auto", "derived: encode for a video workload's model without a vocabulary (a vision encoder: one forward "
        "pass over a frame's tokens a request, no KV cache); decode for a model with a vocabulary or a token "
        "workload's (tokens generated one at a time from a KV cache)",
        feeds=("serving.cost_per_request",))
    tokens_per_request: Whole | None = Q(None, "derived: 500 generated tokens a request, at most serving.context "
                                         "(decode, assumed); one frame's tokens, (data.side / data.patch)^2 "
                                         "(encode)", gt=0,
        plausible=(None, 1e9), feeds=("serving.cost_per_request",))
    requests_per_day: PerDay = Q(1e6, "assumed: one million requests a day", gt=0,
        plausible=(None, 1e15), feeds=("decisions.cost_per_request_paid", "decisions.recurring.serving_per_year",
          "decisions.recurring.total_per_year", "serving.crossover_days", "serving.replicas",
          "serving.requests_per_day", "serving.serving_cost_per_day"))
    dtype: Literal["fp32", "bf16", "fp16", "int8", "int4"] = Q("bf16", "assumed: bf16 weights",
        feeds=("serving.cost_per_request",))
    context: SequenceLength = Q(4096, "assumed: 4,096 tokens of context per sequence", gt=0,
        plausible=(None, 1e9), feeds=("serving.cost_per_request",))
    batch: Whole = Q(32, "assumed: 32 concurrent sequences per serving replica", gt=0,
        plausible=(None, 1e8), feeds=("serving.cost_per_request",))
    tensor: Whole | None = Q(None, "derived: the fewest devices that hold the weights and the batch, raised to a "
                             "tensor degree that divides the heads", gt=0,
        plausible=(None, 10000), feeds=("serving.cost_per_request",))
    training_cost: Dollars | None = Q(None, "derived: the training bill of this workload", ge=0,
        plausible=(None, 1e15), feeds=("decisions.cost_per_request_paid", "decisions.recurring.serving_per_year",
          "decisions.recurring.total_per_year", "serving.crossover_days", "serving.training_cost"))
    revenue_per_request: Dollars | None = Q(
        None, "unknown: what one request earns; given, a cost per request above it ends the project", ge=0,
        plausible=(None, 1e6), feeds=("decisions.cost_per_request_paid", "decisions.recurring.serving_per_year",
          "decisions.recurring.total_per_year"))


def _named(text: str) -> str:
    if not text.strip():
        raise PydanticCustomError("blank_name", "expected a name with at least one visible character")
    return text


class SourceSpec(Section):
    """One data source of a mixture: its format, its price per hour bought, and how many
    useful hours one hour of it yields (docs/pipeline-and-bill.md)."""

    # the name is how the mix table, the bill and a second source refer to this one: blank is no name
    name: Annotated[str, AfterValidator(_named)]
    format: Literal["video", "decoded", "tokens"] = Q("video", "assumed: stored video")
    price_hour: PerHourPrice = Q(0.0, "dollars per hour of data bought", ge=0, plausible=(None, 1e9))
    exchange_rate: Fraction = Q(1.0, "useful hours per hour of data", gt=0, plausible=(None, 1e3))
    bitrate: BitRate | None = Q(None, "stored bit rate; default data.bitrate", gt=0, plausible=(1e3, 1e13))
    width: Whole | None = Q(None, "default data.width", gt=0, plausible=(None, 1e5))
    height: Whole | None = Q(None, "default data.height", gt=0, plausible=(None, 1e5))
    fps: PerSecond | None = Q(None, "default data.fps", gt=0, plausible=(1e-3, 1e5))
    hours: Hours | None = Q(None, "hours available; default data.hours", gt=0, plausible=(1e-6, 1e10))


class Workload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: ModelSection = ModelSection()
    training: TrainingSection = TrainingSection()
    cluster: ClusterSection = ClusterSection()
    data: DataSection = DataSection()
    storage: StorageSection = StorageSection()
    prices: PricesSection = PricesSection()
    energy: EnergySection = EnergySection()
    serving: ServingSection = ServingSection()
    parallel: ParallelSection = ParallelSection()
    sources: list[SourceSpec] = []

    _accelerator: Accelerator | None = PrivateAttr(default=None)
    _provenance: dict[str, Provenance] = PrivateAttr(default_factory=dict)
    _base_dir: Path = PrivateAttr(default=Path("."))
    # key -> (low, high): the sample's interval of a measured key (`[measured_interval]`, issue 26)
    _intervals: dict[str, tuple[float, float]] = PrivateAttr(default_factory=dict)
    _left_out: dict[str, str] = PrivateAttr(default_factory=dict)  # calibration keys not applied, and why

    @property
    def accelerator(self) -> Accelerator:
        if self._accelerator is None:
            self._accelerator = resolve_accelerator(self.cluster.accelerator)
        return self._accelerator

    @property
    def provenance(self) -> dict[str, Provenance]:
        return self._provenance

    def given(self, key: str) -> bool:
        """Whether the user wrote `key` (the workload file, --set) or it was measured: not a default."""
        prov = self._provenance.get(key)
        return prov is not None and is_given(prov)

    @property
    def base_dir(self) -> Path:
        return self._base_dir

    @property
    def intervals(self) -> dict[str, tuple[float, float]]:
        """The measured keys whose value came from a sample, each with its interval (low, high) at
        INTERVAL_CONFIDENCE; a key given by --set or a calibration file has none."""
        return self._intervals

    @property
    def left_out(self) -> dict[str, str]:
        """The calibration file's keys the plan did not apply, each with the reason in words."""
        return self._left_out


units.register_dimension("carbon", {"g/kWh": 1.0, "gCO2/kWh": 1.0, "gCO2e/kWh": 1.0, "kg/kWh": 1e3,
                                    "kgCO2/kWh": 1e3}, "an intensity such as 400 gCO2/kWh")

SECTIONS: dict[str, type[Section]] = {
    name: info.annotation  # type: ignore[misc]
    for name, info in Workload.model_fields.items()
    if isinstance(info.annotation, type) and issubclass(info.annotation, Section)
}


@dataclass(frozen=True)
class Provenance:
    kind: Literal["assumed", "measured", "derived"]
    source: str


# ---------------------------------------------------------------- loading


#: the top-level keys a workload file may hold besides its sections: none; a document with these is
#: a calibration file (`trainplan probe --output`), given where a workload was expected
CALIBRATION_SIGNATURE: Final = ("format", "machine")


def read_toml(path: str | Path) -> dict[str, Any]:
    from trainplan import limits  # regular files only, size and nesting caps (issue 16)

    doc = limits.loads_toml(limits.read_text(path, "workload"), str(path))
    if all(k in doc for k in CALIBRATION_SIGNATURE):
        raise UserError(str(path), "expected a workload file; this is a calibration file written by "
                                   "`trainplan probe` (give it as --calibration FILE)")
    return doc


def parse_override_value(text: str) -> Any:
    """A --set value is TOML if it parses as TOML (numbers, true, "quoted"), else a plain string."""
    try:
        return tomllib.loads(f"v = {text}", parse_float=units.float_literal)["v"]
    except tomllib.TOMLDecodeError:
        return text.strip()


def apply_override(doc: dict[str, Any], assignment: str) -> str:
    """Apply KEY=VALUE to the nested dict `doc`; return the dotted key."""
    if "=" not in assignment:
        raise UserError("--set", f"expected KEY=VALUE, got {assignment!r}")
    key, _, raw = assignment.partition("=")
    key = key.strip()
    parts = key.split(".")
    if len(parts) < 2 or not all(parts):
        raise UserError("--set", f"expected a dotted key such as data.bitrate, got {key!r}")
    if any(ch in raw for ch in "\n\r\x00\u2028\u2029\x85"):
        # TOML would read "8\ncluster.count = 3" as a second key: one --set sets one key (issue 29)
        raise UserError(key, "expected a value on one line (a --set value holds no line break)")
    try:
        value = parse_override_value(raw)
    except ValueError:  # an integer of more digits than Python converts
        from trainplan.limits import MAX_DIGITS

        raise UserError(key, f"expected a number of at most {MAX_DIGITS:,} digits") from None
    set_path(doc, parts, value, key)
    return key


def set_path(doc: dict[str, Any], parts: list[str], value: Any, key: str) -> None:
    node = doc
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None and parts[: i + 1] == ["cluster", "accelerator"]:
            child = ClusterSection.model_fields["accelerator"].default
        if child is None:
            child = node[part] = {}
        elif isinstance(child, str) and parts[: i + 1] == ["cluster", "accelerator"]:
            # --set cluster.accelerator.peak_flops=... overrides one figure of the named entry
            child = node[part] = {"name": child}
        elif not isinstance(child, dict):
            raise UserError(key, f"{'.'.join(parts[: i + 1])} is a value, not a table")
        node = child
    if parts == ["cluster", "accelerator"] and isinstance(value, str) and isinstance(node.get("accelerator"), dict):
        # a name given after figures of the entry (--set cluster.accelerator.memory=40GB --set
        # cluster.accelerator=a100-sxm-80gb, or a sweep's --vary of the name): the figures stay overrides
        # of the entry now named, as in the other order, not dropped with the old name (issue 29)
        node["accelerator"] = {**node["accelerator"], "name": value}
        return
    node[parts[-1]] = value


#: Names people write for a key, by the key they mean (a suggestion when the name is unknown).
KEY_SYNONYMS = {"gpus": "count", "num_gpus": "count", "n_gpus": "count", "gpu_count": "count", "devices": "count",
                "num_devices": "count", "accelerators": "count", "gpu": "accelerator", "gpu_type": "accelerator",
                "device": "accelerator", "cpus": "cores", "cpu_cores": "cores"}


def _recipe_named(value: Any) -> str | None:
    """The state recipe a value names, ignoring case, '-' and '_' (adam8bit -> adam_8bit), else None."""
    if not isinstance(value, str):
        return None
    norm = value.lower().replace("_", "").replace("-", "").replace(" ", "")
    if norm in ("adamw8bit", "paged8bitadamw", "pagedadamw8bit", "bnbadamw8bit", "adamw8"):
        norm = "adam8bit"  # bitsandbytes' names for its 8-bit Adam(W): one recipe, adam_8bit
    names = get_args(TrainingSection.model_fields["state_recipe"].annotation)
    for arg in names:
        for name in get_args(arg) or ():
            if isinstance(name, str) and name.replace("_", "") == norm:
                return name
    return None


def _first_error(err: ValidationError, doc: dict[str, Any]) -> UserError:
    e = err.errors()[0]
    loc = [str(p) for p in e["loc"]]
    # pydantic puts the union member's name in the location of union fields
    loc = [p for p in loc if p not in ("str", "dict[str,any]", "float", "int", "bool") and not p.startswith("function-")]
    key = ".".join(loc) or "workload"
    kind = e["type"]
    if kind == "extra_forbidden":
        parent_loc, name = loc[:-1], loc[-1]
        choices = _field_names(parent_loc)
        near = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
        if KEY_SYNONYMS.get(name.lower()) in choices:  # cluster.gpus -> cluster.count (issue 28)
            near = [KEY_SYNONYMS[name.lower()]]
        hint = f" (did you mean {'.'.join(parent_loc + [near[0]])!r}?)" if near else ""
        return UserError(key, f"unknown key{hint}; expected one of {', '.join(choices)}")
    if kind == "missing":
        return UserError(key, "required key is missing")
    if kind == "model_type":  # pydantic's "a valid dictionary or instance of ClusterSection" names a class
        got = e.get("input")
        shown = "a list" if isinstance(got, list) else f"{got!r}"[:80]
        where = f"a [[{loc[0]}]] entry" if any(p.isdigit() for p in loc) else f"a [{key}] section"
        return UserError(key, f"expected a table of keys ({where}, or {{key = value}}), got {shown}")
    msg = e["msg"]
    bound_words = {"less_than": ("lt", "below"), "less_than_equal": ("le", "at most"),
                   "greater_than": ("gt", "above"), "greater_than_equal": ("ge", "at least")}
    if kind in bound_words and isinstance(e.get("ctx", {}).get(bound_words[kind][0]), (int, float)):
        msg = f"expected a value {bound_words[kind][1]} {e['ctx'][bound_words[kind][0]]:g}"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    msg = expected_wording(msg)
    value = e.get("input")
    recipe = _recipe_named(value) if key == "training.optimizer" else None
    if recipe is not None:  # adam8bit is a training-state recipe, not an optimizer name
        return UserError(key, f"expected adamw, adam or sgd, got {value!r}; {value!r} is the training-state "
                         f"recipe training.state_recipe = {recipe!r}, with training.optimizer = 'adamw'")
    shown = f", got {units.shown(value)}" if not isinstance(value, (dict, list)) and "got" not in msg else ""
    return UserError(key, f"{msg[0].lower() + msg[1:]}{shown}")


def _field_names(loc: list[str]) -> list[str]:
    model: type[BaseModel] = Workload
    for part in loc:
        if part.isdigit():
            continue
        info = model.model_fields.get(part)
        if info is None:
            return []
        ann = info.annotation
        if part == "sources":
            model = SourceSpec
        elif isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
        else:
            return []
    return list(model.model_fields)


def _leaves(model: BaseModel, prefix: str = "") -> list[tuple[str, BaseModel, str]]:
    out = []
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            out.extend(_leaves(value, f"{prefix}{name}."))
        else:
            out.append((f"{prefix}{name}", model, name))
    return out


#: The confidence of the intervals a sampled `trainplan data inspect` writes (measure/sampling.py).
INTERVAL_CONFIDENCE: Final[float] = 0.95
#: The keys a sample measures with an interval: the corpus figures the plan reads.
INTERVAL_KEYS: Final[tuple[str, ...]] = ("data.hours", "data.bitrate", "data.pixels_per_frame", "data.gop",
                                         "data.bytes_per_token", "training.tokens")


DEFAULT_MODEL = {"params": 93e6, "layers": 12, "width": 768}
MODEL_IDENTITY_KEYS = ("params", "layers", "width", "hf_config")


#: Stored bytes a pixel of a JPEG photo (ImageNet-1k: about 140 GB in 1.28 M images of about 470 x 390 px,
#: 0.6 B a pixel): data.image_bytes when no inspection measured it.
JPEG_BYTES_PER_PIXEL: Final = 0.6
#: The frames an image corpus is planned at: one image a second of data, so data.hours x 3,600 x this is the
#: images, the bit rate this x the bits an image, and the bill's hour of data 3,600 images (answer.data_unit).
IMAGES_PER_SECOND: Final = 1.0
#: The frame keys an image corpus sets itself (data.kind = "images"): each image is one intra-coded frame of
#: one stream at one frame a second of data, so the plan's frames are the images and its bytes theirs.
IMAGE_FRAME_KEYS: Final[dict[str, str]] = {
    "cameras": "derived: one stream of images (data.kind = 'images')",
    "fps": "derived: one image a second of data, so the plan's frames are the images",
    "hours": "derived: data.images / 3,600 (one image a second of data)",
    "bitrate": "derived: data.image_bytes x 8 bits a second (one image a second)",
    "gop": "derived: each image is its own keyframe",
    "random_decodes": "derived: an image is decoded once, in any order",
}
#: What an image corpus assumes where the user gives nothing (the video defaults do not hold for it)
IMAGE_DEFAULTS: Final[dict[str, tuple[Any, str]]] = {
    "codec": ("jpeg", "assumed: JPEG, the format of most image corpora (ImageNet, LAION, COCO)"),
}


def _validated(doc: dict[str, Any]) -> Workload:
    try:
        return Workload.model_validate(doc)
    except ValidationError as err:
        raise _first_error(err, doc) from None


def _images_as_frames(workload: Workload, doc: dict[str, Any]) -> Workload:
    """An image corpus planned as frames (IMAGE_FRAME_KEYS), its frame keys refused where the user gave them."""
    data = doc.get("data") if isinstance(doc.get("data"), dict) else {}
    for key in IMAGE_FRAME_KEYS:
        if key in data:
            raise UserError(f"data.{key}", "no value with data.kind = 'images' (an image corpus is data.images "
                            "images of data.image_bytes each; the frame keys follow from them)")
    if workload.cluster.nvdec:
        raise UserError("cluster.nvdec", "false with data.kind = 'images' (the video engines decode video streams; "
                        "images are decoded on CPU cores here)")
    d = workload.data
    image_bytes = d.image_bytes if d.image_bytes is not None else (
        JPEG_BYTES_PER_PIXEL * (d.pixels_per_frame if d.pixels_per_frame is not None else d.width * d.height))
    defaults = {k: v for k, (v, _) in IMAGE_DEFAULTS.items() if k not in data}
    frames = {**defaults, "cameras": 1, "fps": IMAGES_PER_SECOND, "gop": 1, "random_decodes": 1.0,
              "hours": d.images / IMAGES_PER_SECOND / units.SECONDS_PER_HOUR,
              "bitrate": image_bytes * units.BITS_PER_BYTE * IMAGES_PER_SECOND}
    return _validated({**doc, "data": {**data, **frames}})


def catalogue_price(doc: dict[str, Any]) -> PriceRow | None:
    """The dated price-table row that stands in for prices.accelerator_hour where the document gives
    none: the row of the catalogue accelerator it names (a $3.00 H100 price is no assumption for a
    GB200). None where the price is given, the accelerator is a table of figures, or it has no row."""
    prices = doc.get("prices")
    if isinstance(prices, dict) and "accelerator_hour" in prices:
        return None
    cluster = doc.get("cluster") if isinstance(doc.get("cluster"), dict) else {}
    return price_row_of(cluster.get("accelerator", ClusterSection.model_fields["accelerator"].default))


def price_row_of(accelerator: Any) -> PriceRow | None:
    """The price-table row of a catalogue accelerator named as a workload names it (any case, spaces
    around); None for a table of figures or a name without a row."""
    return price_table().get(accelerator.strip().lower()) if isinstance(accelerator, str) else None


def _priced(doc: dict[str, Any]) -> dict[str, Any]:
    row = catalogue_price(doc)
    if row is None:
        return doc
    prices = doc.get("prices") if isinstance(doc.get("prices"), dict) else {}
    return {**doc, "prices": {**prices, "accelerator_hour": row.dollars_per_hour}}


def build_workload(doc: dict[str, Any]) -> Workload:
    doc = _priced(doc)
    model = doc.get("model")
    if model is None or (isinstance(model, dict) and not any(k in model for k in MODEL_IDENTITY_KEYS)):
        doc = {**doc, "model": {**DEFAULT_MODEL, **(model or {})}}
    workload = _validated(doc)
    if workload.data.kind == "images":
        workload = _images_as_frames(workload, doc)
    _ = workload.accelerator  # resolve now so an unknown accelerator is refused at the boundary
    _check_consistency(workload)
    _check_parallel(workload)
    acc = workload.accelerator
    if workload.training.state_recipe == "fp8_te" and "fp8" not in acc.peak_flops and "any" not in acc.peak_flops:
        # Transformer Engine's FP8 recipe runs FP8 GEMMs: a card without FP8 tensor cores cannot (issue 29)
        raise UserError("training.state_recipe", f"expected a recipe {acc.key} can run: it has no FP8 tensor cores "
                        f"(peak figures for {', '.join(sorted(acc.peak_flops))}), got 'fp8_te'")
    if isinstance(doc.get("parallel"), dict) and "framework" in doc["parallel"]:
        _check_framework(workload)  # a named framework: only what it offers (an assumed one is not held to it)
    # every leaf assumed until load_workload says where it came from (file, --set, calibration)
    workload._provenance = _provenance(workload, set(), set(), {}, None)
    return workload


def _dotted(doc: dict[str, Any], prefix: str = "") -> list[tuple[str, Any, None]]:
    out = []
    for k, v in doc.items():
        if isinstance(v, dict) and not (prefix == "cluster." and k == "accelerator"):
            out.extend(_dotted(v, f"{prefix}{k}."))
        else:
            out.append((f"{prefix}{k}", v, None))
    return out


#: the provenance sources of a value the user wrote (on the command line, in the workload file)
SET_SOURCE = "--set on the command line"
FILE_SOURCE = "workload file"


def is_given(provenance: Provenance) -> bool:
    """Whether a value was written by the user (file, --set) or measured, not left to its default."""
    return provenance.kind in ("given", "measured") or provenance.source == SET_SOURCE \
        or provenance.source.startswith(FILE_SOURCE)


def _provenance(workload: Workload, from_file: set[str], set_keys: set[str],
                measured: dict[str, tuple[Any, str]], path: Any) -> dict[str, Provenance]:
    prov: dict[str, Provenance] = {}
    images = workload.data.kind == "images"
    for key, model, name in _leaves(workload):
        if images and key.startswith("data.") and key[5:] in IMAGE_FRAME_KEYS:
            prov[key] = Provenance("derived", IMAGE_FRAME_KEYS[key[5:]])
        elif images and key.startswith("data.") and key[5:] in IMAGE_DEFAULTS and key not in from_file | set_keys \
                and key not in measured:
            prov[key] = Provenance("assumed", IMAGE_DEFAULTS[key[5:]][1])
        elif key in measured:
            prov[key] = Provenance("measured", measured[key][1])
        elif key in set_keys or any(k.startswith(key + ".") for k in set_keys):
            prov[key] = Provenance("assumed", SET_SOURCE)
        elif key in from_file:
            prov[key] = Provenance("assumed", f"{FILE_SOURCE} {path}")
        elif key == "prices.accelerator_hour" and (row := price_row_of(workload.cluster.accelerator)) is not None:
            prov[key] = Provenance("assumed", f"assumed: ${row.dollars_per_hour:,.2f} per accelerator-hour, the "
                                              f"dated catalogue price of {row.key} (as of {row.as_of}; "
                                              "catalogue/accelerator_prices.toml)")
        elif key == "prices.accelerator_hour" and isinstance(workload.cluster.accelerator, str) \
                and workload.cluster.accelerator.strip().lower() != ClusterSection.model_fields["accelerator"].default:
            prov[key] = Provenance("assumed", f"{ASSUMED_ACCELERATOR_HOUR}; the catalogue has no sourced price for "
                                              f"{workload.cluster.accelerator.strip().lower()}")
        else:
            prov[key] = Provenance("assumed", type(model).model_fields[name].description or "default")
    return prov


def _check_consistency(w: Workload) -> None:
    """Cross-field rules that a single field's constraint cannot state."""
    # names compared as a reader sees them: "cam", "Cam" and "cam " are one name (issue 29)
    names = [src.name.strip().casefold() for src in w.sources]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:  # the mixture's rows and its bill are named by source: two of one name would read as one
        second = names.index(twice[0], names.index(twice[0]) + 1)
        raise UserError(f"sources[{second}].name", f"expected each source named once (case and spaces aside), got "
                        f"{w.sources[second].name!r} again (after {w.sources[names.index(twice[0])].name!r})")
    if w.data.kind in FRAME_KINDS and w.data.patch > w.data.side:
        raise UserError("data.patch", f"expected a patch no larger than data.side ({w.data.side} px), "
                        f"got {w.data.patch} px")
    m = w.model
    if m.params is None and m.hf_config is None and (m.layers is None or m.width is None):
        raise UserError("model.params", "expected model.params, a shape (model.layers and model.width) "
                        "or model.hf_config")
    if m.experts_per_token > m.experts:
        raise UserError("model.experts_per_token", f"expected at most model.experts ({m.experts}), "
                        f"got {m.experts_per_token}")
    if m.kv_heads is not None and m.heads is None and m.hf_config is None:
        raise UserError("model.heads", "the number of attention heads, needed with model.kv_heads "
                        "(kv_heads without heads would size the KV cache against a guessed head count)")
    if m.head_dim is not None and m.heads is None and m.hf_config is None:
        raise UserError("model.heads", "the number of attention heads, needed with model.head_dim")
    if m.heads is not None and m.kv_heads is not None and m.heads % m.kv_heads:
        raise UserError("model.kv_heads", f"expected a divisor of model.heads ({m.heads}), got {m.kv_heads}")
    if w.data.kind == "tokens" and w.training.tokens is None:
        raise UserError("training.tokens", "expected a token count when data.kind = 'tokens'")
    if w.model.heads is not None and w.model.width is not None and w.model.hf_config is None \
            and w.model.family != "standard" and w.model.head_dim is None and w.model.width % w.model.heads:
        raise UserError("model.heads", f"expected a divisor of model.width ({w.model.width}), got {w.model.heads}")


def _check_parallel(w: Workload) -> None:
    """Degrees that multiply to the device count and divide what they split (issue 13)."""
    from trainplan.workload.layout_rules import check_layout

    p = w.parallel
    # a config.json's experts are known once it is counted (planning/model.resolve_model checks them there)
    experts = None if w.model.hf_config is not None else w.model.experts
    check_layout(w.cluster.count, p.tensor, p.pipeline, p.interleave, p.context, p.expert, p.data, p.schedule,
                 p.sequence, w.model.heads, w.model.layers, experts, w.training.seq_len,
                 w.training.grad_accum)


def _check_framework(w: Workload) -> None:
    """The layout and ZeRO stage a named framework offers (catalogue/kernel_efficiency.toml [frameworks])."""
    from trainplan.catalogue.frameworks import PARALLELISMS, offers

    p = w.parallel
    has = offers(p.framework)
    for degree in PARALLELISMS:
        if getattr(p, degree) > 1 and degree not in has.parallelisms:
            raise UserError(f"parallel.{degree}", f"expected 1: parallel.framework {p.framework!r} has no {degree} "
                            f"parallelism (it has {', '.join(has.parallelisms) or 'data parallelism only'}), "
                            f"got {getattr(p, degree)}")
    stages = has.pipeline_zero_stages if p.pipeline > 1 else has.zero_stages
    if w.training.zero not in stages:
        where = " with pipeline parallelism" if p.pipeline > 1 else ""
        raise UserError("training.zero", f"expected one of {', '.join(map(str, stages))}: parallel.framework "
                        f"{p.framework!r} has those ZeRO stages{where}, got {w.training.zero}")


def leaf_value(workload: Workload, key: str) -> Any:
    node: Any = workload
    for part in key.split("."):
        node = getattr(node, part)
    return node


def leaf_keys() -> list[str]:
    return [k for k, _, _ in _leaves(Workload())]


# ---------------------------------------------------------------- plausible ranges (issue 16)

# Every numeric key has a plausible range, declared on its field (`Q(..., plausible=(low, high))`),
# each bound exclusive, on top of the field's own constraint (which says what the key means: > 0, a
# fraction <= 1 ...). Beyond the range a value is a typo or a unit slip, not a plan, and the accounts are
# total inside it (no division by zero, no overflow to inf). The highs are also at least 10^6 times the
# default, so that `trainplan solve`'s default search span stays inside. Lt is a plausibility cap, not
# a definition, which is why it is strict where the definitional bounds (mfu <= 1, zero <= 3) are not.
# docs/keys.md lists them (generated); docs/trust.md says why.


def _roles() -> dict[str, tuple[Any, KeyRole]]:
    """Each workload key (sources.* for a data source's keys) -> its field and its declared role."""
    out: dict[str, tuple[Any, KeyRole]] = {}
    for section, model in (*SECTIONS.items(), ("sources", SourceSpec)):
        for name, info in model.model_fields.items():
            out[f"{section}.{name}"] = (info, key_role(info))
    return out


KEY_ROLES: Final[dict[str, KeyRole]] = {key: role for key, (_, role) in _roles().items()}
#: key -> (low, high): each numeric key's plausible range, from its declaration
PLAUSIBLE_RANGES: Final[dict[str, tuple[float | None, float | None]]] = {
    key: role.plausible for key, role in KEY_ROLES.items() if role.plausible is not None}


# ---------------------------------------------------------------- each key's dimension, for the formatter


def input_dimensions() -> dict[str, str]:
    """Each workload key's dimension for format_figure, read from the schema's unit types
    (workload/schema.py: Bytes, ByteRate, PerHourPrice ...): `cluster.link` -> byte_rate."""
    return _input_dimensions(sys.modules[__name__])


def _input_dimensions(schema: Any) -> dict[str, str]:
    import typing

    by_type = {"Bytes": "bytes", "ImageBytes": "bytes", "ByteRate": "byte_rate", "BitRate": "bit_rate", "FlopRate": "flop_rate",
               "Seconds": "seconds", "Hours": "hours", "Months": "months", "Watts": "watts", "Fraction": "fraction",
               "Headroom": "fraction", "Dollars": "dollars", "PerHourPrice": "dollars_per_hour",
               "PerGBPrice": "dollars_per_gb", "PerGBMonthPrice": "dollars_per_gb_month",
               "PerDay": "requests_per_day", "BytesPerToken": "bytes_per_token", "SequenceLength": "sequence_length",
               "Cores": "cores", "Epochs": "epochs", "Attempts": "attempts", "PerSecond": "frames_per_second",
               "CarbonIntensity": "grams_per_kwh"}
    marks = {}
    for name, dimension in by_type.items():
        alias = getattr(schema, name, None)
        for meta in typing.get_args(alias)[1:]:
            marks[id(meta)] = dimension
    out: dict[str, str] = {}

    def visit(model: Any, prefix: str) -> None:
        for field_name, info in model.model_fields.items():
            metas = list(info.metadata)
            for arg in typing.get_args(info.annotation):  # X | None keeps X's Annotated metadata inside
                metas += list(typing.get_args(arg)[1:])
                if isinstance(arg, type) and hasattr(arg, "model_fields"):
                    visit(arg, f"{prefix}{field_name}.")
            ann = info.annotation
            if isinstance(ann, type) and hasattr(ann, "model_fields"):
                visit(ann, f"{prefix}{field_name}.")
                continue
            for meta in metas:
                if id(meta) in marks:
                    out[f"{prefix}{field_name}"] = marks[id(meta)]
                    break

    visit(schema.Workload, "")
    out.update({"model.params": "parameters", "training.tokens": "tokens",  # counts of a named thing
                "data.tokenizer_rate": "tokens_per_second"})  # the one rate per second that is not frames
    return out
