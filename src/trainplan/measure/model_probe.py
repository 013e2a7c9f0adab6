"""Measure a Hugging Face model's training footprint (`trainplan probe model`), building no more
than each figure needs (issue 24). The model is built from a config (a config.json, or a
model_type and shape), never downloaded. Measured:

* saved-activation bytes per layer and outside the layers: the real module traced on the meta
  device (measure/trace.py: every tensor autograd saves, deduplicated by storage, parameters
  excluded, at two sequence lengths, exact in S), at the attention, precision and recomputation
  asked for; no memory is allocated, whatever the model's size;
* FLOPs per token of forward + backward (``torch.utils.flop_counter.FlopCounterMode``) with
  the model on the meta device, at several sequence lengths;
* optimizer-state bytes per parameter after one real AdamW step on a one-layer copy on CPU
  (the moments torch allocates), times the parameters;
* on a CUDA device, ``torch.cuda.max_memory_allocated`` of one training step of the whole model.

It says what it will measure before it starts and shows its progress on a terminal. The
calibration file records the attention, precision, recomputation, micro-batch and sequence
length it measured at (workload/calibration.calibration_matches says whether a plan's settings are those).
torch and transformers are the `model` extra; without them the probe exits 2 naming it.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainplan.errors import UserError
from trainplan.measure.trace import _layers, checkpointed_attention_core

EXTRA_HINT = "torch and transformers installed (pip install 'trainplan[model]')"
OUTSIDE = "outside"


def _imports() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError:
        raise UserError("probe model", f"expected {EXTRA_HINT}") from None
    # transformers' own warnings (a token id past a small test vocabulary, an unset loss type) are not the
    # probe's to print: a refusal stays one line, and the probe states what it measured itself
    transformers.logging.set_verbosity_error()
    return torch, transformers


def build_config(config: dict[str, Any]) -> Any:
    """A transformers config object from a config.json dict (needs `model_type`): the workload's one
    builder (workload.params.transformers_config), after the probe's own check that the extra is installed."""
    from trainplan.workload.params import transformers_config

    _imports()
    return transformers_config(config)


