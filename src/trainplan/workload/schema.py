"""The workload file: one TOML document naming every assumption of a job (SPEC §1, §11).

Every leaf has a default with a unit and a source; the source of a default is
the `description` of its field, so `trainplan validate` and the report can say
where each number came from. Values are validated here, at the boundary, and
converted to SI base units; the accounts downstream trust them.

Provenance of a leaf: `assumed` (a default, or a value the user wrote — a
user's figure is still an assumption until measured), `measured` (from a
calibration file written by a probe), or `derived` (computed by trainplan).
"""

from __future__ import annotations

import difflib
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo,
                      field_validator)

from trainplan import units
from trainplan.catalogue.accelerators import Accelerator, resolve_accelerator
from trainplan.errors import UserError

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
LARGEST_WHOLE = 2**53


def _whole(value: Any) -> Any:
    """Counts of things (layers, cameras) may be written 1e3 or "4k" but must be whole."""
    if value is None or isinstance(value, bool):
        return value
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


Count = Annotated[float, _unit("count")]
Whole = Annotated[int, BeforeValidator(_whole)]
Bytes = Annotated[float, _unit("bytes")]
ByteRate = Annotated[float, _unit("byte_rate")]
BitRate = Annotated[float, _unit("bit_rate")]
FlopRate = Annotated[float, _unit("flop_rate")]
Seconds = Annotated[float, _unit("time")]
Watts = Annotated[float, _unit("power")]
Fraction = Annotated[float, _unit("fraction")]
PerSecond = Annotated[float, _unit("frequency")]
Dollars = Annotated[float, _unit("dollars")]
CarbonIntensity = Annotated[float, _unit("carbon")]


