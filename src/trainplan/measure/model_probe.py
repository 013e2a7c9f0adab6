"""Measure a Hugging Face model's training footprint on this machine (`trainplan probe model`).

The model is built from a config (a config.json, or a model_type and shape) with random
weights, never downloaded. Measured:

* saved-activation bytes per layer and outside the layers: every tensor the autograd graph
  saves in one forward pass (``torch.autograd.graph.saved_tensors_hooks``), deduplicated by
  storage, parameters excluded, attributed to the decoder layer that first saved it;
* FLOPs per token of forward + backward (``torch.utils.flop_counter.FlopCounterMode``) with
  the model on the meta device, at several sequence lengths (no memory is allocated);
* optimizer-state bytes after one real AdamW step (the moments torch allocates);
* on a CUDA device, ``torch.cuda.max_memory_allocated`` of one training step.

torch and transformers are the `model` extra; without them the probe exits 2 naming it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainplan.errors import UserError

EXTRA_HINT = "torch and transformers installed (pip install 'trainplan[model]')"
OUTSIDE = "outside"


def _imports() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError:
        raise UserError("probe model", f"expected {EXTRA_HINT}") from None
    return torch, transformers


def build_config(config: dict[str, Any]) -> Any:
    """A transformers config object from a config.json dict (needs `model_type`)."""
    _, transformers = _imports()
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise UserError("model_type", "a config with a model_type (llama, gpt2, ...)")
    kwargs = {k: v for k, v in config.items() if k not in ("model_type", "architectures", "transformers_version")}
    try:
        return transformers.AutoConfig.for_model(model_type, **kwargs)
    except (ValueError, KeyError) as err:
        raise UserError("model_type", f"a model type transformers knows ({err})") from None


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
    from trainplan.workload import limits

    limits.check_numbers(config, "--set", units.LARGEST_WHOLE)  # the numeric boundary (issue 29)
    return config


def _layers(model: Any) -> list[Any]:
    """The decoder layers: the largest ModuleList of the model."""
    torch, _ = _imports()
    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
    if not lists:
        raise UserError("model_type", "a decoder with a list of layers")
    return list(max(lists, key=len))


def build_model(config: dict[str, Any], attention: str = "sdpa", device: str = "cpu", dtype: str = "bf16") -> Any:
    torch, transformers = _imports()
    cfg = build_config(config)
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch_dtype, attn_implementation=attention)
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


def _checkpointed_attention_core() -> Any:
    """A context in which every attention core (transformers' attention interface: eager or SDPA)
    runs under torch.utils.checkpoint: selective recomputation as Megatron defines it. The
    reentrant form saves the core's inputs (q, k, v) with save_for_backward, so the saved-tensor
    hooks see what selective recomputation keeps."""
    import contextlib

    import torch.utils.checkpoint as checkpoint
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    @contextlib.contextmanager
    def patched() -> Any:
        original = ALL_ATTENTION_FUNCTIONS.get_interface

        def get_interface(*args: Any, **kwargs: Any) -> Any:
            core = original(*args, **kwargs)

            def recomputed(module: Any, q: Any, k: Any, v: Any, mask: Any, **kw: Any) -> Any:
                return checkpoint.checkpoint(lambda q_, k_, v_: core(module, q_, k_, v_, mask, **kw), q, k, v,
                                             use_reentrant=True)
            return recomputed

        ALL_ATTENTION_FUNCTIONS.get_interface = get_interface
        try:
            yield
        finally:
            del ALL_ATTENTION_FUNCTIONS.get_interface  # the class's method again

    return patched()


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
                (_checkpointed_attention_core() if selective else contextlib.nullcontext()):
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


def counted_flops(config: dict[str, Any], seq_len: int, micro_batch: int = 1, attention: str = "sdpa") -> float:
    """FLOPs of one forward + backward with labels, counted by FlopCounterMode on the meta device."""
    torch, _ = _imports()
    from torch.utils.flop_counter import FlopCounterMode

    model = build_model(config, attention=attention, device="meta")
    ids = torch.zeros((micro_batch, seq_len), dtype=torch.long, device="meta")
    counter = FlopCounterMode(display=False)
    with counter:
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
    return float(counter.get_total_flops())


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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def probe_model(config: dict[str, Any], micro_batch: int = 2, seq_len: int = 128, attention: str = "sdpa",
                flop_seq_lens: tuple[int, ...] = (512, 2048, 8192)) -> ModelProbe:
    """Everything `trainplan probe model` measures, on CPU (and the GPU when present)."""
    if micro_batch < 1 or seq_len < 2:
        raise UserError("--batch/--seq-len", "a micro-batch of 1 or more and at least 2 tokens")
    model = build_model(config, attention=attention)
    saved = saved_bytes(model, micro_batch, seq_len)
    params = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    flops = {str(s): counted_flops(config, s, 1, attention) / s for s in flop_seq_lens}
    optimizer = optimizer_state_bytes(model)
    peak = cuda_peak_bytes(config, micro_batch, seq_len, attention)
    cuda = [{"max_memory_allocated": peak}] if peak is not None else []
    return ModelProbe(str(config["model_type"]), attention, micro_batch, seq_len, len(saved.per_layer), int(params),
                      saved.per_layer_per_token, saved.outside_per_token, flops, optimizer, cuda)