def load_config(path: str | Path | None, sets: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """config.json contents, with KEY=VALUE overrides (values parsed as JSON when they parse)."""
    config: dict[str, Any] = {}
    if path is not None:
        from trainplan.workload.params import load_hf_config

        config = load_hf_config(path)
    for item in sets:
        if "=" not in item:
            raise UserError("--set", f"KEY=VALUE, got {item!r}")
        key, _, raw = item.partition("=")
        try:
            config[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            config[key.strip()] = raw.strip()
    if "model_type" not in config:
        raise UserError("model_type", "a config.json or --set model_type=NAME (llama, gpt2, ...)")
    from trainplan import units
    from trainplan import limits

    limits.check_numbers(config, "--set", units.LARGEST_WHOLE)  # the numeric boundary (issue 29)
    # transformers' own checks and the keys given, before the probe says what it measures
    check_set_keys(config, [item.partition("=")[0].strip() for item in sets])
    return config


def check_set_keys(config: dict[str, Any], keys: list[str]) -> None:
    """UserError naming the first of `keys` (given with --set) that the model type's config class does not
    know: neither a key of its to_dict() nor of its attribute_map (gpt2's num_hidden_layers for n_layer), nor
    one its constructor consumes (a legacy name it converts, such as llama's rope_theta into rope_parameters).
    transformers keeps any other keyword as a plain attribute, so a misspelt key would be measured silently
    at the class's default."""
    from trainplan.errors import did_you_mean

    cls = type(build_config(config))  # refuses a model_type transformers does not know
    declared = set(cls().to_dict()) | set(cls.attribute_map)
    for key in keys:
        if key in declared:
            continue
        try:
            consumed = key not in cls(**{key: config[key]}).to_dict()
        except Exception:  # the class reads the key (and refuses its value): known
            consumed = True
        if not consumed:
            raise UserError("--set", f"unknown config key {key!r} for model_type {config['model_type']!r} "
                            f"({cls.__name__}){did_you_mean(key, declared)}")


def build_model(config: dict[str, Any], attention: str = "sdpa", device: str = "cpu", dtype: str = "bf16") -> Any:
    torch, transformers = _imports()
    cfg = build_config(config)
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    try:
        with torch.device(device):
            model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch_dtype, attn_implementation=attention)
    except ValueError as err:
        if "does not support" not in str(err):
            raise
        # a model without attention (Mamba) or without this kernel: the option's fault, in one line (issue 29)
        raise UserError("--attention", f"an attention {config.get('model_type')} implements: transformers builds it "
                        f"without {attention} ({str(err).split('.')[0]})") from None
    return model


@dataclass
class SavedBytes:
    per_layer: list[float]  # bytes saved by each decoder layer
    outside: float  # bytes saved outside the layers (embedding, final norm, head, loss)
    tokens: int
    listing: dict[str, list[tuple[tuple[int, ...], str, int]]] = field(default_factory=dict)

    @property
    def per_layer_per_token(self) -> float:
        """The last layer's bytes per token (the first also holds tables shared by all layers,
        such as rotary cos/sin, which the formula counts outside the layers)."""
        return self.per_layer[-1] / self.tokens

    @property
    def outside_per_token(self) -> float:
        """Outside the layers, plus what the first layer holds beyond the last: tables all layers
        share (rotary cos/sin) are saved first in layer 0, but belong to no layer."""
        shared = self.per_layer[0] - self.per_layer[-1] if self.per_layer else 0.0
        return (self.outside + max(shared, 0.0)) / self.tokens

    @property
    def total(self) -> float:
        return sum(self.per_layer) + self.outside


def saved_bytes(model: Any, micro_batch: int, seq_len: int, seed: int = 0, keep_listing: bool = False,
                selective: bool = False) -> SavedBytes:
    """Bytes of the tensors one forward pass saves for backward, by layer, deduplicated by storage.
    `selective`: the attention core runs under checkpoint (selective recomputation)."""
    import contextlib

    torch, _ = _imports()
    torch.manual_seed(seed)
    model.train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, tuple[str, int]] = {}
    where = [OUTSIDE]
    listing: dict[str, list[tuple[tuple[int, ...], str, int]]] = {}
    layers = _layers(model)
    handles = []
    for i, layer in enumerate(layers):
        handles.append(layer.register_forward_pre_hook(lambda _m, _a, i=i: where.__setitem__(0, str(i))))
        handles.append(layer.register_forward_hook(lambda _m, _a, _o: where.__setitem__(0, OUTSIDE)))

    def pack(t: Any) -> Any:
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key in params or key == 0 or key in seen:
            return t
        seen[key] = (where[0], storage.nbytes())
        if keep_listing:
            listing.setdefault(where[0], []).append((tuple(t.shape), str(t.dtype), storage.nbytes()))
        return t

    device = next(model.parameters()).device
    ids = torch.randint(0, model.config.vocab_size, (micro_batch, seq_len), device=device)
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
                (checkpointed_attention_core() if selective else contextlib.nullcontext()):
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
    finally:
        for h in handles:
            h.remove()
    per_layer = [0.0] * len(layers)
    outside = 0.0
    for owner, nbytes in seen.values():
        if owner == OUTSIDE:
            outside += nbytes
        else:
            per_layer[int(owner)] += nbytes
    model.zero_grad(set_to_none=True)
    return SavedBytes(per_layer, outside, micro_batch * seq_len, listing)