class Section(BaseModel):
    # allow_inf_nan=False: plain float fields (cores, hours, epochs...) refuse inf and nan too
    model_config = ConfigDict(extra="forbid", validate_default=False, frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        """pydantic's lax mode reads true as 1.0; only a true/false key takes true or false."""
        if isinstance(value, bool) and cls.model_fields[info.field_name].annotation is not bool:
            raise ValueError("expected a number or a name, not true or false")
        return value


def Q(default: Any, source: str, **constraints: Any) -> Any:  # noqa: N802 - reads as a declaration
    """A field with its default and the source of that default."""
    return Field(default=default, description=source, **constraints)


# ---------------------------------------------------------------- sections


class ModelSection(Section):
    params: Count | None = Q(None, "assumed (no model given): the 93 M-parameter video model of SPEC §7's "
                             "reference point", ge=1)
    layers: Whole | None = Q(None, "assumed (no model given): a ViT-Base shape (Dosovitskiy et al. 2021), "
                             "12 layers", gt=0)
    width: Whole | None = Q(None, "assumed (no model given): a ViT-Base shape, width 768", gt=0)
    vocab: Whole | None = Q(None, "none: a vision model has no vocabulary", gt=0)
    ffn_width: Whole | None = Q(None, "none: 4 x width, the standard block of SPEC §2", gt=0)
    heads: Whole | None = Q(None, "none: width / 64 when needed (64-wide heads, GPT-2/ViT convention)", gt=0)
    kv_heads: Whole | None = Q(None, "none: equal to heads (no grouped-query attention)", gt=0)
    hf_config: str | None = Q(None, "none: a Hugging Face config.json gives the exact count")
    family: Literal["standard", "llama", "mistral", "qwen2", "gpt2", "gpt_neox", "mixtral"] = Q(
        "standard", "SPEC §2: the standard 12 d^2 block unless a family is named")
    tied: bool = Q(True, "assumed: input and output embeddings tied")
    experts: Whole = Q(1, "dense model: one expert", gt=0)
    experts_per_token: Whole = Q(1, "dense model: one expert per token", gt=0)


class TrainingSection(Section):
    tokens: Count | None = Q(None, "derived: data.hours of video x tokens per hour x epochs", ge=1)
    micro_batch: Whole = Q(8, "assumed: 8 sequences per device per micro-step", gt=0)
    seq_len: Whole = Q(2048, "assumed: 2,048 tokens per sequence", gt=0)
    grad_accum: Whole = Q(1, "assumed: no gradient accumulation", gt=0)
    optimizer: Literal["adamw", "adam", "sgd"] = Q("adamw", "assumed: AdamW, the field's default")
    precision: Literal["bf16", "fp16", "fp32"] = Q("bf16", "assumed: bf16 mixed precision with fp32 master weights")
    recompute: Literal["none", "selective", "full"] = Q("none", "assumed: no activation recomputation")
    zero: int = Q(0, "assumed: no ZeRO/FSDP sharding", ge=0, le=3)
    saved_tensors_per_layer: float = Q(
        17.0,
        "Korthikanti et al. 2022 eq. 1: 34 s.b.h bytes per layer at 2 bytes = 17 width-sized tensors "
        "per token, attention scores not stored (flash attention)",
        gt=0,
    )
    selective_keep: Fraction = Q(
        23 / 34,
        "Korthikanti et al. 2022 eq. 1: selective recomputation re-runs the attention block "
        "(11 of 34 s.b.h bytes), keeping 23/34 of the tensors",
        gt=0,
        le=1,
    )
    epochs: float = Q(1.0, "assumed: one pass over the data", gt=0)


class ClusterSection(Section):
    accelerator: str | dict[str, Any] = Q("h100-sxm", "SPEC §7 reference point: one H100-SXM")
    count: Whole = Q(1, "SPEC §7 reference point: one accelerator", gt=0)
    mfu: Fraction = Q(0.4, "SPEC §7 reference point: MFU 0.4, typical of dense transformer training", gt=0, le=1)
    mfu_end_to_end: bool = Q(False, "assumed: MFU is a single-device figure, so scaling efficiency applies")
    scaling_efficiency: Fraction = Q(
        0.9, "assumed: 90 % data-parallel efficiency at modest scale; 1 by definition on one device", gt=0, le=1)
    cores: float = Q(8.0, "SPEC §7 reference point: 8 CPU cores per accelerator", ge=0)
    core_fps_1080p: PerSecond = Q(
        120.0, "SPEC §7: a CPU core decodes 120 frames/s of 1080p H.264, colour conversion and resize included",
        gt=0)
    nvdec: bool = Q(False, "assumed: decode on CPU cores only")
    nvdec_fps_1080p: PerSecond = Q(
        771.0, "SPEC §7: one NVDEC engine decodes 771 frames/s of 1080p H.264 (NVIDIA application note, indicative)",
        gt=0)
    link: ByteRate = Q(1.5e9, "SPEC §7 reference point: 1.5 GB/s from storage to the host", gt=0)
    interconnect: ByteRate | None = Q(None, "catalogue: the accelerator's interconnect per direction", gt=0)
    host_to_device: ByteRate = Q(
        25e9, "assumed: 25 GB/s usable host-to-device, PCIe Gen4 x16 (32 GB/s raw) at ~80 %", gt=0)
    runtime_buffers: Bytes = Q(
        2e9, "assumed: 2 GB per device for the CUDA context, NCCL buffers and allocator fragmentation", ge=0)
    headroom: Fraction = Q(0.1, "assumed: keep 10 % of the card free", ge=0, le=10)
    prefetch: bool = Q(True, "assumed: the loader prefetches, so a step costs max(load, compute)")


class DataSection(Section):
    kind: Literal["video", "tokens"] = Q("video", "SPEC §7 reference point: video")
    cameras: Whole = Q(3, "SPEC §7 reference point: three cameras", gt=0)
    width: Whole = Q(1920, "SPEC §7 reference point: 1080p", gt=0)
    height: Whole = Q(1080, "SPEC §7 reference point: 1080p", gt=0)
    fps: PerSecond = Q(30.0, "SPEC §7 reference point: 30 frames/s", gt=0)
    bitrate: BitRate = Q(8e6, "SPEC §7 reference point: H.264 at 8 Mbit/s", gt=0)
    gop: Whole = Q(30, "assumed: a keyframe every 30 frames (one a second at 30 fps)", gt=0)
    access: Literal["sequential", "random", "decoded"] = Q("sequential", "SPEC §7 reference point: frames in order")
    side: Whole = Q(224, "SPEC §7 reference point: 224 px images", gt=0)
    patch: Whole = Q(14, "SPEC §7 reference point: 14 px patches", gt=0)
    buffer: Whole = Q(64, "SPEC §8: a 64-frame buffer between decoders and accelerator", gt=0)
    bytes_per_token: float = Q(4.0, "assumed: 4-byte (int32) token ids", gt=0)
    tokenizer_rate: PerSecond = Q(
        1e6, "assumed: 1 M tokens/s per core for a fast BPE tokenizer (Hugging Face tokenizers, indicative)", gt=0)
    tokenize_online: bool = Q(False, "assumed: token ids are packed ahead of time, no tokenizer in the loop")
    hours: float = Q(1000.0, "assumed: a 1,000-hour corpus", gt=0)
    dataset_size: Bytes | None = Q(None, "derived: hours x cameras x bit rate for video (decoded: 1.5 W H a "
                                   "frame), tokens / epochs x bytes per token for token ids", gt=0)


class StorageSection(Section):
    checkpoints_kept: Whole = Q(3, "assumed: the last three checkpoints kept", ge=0)
    write_rate: ByteRate = Q(1e9, "assumed: 1 GB/s sustained checkpoint writes", gt=0)
    save_every: Seconds = Q(3600.0, "assumed: one checkpoint an hour", gt=0)
    exports: Whole = Q(0, "assumed: no exported bf16 weight copies", ge=0)
    copies: Whole = Q(1, "assumed: storage keeps one copy (replication is the provider's)", gt=0)
    cache_size: Bytes = Q(0.0, "assumed: no page cache or local NVMe cache holds the dataset", ge=0)
    cache_rate: ByteRate = Q(
        10e9, "assumed: 10 GB/s reading cached bytes (page cache: a memory copy; local NVMe Gen4 reads "
        "~7 GB/s); measure it with `trainplan probe read` (warm)", gt=0)


class PricesSection(Section):
    accelerator_hour: Dollars = Q(3.0, "assumed: $3.00 per accelerator-hour, an on-demand H100 price (2025)", ge=0)
    core_hour: Dollars = Q(0.05, "assumed: $0.05 per CPU core-hour (two vCPUs of a compute-optimised VM)", ge=0)
    storage_gb_month: Dollars = Q(0.023, "AWS S3 Standard price per GB-month, first 50 TB (us-east-1)", ge=0)
    transfer_gb: Dollars = Q(0.01, "assumed: $0.01 per GB read across zones (AWS inter-AZ rate)", ge=0)
    attempts: float = Q(3.0, "assumed: budget for 3 attempts, failed runs and restarts included", ge=1)
    storage_months: float = Q(1.0, "assumed: an hour of data is kept one month", ge=0)
    data_hour: Dollars = Q(10.0, "assumed: $10 to buy or collect one hour of multi-camera recording", ge=0)


class EnergySection(Section):
    watts: Watts | None = Q(None, "catalogue: the accelerator's TDP", gt=0)
    pue: float = Q(1.2, "assumed: PUE 1.2, a modern hyperscale data centre (Uptime Institute survey range 1.1-1.6)",
                   ge=1)
    grid_intensity: CarbonIntensity | None = Q(None, "the region's figure from the grid-intensity table", ge=0)
    region: str = Q("world", "assumed: the world-average grid")


class ServingSection(Section):
    mfu: Fraction = Q(0.3, "assumed: inference MFU 0.3 at large batch", gt=0, le=1)
    tokens_per_request: Whole = Q(500, "assumed: 500 generated tokens per request", gt=0)
    requests_per_day: float = Q(1e6, "assumed: one million requests a day", gt=0)
    dtype: Literal["fp32", "bf16", "fp16", "int8", "int4"] = Q("bf16", "assumed: bf16 weights")
    context: Whole = Q(4096, "assumed: 4,096 tokens of context per sequence", gt=0)
    batch: Whole = Q(32, "assumed: 32 concurrent sequences per serving replica", gt=0)
    training_cost: Dollars | None = Q(None, "derived: the training bill of this workload", ge=0)


class SourceSpec(Section):
    """One data source of a mixture: its format, its price per hour bought, and how many
    useful hours one hour of it yields (SPEC §9)."""

    name: str
    format: Literal["video", "decoded", "tokens"] = "video"
    price_hour: Dollars = Field(0.0, ge=0, description="dollars per hour of data bought")
    exchange_rate: Fraction = Field(1.0, gt=0, description="useful hours per hour of data")
    bitrate: BitRate | None = Field(None, gt=0, description="stored bit rate; default data.bitrate")
    width: Whole | None = Field(None, gt=0)
    height: Whole | None = Field(None, gt=0)
    fps: PerSecond | None = Field(None, gt=0)
    hours: float | None = Field(None, gt=0, description="hours available")


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
    sources: list[SourceSpec] = []

    _accelerator: Accelerator | None = PrivateAttr(default=None)
    _provenance: dict[str, Provenance] = PrivateAttr(default_factory=dict)
    _base_dir: Path = PrivateAttr(default=Path("."))

    @property
    def accelerator(self) -> Accelerator:
        if self._accelerator is None:
            self._accelerator = resolve_accelerator(self.cluster.accelerator)
        return self._accelerator

    @property
    def provenance(self) -> dict[str, Provenance]:
        return self._provenance

    @property
    def base_dir(self) -> Path:
        return self._base_dir


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


def read_toml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise UserError(str(path), "no such workload file")
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise UserError(str(path), f"malformed TOML ({err})") from None
    except UnicodeDecodeError:
        raise UserError(str(path), "expected a UTF-8 text TOML file") from None


def _parse_override_value(text: str) -> Any:
    """A --set value is TOML if it parses as TOML (numbers, true, "quoted"), else a plain string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
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
    set_path(doc, parts, _parse_override_value(raw), key)
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
    node[parts[-1]] = value


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
        hint = f" (did you mean {'.'.join(parent_loc + [near[0]])!r}?)" if near else ""
        return UserError(key, f"unknown key{hint}; expected one of {', '.join(choices)}")
    if kind == "missing":
        return UserError(key, "required key is missing")
    msg = e["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    value = e.get("input")
    shown = f", got {value!r}" if not isinstance(value, (dict, list)) and "got" not in msg else ""
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


def load_workload(
    path: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    calibration: str | Path | None = None,
) -> Workload:
    """Read a workload file (or the built-in default), apply --set overrides and a calibration file."""
    doc: dict[str, Any] = read_toml(path) if path is not None else {}
    inspected = _measured_table(doc, path)  # keys `trainplan data inspect` measured (issue 14)
    from_file = {k for k, _, _ in _dotted(doc)}
    set_keys = {apply_override(doc, a) for a in overrides}
    measured: dict[str, tuple[Any, str]] = {}
    if calibration is not None:
        from trainplan.measure import calibration as calibration_module

        measured = calibration_module.load(calibration)
        for key, (value, _source) in measured.items():
            set_path(doc, key.split("."), value, key)
    measured = {**{k: (None, src) for k, src in inspected.items() if k in from_file and k not in set_keys},
                **measured}
    workload = build_workload(doc)
    workload._base_dir = Path(path).resolve().parent if path is not None else Path.cwd()
    workload._provenance = _provenance(workload, from_file, set_keys, measured, path)
    if calibration is not None:
        from trainplan.measure import calibration as calibration_module

        check = getattr(calibration_module, "check_compatible", None)
        if check is not None:
            check(calibration, workload)
    return workload


def _measured_table(doc: dict[str, Any], path: Any) -> dict[str, str]:
    """Pop a workload file's `[measured]` table (dotted key -> where it was measured): those keys'
    values were measured on the data (`trainplan data inspect --output`), so their provenance is `measured`."""
    table = doc.pop("measured", {})
    if not isinstance(table, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
        raise UserError(f"{path}: measured", "expected a table of dotted keys, each naming where it was measured")
    return table


# The model of the built-in default workload (SPEC §7's reference point), used only when the
# workload names no model at all: a user's model.params or config.json must not inherit its shape.
DEFAULT_MODEL = {"params": 93e6, "layers": 12, "width": 768}
MODEL_IDENTITY_KEYS = ("params", "layers", "width", "hf_config")


def build_workload(doc: dict[str, Any]) -> Workload:
    model = doc.get("model")
    if model is None or (isinstance(model, dict) and not any(k in model for k in MODEL_IDENTITY_KEYS)):
        doc = {**doc, "model": {**DEFAULT_MODEL, **(model or {})}}
    try:
        workload = Workload.model_validate(doc)
    except ValidationError as err:
        raise _first_error(err, doc) from None
    _ = workload.accelerator  # resolve now so an unknown accelerator is refused at the boundary
    _check_consistency(workload)
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


def _provenance(workload: Workload, from_file: set[str], set_keys: set[str],
                measured: dict[str, tuple[Any, str]], path: Any) -> dict[str, Provenance]:
    prov: dict[str, Provenance] = {}
    for key, model, name in _leaves(workload):
        if key in measured:
            prov[key] = Provenance("measured", measured[key][1])
        elif key in set_keys or any(k.startswith(key + ".") for k in set_keys):
            prov[key] = Provenance("assumed", "--set on the command line")
        elif key in from_file:
            prov[key] = Provenance("assumed", f"workload file {path}")
        else:
            prov[key] = Provenance("assumed", type(model).model_fields[name].description or "default")
    return prov


def _check_consistency(w: Workload) -> None:
    """Cross-field rules that a single field's constraint cannot state."""
    if w.data.kind == "video" and w.data.patch > w.data.side:
        raise UserError("data.patch", f"expected a patch no larger than data.side ({w.data.side} px), "
                        f"got {w.data.patch} px")
    m = w.model
    if m.params is None and m.hf_config is None and (m.layers is None or m.width is None):
        raise UserError("model.params", "expected model.params, a shape (model.layers and model.width) "
                        "or model.hf_config")
    if m.experts_per_token > m.experts:
        raise UserError("model.experts_per_token", f"expected at most model.experts ({m.experts}), "
                        f"got {m.experts_per_token}")
    if m.heads is not None and m.kv_heads is not None and m.heads % m.kv_heads:
        raise UserError("model.kv_heads", f"expected a divisor of model.heads ({m.heads}), got {m.kv_heads}")
    if w.data.kind == "tokens" and w.training.tokens is None:
        raise UserError("training.tokens", "expected a token count when data.kind = 'tokens'")
    if w.model.heads is not None and w.model.width is not None and w.model.hf_config is None \
            and w.model.family != "standard" and w.model.width % w.model.heads:
        raise UserError("model.heads", f"expected a divisor of model.width ({w.model.width}), got {w.model.heads}")


def leaf_value(workload: Workload, key: str) -> Any:
    node: Any = workload
    for part in key.split("."):
        node = getattr(node, part)
    return node


def leaf_keys() -> list[str]:
    return [k for k, _, _ in _leaves(Workload())]