def grouped_mm_flops(a_shape: Any, b_shape: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:  # noqa: ANN401
    """FLOPs of aten._grouped_mm (transformers 5's fused experts), which FlopCounterMode has no formula for:
    2 M N K for every row of each group. (T, K) x (E, K, N): each of the T rows meets one expert, 2 T K N;
    (M, T) x (T, N) grouped along T (the weight gradient): 2 M T N in all; batched (E, M, K) x (E, K, N):
    2 E M K N."""
    if len(a_shape) == 2 and len(b_shape) == 3:
        return 2 * a_shape[0] * a_shape[1] * b_shape[2]
    if len(a_shape) == 2 and len(b_shape) == 2:
        return 2 * a_shape[0] * a_shape[1] * b_shape[1]
    if len(a_shape) == 3 and len(b_shape) == 3:
        return 2 * a_shape[0] * a_shape[1] * a_shape[2] * b_shape[2]
    return 2 * a_shape[-2] * a_shape[-1] * b_shape[-1]  # (E, M, K) x (K_total, N): one product a row


def counted_flops(config: dict[str, Any], seq_len: int, micro_batch: int = 1, attention: str = "sdpa",
                  checkpoint: str | None = None) -> float:
    """FLOPs of one forward + backward with labels, counted by FlopCounterMode on the meta device
    (transformers 5's grouped expert products by grouped_mm_flops); `checkpoint` "reentrant" or
    "non-reentrant" runs it under transformers' gradient checkpointing of that kind."""
    import contextlib
    from unittest import mock

    torch, transformers = _imports()
    from torch.utils.flop_counter import FlopCounterMode

    model = build_model(config, attention=attention, device="meta")
    packing = contextlib.nullcontext()
    if checkpoint is not None:
        model.train()
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={
            "use_reentrant": checkpoint == "reentrant", "preserve_rng_state": False})  # no RNG on meta
        # without a cache transformers looks for packed sequences in the position ids (a data-dependent
        # .item(), impossible on meta); one unpacked sequence a row has none
        packing = mock.patch.object(transformers.masking_utils, "find_packed_sequence_indices",
                                    lambda position_ids: None)
    ids = torch.zeros((micro_batch, seq_len), dtype=torch.long, device="meta")
    grouped = getattr(torch.ops.aten, "_grouped_mm", None)
    mapping = {grouped: grouped_mm_flops} if grouped is not None else {}  # keyed by the overload packet
    counter = FlopCounterMode(display=False, custom_mapping=mapping)
    with packing, counter:
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
    return float(counter.get_total_flops())


#: Tokens of the meta-device count of what a non-reentrant checkpoint skips (it is linear in tokens).
TAIL_SEQ_LEN = 8


@functools.lru_cache(maxsize=16)
def _checkpoint_tail(config_json: str) -> float:
    config = json.loads(config_json)
    skipped = (counted_flops(config, TAIL_SEQ_LEN, attention="eager", checkpoint="reentrant")
               - counted_flops(config, TAIL_SEQ_LEN, attention="eager", checkpoint="non-reentrant"))
    return max(skipped, 0.0) / TAIL_SEQ_LEN / 2.0  # 2 FLOPs a parameter of a product's forward


def checkpoint_tail_params(config: dict[str, Any]) -> float:
    """Matrix-product parameters a token meets in the layer products a non-reentrant checkpoint does not
    re-run under full recomputation, measured on the real module on the meta device: the forward and
    backward FLOPs under a reentrant checkpoint less those under a non-reentrant one, per token, over 2
    (accounts/compute.flops_per_token's `tail_params`; catalogue/checkpoint_tail.toml lists the families
    measured so on CPU). Cached per configuration."""
    return _checkpoint_tail(json.dumps(config, sort_keys=True))


#: Elements of the stand-in parameter each dtype's AdamW step runs on (adamw_state_bytes_per_param).
ADAMW_PROBE_ELEMENTS = 4096


def adamw_state_bytes_per_param(model: Any) -> float:
    """Bytes of torch.optim.AdamW state per parameter of `model` (on any device, meta included): one
    real step on CPU over a parameter of each dtype the model holds, the state per element weighted by
    the model's parameters in that dtype. AdamW keeps per-element moments whatever the shape, so no
    copy of the model is built."""
    torch, _ = _imports()
    by_dtype: dict[Any, int] = {}
    for p in {id(p): p for p in model.parameters()}.values():
        by_dtype[p.dtype] = by_dtype.get(p.dtype, 0) + p.numel()
    total = 0.0
    for dtype, numel in by_dtype.items():
        w = torch.nn.Parameter(torch.zeros(ADAMW_PROBE_ELEMENTS, dtype=dtype))
        opt = torch.optim.AdamW([w], lr=1e-4)
        w.grad = torch.ones_like(w)
        opt.step()
        state = sum(v.numel() * v.element_size() for v in opt.state[w].values() if torch.is_tensor(v) and v.dim() > 0)
        total += numel * state / ADAMW_PROBE_ELEMENTS
    return total / max(sum(by_dtype.values()), 1)


def optimizer_state_bytes(model: Any) -> float:
    """Bytes of the optimizer state torch.optim.AdamW allocates after one real step."""
    torch, _ = _imports()
    model.train()
    device = next(model.parameters()).device
    ids = torch.randint(0, model.config.vocab_size, (1, 8), device=device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    total = 0
    for state in opt.state.values():
        for v in state.values():
            if torch.is_tensor(v) and v.dim() > 0:
                total += v.numel() * v.element_size()
    model.zero_grad(set_to_none=True)
    return float(total)


def cuda_peak_bytes(config: dict[str, Any], micro_batch: int, seq_len: int, attention: str) -> float | None:
    """torch.cuda.max_memory_allocated over one forward + backward + AdamW step; None without CUDA."""
    torch, _ = _imports()
    if not torch.cuda.is_available():
        return None
    model = build_model(config, attention=attention, device="cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, model.config.vocab_size, (micro_batch, seq_len), device="cuda")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    torch.cuda.synchronize()
    return float(torch.cuda.max_memory_allocated())


@dataclass
class ModelProbe:
    model_type: str
    attention: str
    micro_batch: int
    seq_len: int
    layers: int
    params: int
    activation_bytes_per_layer_token: float
    activation_bytes_outside_token: float
    flops_per_token: dict[str, float]  # sequence length -> counted FLOPs per token
    optimizer_state_bytes: float
    cuda_devices: list[dict[str, Any]] = field(default_factory=list)
    precision: str = "bf16"
    recompute: str = "none"
    measured_on: str = "the real module traced on the meta device (measure/trace.py)"
    per_layer_bytes_per_token: list[float] = field(default_factory=list)  # each layer as built, at seq_len
    optimizer_state_bytes_per_param: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def announce(config: dict[str, Any], micro_batch: int, seq_len: int, attention: str, precision: str,
             recompute: str, flop_seq_lens: tuple[int, ...]) -> str:
    """What the probe will measure, in words, before it starts."""
    layers = config.get("num_hidden_layers", config.get("n_layer", "?"))
    torch, _ = _imports()
    gpu = "; one training step of the whole model on the GPU (peak memory)" if torch.cuda.is_available() else ""
    return (f"probe model: {config.get('model_type')} ({layers} layers). Measuring: saved activations, tracing the "
            f"real module on the meta device (no memory) at b={micro_batch}, S={max(2, seq_len // 2)} and "
            f"S={seq_len}, {attention}, {precision}, recompute {recompute}; FLOPs per token by FlopCounterMode "
            f"on the meta device at S={', '.join(str(s) for s in flop_seq_lens)}; AdamW state per parameter "
            f"after one real step per parameter dtype on CPU{gpu}.")


def learned_position_rows(config: dict[str, Any], attention: str | None = None) -> int | None:
    """Rows of the model's learned position embedding (GPT-2's wpe, OPT's embed_positions), or None for a
    model without one (rotary or ALiBi positions): a sequence longer than the table indexes past it and
    runs on no device. Found on the built module (one layer, meta device), not from a list of families."""
    torch, _ = _imports()
    # `attention` given (probe model's own): a module that cannot be built with it is refused here, before
    # any measurement; else eager, which every attention module builds with (Gemma 2's softcap has no sdpa),
    # and a model with no attention at all (Mamba) has no position table either
    try:
        model = build_model(_one_layer_copy(config), attention=attention or "eager", device="meta")
    except UserError:
        if attention is not None:
            raise
        return None
    positions = getattr(model.config, "max_position_embeddings", None)
    if not isinstance(positions, int) or positions < 1:
        return None
    tokens = model.get_input_embeddings()
    # OPT's table keeps 2 rows of offset: the usable length is the config's
    learned = any(isinstance(m, torch.nn.Embedding) and m is not tokens and positions <= m.num_embeddings <= positions + 2
                  for m in model.modules())
    return positions if learned else None


def _one_layer_copy(config: dict[str, Any]) -> dict[str, Any]:
    """The config with one decoder layer (and the layer-type lists cut to it)."""
    out = dict(config)
    for key in ("num_hidden_layers", "n_layer", "num_layers"):
        if key in out or key == "num_hidden_layers":
            out[key] = 1
    for key in ("layer_types", "mlp_only_layers"):
        if isinstance(out.get(key), list):
            out[key] = out[key][:1]
    return out


def probe_model(config: dict[str, Any], micro_batch: int = 2, seq_len: int = 128, attention: str = "sdpa",
                flop_seq_lens: tuple[int, ...] = (512, 2048, 8192), precision: str = "bf16",
                recompute: str = "none", show: bool | None = None) -> ModelProbe:
    """Everything `trainplan probe model` measures (module docstring)."""
    from trainplan.accounts import activations as act
    from trainplan.measure import trace
    from trainplan.progress import progress
    from trainplan.workload.params import count_from_hf_config

    if micro_batch < 1 or seq_len < 4:
        raise UserError("--batch/--seq-len", "a micro-batch of 1 or more and at least 4 tokens")
    if recompute not in act.RECOMPUTE_KINDS:
        raise UserError("--recompute", f"one of {', '.join(act.RECOMPUTE_KINDS)}, got {recompute!r}")
    with progress("probe model", total=4, show=show) as steps:
        steps.describe("counting parameters (meta device)")
        count = count_from_hf_config(config)
        steps.advance()
        steps.describe("tracing saved tensors (meta device)")
        traced = trace.trace_activations(config, micro_batch, (max(2, seq_len // 2), seq_len), attention, precision,
                                         selective=recompute == "selective")
        shape = act.ActivationShape(str(config["model_type"]), count.layers, count.width, count.ffn_width,
                                    count.heads, count.kv_heads, count.head_dim, count.vocab,
                                    count.experts_per_token, experts=count.experts, traced=traced)
        a = 2.0 if precision == "bf16" else 4.0  # the residual stream's bytes (fp32 under autocast)
        account = act.activation_account(shape, micro_batch, seq_len, attention, a, recompute, False)
        tokens = micro_batch * seq_len
        per_layer = account.layers_bytes / (tokens * max(len(traced.layers), 1))
        outside = account.outside_saved_bytes / tokens
        steps.advance()
        steps.describe("counting FLOPs (meta device)")
        flops = {str(s): counted_flops(config, s, 1, attention) / s for s in flop_seq_lens}
        steps.advance()
        steps.describe("one AdamW step per parameter dtype (CPU)")
        per_param = adamw_state_bytes_per_param(trace.build_meta(_one_layer_copy(config), attention,
                                                                 "fp32" if precision == "autocast" else precision))
        peak = cuda_peak_bytes(config, micro_batch, seq_len, attention)
        steps.advance()
    cuda = [{"max_memory_allocated": peak}] if peak is not None else []
    return ModelProbe(str(config["model_type"]), attention, micro_batch, seq_len, len(traced.layers), int(count.total),
                      per_layer, outside, flops, per_param * count.total, cuda, precision, recompute,
                      per_layer_bytes_per_token=traced.layer_bytes_per_token(seq_len),
                      optimizer_state_bytes_per_param=per_param)
