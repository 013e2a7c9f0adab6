"""Activation memory counted from the model's own code (issue 24): the real transformers module,
traced on the meta device (no memory, no weights, any size), its saved tensors read per layer.

One forward pass with labels runs under two hooks:

* a dispatch mode records, for every tensor an op produces, where it was made: the decoder layer
  (the largest ModuleList's entry running) and the part of it (PARTS: norms, linear inputs,
  attention, MLP, dropout), or outside the layers;
* ``torch.autograd.graph.saved_tensors_hooks`` sees every tensor autograd keeps for backward;
  each storage is counted once (views share it), parameters excluded, at the place that made it.

Storages are held for the whole pass so that no address is reused. The pass runs at two sequence
lengths, S1 and S2; a layer's bytes per token are exactly ``alpha + beta S`` (the S^2 tensors of
eager attention give beta), solved from the two, and so outside the layers; the micro-batch is the
one asked for (rotary tables are per sequence). The bytes of layer l at any S follow, and the
model's total is the sum over its layers: heterogeneous layers (DeepSeek's dense first layers,
Gemma's sliding layers, Qwen2-MoE's mlp_only_layers) are each traced as they are built.

The attention kernel: on the meta device torch's SDPA falls back to its math form (fp32 scores),
which no GPU runs; under ``sdpa`` the trace calls a stand-in instead that keeps what the flash and
memory-efficient kernels keep (catalogue/activation_traits.toml [attention.sdpa]): q, k, v as
given, the output (laid out as the query is in memory, as torch's flash kernels allocate it, so the
o_proj input is a view of it where q is a view of a per-token projection, a copy where the family
made q contiguous per head) and the fp32 log-sum-exp per head and token. ``eager`` runs the family's own Python attention.

Precision: ``bf16`` builds the weights in bf16 (pure bf16 or bf16 with an fp32 master copy: the
forward is the same); ``fp32`` builds them in fp32, eager fp32 throughout; ``autocast`` builds
them in fp32 and runs the forward as torch.autocast(bfloat16) does on CUDA (HF Trainer's
bf16=True): torch's autocast dispatch does not run on the meta device, so a function mode applies
CUDA's published op lists (AUTOCAST_LOWER: matrix products and SDPA in bf16; AUTOCAST_FP32:
softmax, log-softmax, norms, losses, pow, rsqrt, exp, log, sums in fp32; anything else at its
inputs' widest type), each weight cast once a pass as autocast caches it. The bf16 weight copies
the matrix products keep are a constant a pass (``constant_bytes``), not bytes per token.
Checked against torch's own CPU autocast where the CPU and CUDA lists agree (Llama).
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field
from typing import Any

from trainplan.errors import UserError

OUTSIDE = "outside"
#: The parts of a layer, as accounts/activations.LayerBytes names them.
PARTS = ("norms", "linear_inputs", "attention", "attention_scores", "mlp", "hidden_dropout",
         "attention_dropout")
PRECISIONS = ("bf16", "fp32", "autocast")
TRACE_ATTENTION = ("sdpa", "eager")
EXTRA_HINT = "pip install 'trainplan[model]' (torch and transformers) to trace the model's own code"


def available() -> bool:
    """Whether torch and transformers can be imported (the trace can run)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))


def _imports() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError:
        raise UserError("model.hf_config", f"torch and transformers to trace this family: {EXTRA_HINT}") from None
    return torch, transformers


@dataclass(frozen=True)
class TracedLayer:
    """Bytes per token of one layer, ``alpha + beta S`` per part (beta: what grows with S)."""

    alpha: dict[str, float]
    beta: dict[str, float]

    def bytes_per_token(self, seq_len: int) -> dict[str, float]:
        return {p: self.alpha.get(p, 0.0) + self.beta.get(p, 0.0) * seq_len for p in PARTS}


@dataclass(frozen=True)
class ActivationTrace:
    """What the real module keeps per token, per layer and outside the layers, at one micro-batch."""

    model_type: str
    attention: str
    precision: str
    micro_batch: int
    seq_lens: tuple[int, int]
    layers: tuple[TracedLayer, ...]
    outside_alpha: float
    outside_beta: float
    logits_bytes_per_value: float  # the logits the model returns (held through backward), per vocab entry
    vocab: int
    constant_bytes: float = 0.0  # scalars saved once a pass (0-dim tensors), whatever b and S
    # with every attention core under torch.utils.checkpoint (selective recomputation), when traced
    selective_layers: tuple[TracedLayer, ...] = ()
    listing: dict[str, list[tuple[tuple[int, ...], str, int, str]]] = field(default_factory=dict, compare=False)

    def selective_bytes_per_token(self, seq_len: int) -> list[float]:
        return [sum(layer.bytes_per_token(seq_len).values()) for layer in self.selective_layers]

    def layer_bytes_per_token(self, seq_len: int) -> list[float]:
        return [sum(layer.bytes_per_token(seq_len).values()) for layer in self.layers]

    def outside_bytes_per_token(self, seq_len: int) -> float:
        return self.outside_alpha + self.outside_beta * seq_len

    def parts_per_token(self, seq_len: int) -> dict[str, float]:
        """The mean layer's parts, bytes per token (what LayerBytes carries)."""
        n = max(len(self.layers), 1)
        out = dict.fromkeys(PARTS, 0.0)
        for layer in self.layers:
            for p, v in layer.bytes_per_token(seq_len).items():
                out[p] += v / n
        return out


def _part(path: str, module_classes: tuple[str, ...], made_by_norm: bool) -> str:
    """The LayerBytes part of a tensor made inside a layer at `path` (module names, innermost last)."""
    lower = path.lower()
    classes = " ".join(module_classes).lower()
    if "dropout" in classes.rsplit(" ", 1)[-1]:
        return "attention_dropout" if ("attn" in lower or "attention" in lower) else "hidden_dropout"
    if made_by_norm and not any(k in lower for k in ("q_norm", "k_norm", "q_layernorm", "k_layernorm",
                                                     "kv_a_layernorm", "q_a_layernorm")):
        return "norms"
    if "attn" in lower or "attention" in lower:
        return "attention"
    if any(k in lower for k in ("mlp", "feed_forward", "ffn", "experts", "moe")):
        return "mlp"
    return "norms"  # residual adds, casts at the layer's own level


class _FlashSaved:
    """The saved set of a flash / memory-efficient SDPA kernel, for the meta device (module docstring)."""

    function: Any = None

    @classmethod
    def make(cls, torch: Any) -> Any:
        if cls.function is not None:
            return cls.function

        class Kernel(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, q: Any, k: Any, v: Any) -> Any:  # noqa: ANN401
                # the output takes the query's memory layout, as torch's flash kernels allocate it
                # (empty_like(query) in the meta registration; the CPU kernel the same): (b, S, h, k) where
                # q is a view of a per-token projection (o_proj's input is then a view), (b, h, S, k) where
                # the family made q contiguous per head (GPT-NeoX's partial rotary: o_proj keeps a copy)
                shape = (*q.shape[:3], v.shape[-1])
                order = sorted(range(4), key=lambda i: (q.stride(i), -i), reverse=True)  # outermost first
                out = torch.empty([shape[i] for i in order], dtype=q.dtype, device=q.device).permute(
                    [order.index(i) for i in range(4)])
                b, h, s, _ = q.shape
                lse = torch.empty((b, h, s), dtype=torch.float32, device=q.device)
                ctx.save_for_backward(q, k, v, out, lse)
                return out

            @staticmethod
            def backward(ctx: Any, grad: Any) -> Any:  # noqa: ANN401 - never run: the trace does no backward
                q, k, v, _, _ = ctx.saved_tensors
                return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)

        cls.function = Kernel
        return Kernel


@contextlib.contextmanager
def _sdpa_stand_in(torch: Any) -> Any:
    kernel = _FlashSaved.make(torch)
    original = torch.nn.functional.scaled_dot_product_attention

    def sdpa(q: Any, k: Any, v: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        if torch.overrides._get_current_function_mode() is not None and q.dtype == torch.float32:
            q, k, v = (x.to(torch.bfloat16) for x in (q, k, v))  # autocast: SDPA is on the bf16 list
        return kernel.apply(q, k, v)

    torch.nn.functional.scaled_dot_product_attention = sdpa
    try:
        yield
    finally:
        torch.nn.functional.scaled_dot_product_attention = original


class _AutocastLists:
    """torch.autocast(device_type="cuda", dtype=torch.bfloat16) written as a function mode, for the meta
    device. The op lists are torch.amp's documented CUDA lists, restricted to the functions transformers'
    decoders call: AUTOCAST_LOWER run in bf16 (their floating inputs cast, weights once a pass, as autocast
    caches them), AUTOCAST_FP32 in fp32; every other function runs on its inputs as they are."""

    @staticmethod
    def lists(torch: Any) -> tuple[set[Any], set[Any]]:
        F, T = torch.nn.functional, torch.Tensor
        lower = {F.linear, torch.matmul, T.matmul, T.__matmul__, torch.mm, T.mm, torch.bmm, T.bmm, torch.baddbmm,
                 T.baddbmm, torch.addmm, T.addmm, torch.addbmm, torch.mv, F.conv1d, F.conv2d, F.conv3d,
                 F.scaled_dot_product_attention, F.prelu}
        if hasattr(F, "grouped_mm"):
            lower.add(F.grouped_mm)
        fp32 = {F.softmax, torch.softmax, T.softmax, F.log_softmax, torch.log_softmax, T.log_softmax, F.softmin,
                F.layer_norm, F.group_norm, F.normalize, F.cross_entropy, F.nll_loss, F.mse_loss, F.l1_loss,
                F.kl_div, F.softplus, F.binary_cross_entropy_with_logits, torch.pow, T.pow, T.__pow__, T.__rpow__,
                torch.rsqrt, T.rsqrt, torch.exp, T.exp, torch.expm1, torch.log, T.log, torch.log1p, torch.log2,
                torch.log10, torch.sum, T.sum, torch.prod, T.prod, torch.cumsum, T.cumsum, torch.cumprod,
                torch.norm, T.norm, torch.reciprocal, T.reciprocal, torch.acos, torch.asin, torch.cosh,
                torch.sinh, torch.tan, torch.erfinv, torch.cdist, torch.dist}
        return lower, fp32

    @classmethod
    def mode(cls, torch: Any, weight_copies: set[int]) -> Any:
        from torch.overrides import TorchFunctionMode
        from torch.utils._pytree import tree_map

        lower, fp32 = cls.lists(torch)
        cache: dict[int, Any] = {}
        parameter = torch.nn.Parameter

        class Autocast(TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:  # noqa: ANN401
                kwargs = kwargs or {}
                if func in lower:
                    target = torch.bfloat16
                elif func in fp32:
                    target = torch.float32
                else:
                    return func(*args, **kwargs)

                def cast(t: Any) -> Any:  # noqa: ANN401
                    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.dtype == target:
                        return t
                    if isinstance(t, parameter) and target == torch.bfloat16:
                        if id(t) not in cache:  # autocast's weight cache: one copy a pass
                            cache[id(t)] = t.to(target)
                            weight_copies.add(cache[id(t)].untyped_storage()._cdata)
                        return cache[id(t)]
                    return t.to(target)

                return func(*tree_map(cast, args), **tree_map(cast, kwargs))

        return Autocast()


def _layers(model: Any) -> list[Any]:
    """The decoder layers: the ModuleList holding the most parameters (not merely the longest: StableLM's
    per-head q/k norms are a longer list)."""
    torch, _ = _imports()
    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
    if not lists:
        raise UserError("model_type", "a decoder with a list of layers")
    return list(max(lists, key=lambda m: sum(p.numel() for p in m.parameters())))


#: Attention cores run under checkpointed_attention_core since the process started (a family whose
#: attention does not go through transformers' attention interface runs none: Falcon).
CHECKPOINTED_CORES = [0]


def checkpointed_attention_core() -> Any:
    """A context in which every attention core (transformers' attention interface: eager or SDPA)
    runs under torch.utils.checkpoint: selective recomputation as Megatron defines it. The
    reentrant form saves the core's inputs (q, k, v) with save_for_backward, so the saved-tensor
    hooks see what selective recomputation keeps. CHECKPOINTED_CORES counts the cores it ran."""
    import contextlib

    import torch.utils.checkpoint as checkpoint
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    @contextlib.contextmanager
    def patched() -> Any:
        original = ALL_ATTENTION_FUNCTIONS.get_interface

        def get_interface(*args: Any, **kwargs: Any) -> Any:
            core = original(*args, **kwargs)

            def recomputed(module: Any, q: Any, k: Any, v: Any, mask: Any, **kw: Any) -> Any:
                CHECKPOINTED_CORES[0] += 1
                return checkpoint.checkpoint(lambda q_, k_, v_: core(module, q_, k_, v_, mask, **kw), q, k, v,
                                             use_reentrant=True)
            return recomputed

        ALL_ATTENTION_FUNCTIONS.get_interface = get_interface
        try:
            yield
        finally:
            del ALL_ATTENTION_FUNCTIONS.get_interface  # the class's method again

    return patched()


def build_meta(config: dict[str, Any], attention: str, precision: str) -> Any:
    """AutoModelForCausalLM on the meta device from a config.json dict (shapes only)."""
    from trainplan.workload.params import transformers_config

    torch, transformers = _imports()
    model_type = config.get("model_type")
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32, "autocast": torch.float32}[precision]
    cfg = transformers_config(config)  # the one builder: a field its class refuses is named at its key
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        with torch.device("meta"):
            try:
                return transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation=attention)
            except ValueError as err:
                if "does not support" not in str(err):
                    raise
                raise UserError("training.attention", f"an attention {model_type} implements: transformers "
                                f"builds it without {attention} ({str(err).split('.')[0]})") from None
    except (ValueError, KeyError, TypeError) as err:
        raise UserError("model_type", f"a causal language model transformers can build ({err})") from None
    finally:
        transformers.logging.set_verbosity(verbosity)


def _saved_once(model: Any, micro_batch: int, seq_len: int, attention: str, keep_listing: bool,
                autocast: bool = False, selective: bool = False) -> tuple[list[dict[str, float]], float, dict[str, list[Any]], float]:
    """(per layer: bytes by part, bytes outside, listing) of one forward pass with labels, on meta."""
    torch, _ = _imports()
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    layer_list = _layers(model)  # the ModuleList holding the most parameters: the decoder stack
    layer_of = {id(m): i for i, m in enumerate(layer_list)}
    names = {id(m): n for n, m in model.named_modules()}
    stack: list[Any] = []  # modules running, outermost first

    def place() -> tuple[str, str, tuple[str, ...], bool]:
        layer = next((str(layer_of[id(m)]) for m in reversed(stack) if id(m) in layer_of), OUTSIDE)
        inner = stack[-1] if stack else None
        path = names.get(id(inner), "") if inner is not None else ""
        classes = tuple(type(m).__name__ for m in stack)
        return layer, path, classes, bool(classes) and "norm" in classes[-1].lower()

    origin: dict[int, tuple[Any, tuple[str, str, tuple[str, ...], bool]]] = {}

    class Where(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:  # noqa: ANN401
            out = func(*args, **(kwargs or {}))
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    storage = t.untyped_storage()
                    origin.setdefault(storage._cdata, (storage, place()))
            return out

    def enter(mod: Any, _args: Any) -> None:  # noqa: ANN401
        stack.append(mod)

    def leave(mod: Any, _args: Any, _out: Any) -> None:  # noqa: ANN401 - returns None: the output stays
        if stack and stack[-1] is mod:
            stack.pop()

    handles = []
    for m in model.modules():
        handles.append(m.register_forward_pre_hook(enter))
        handles.append(m.register_forward_hook(leave))
    params = {p.untyped_storage()._cdata for p in model.parameters()}
    weight_copies: set[int] = set()  # autocast's bf16 copies of the weights: a constant a pass
    saved: dict[int, tuple[Any, tuple[str, str, str], tuple[int, ...], str]] = {}

    def pack(t: Any) -> Any:  # noqa: ANN401
        storage = t.untyped_storage()
        key = storage._cdata
        if key in params or key in saved:
            return t
        layer, path, classes, by_norm = origin.get(key, (storage, (OUTSIDE, "", (), False)))[1]
        # a norm's output kept by what reads it next (the q/k/v or MLP linear, a router) is that
        # module's input (LayerBytes.linear_inputs); kept inside the norm itself it is the norm's
        by_reader = bool(stack) and "norm" not in type(stack[-1]).__name__.lower()
        inner_norm = any(k in path.lower() for k in ("attn", "attention", "mlp", "experts"))  # q/k norms, MLA's
        part = "linear_inputs" if by_norm and by_reader and not inner_norm else _part(path, classes, by_norm)
        saved[key] = (storage, (layer, path, part), tuple(t.shape), str(t.dtype).replace("torch.", ""))
        return t

    model.train()
    ids = torch.zeros((micro_batch, seq_len), dtype=torch.long, device="meta")
    kernel = _sdpa_stand_in(torch) if attention == "sdpa" else contextlib.nullcontext()
    casting = _AutocastLists.mode(torch, weight_copies) if autocast else contextlib.nullcontext()
    if selective:
        core = checkpointed_attention_core()
    else:
        core = contextlib.nullcontext()
    try:
        with kernel, core, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), Where(), casting:
            model(input_ids=ids, labels=ids)
    finally:
        for h in handles:
            h.remove()
    return _tally_saved(saved, len(layer_list), keep_listing, weight_copies)


def _tally_saved(saved: dict[int, tuple[Any, tuple[str, str, str], tuple[int, ...], str]], layers: int,
                 keep_listing: bool, weight_copies: set[int]) -> tuple[list[dict[str, float]], float,
                                                                      dict[str, list[Any]], float]:
    """(per layer: bytes by part, bytes outside the layers, listing, bytes once a pass) of the tensors saved."""
    per_layer = [dict.fromkeys(PARTS, 0.0) for _ in range(layers)]
    outside = 0.0
    listing: dict[str, list[Any]] = {}
    constant = 0.0
    for storage, (layer, path, part), shape, dtype in saved.values():
        nbytes = float(storage.nbytes())
        if keep_listing:
            listing.setdefault(layer, []).append((shape, dtype, int(nbytes), f"{path} [{part}]"))
        if shape == () or storage._cdata in weight_copies:
            constant += nbytes  # scalars (the loss's normaliser), autocast's weight copies: once a pass
        elif layer == OUTSIDE:
            outside += nbytes
        else:
            per_layer[int(layer)][part] += nbytes
    return per_layer, outside, listing, constant


def _fit(first: list[dict[str, float]], second: list[dict[str, float]], t1: int, t2: int, s1: int, s2: int
         ) -> tuple[TracedLayer, ...]:
    """Each layer's alpha + beta S per part from its bytes at two lengths."""
    layers = []
    for a, b in zip(first, second):
        beta = {p: (b[p] / t2 - a[p] / t1) / (s2 - s1) for p in PARTS}
        alpha = {p: a[p] / t1 - beta[p] * s1 for p in PARTS}
        # what grows with S inside attention is the S^2 scores (eager); keep it apart
        beta["attention_scores"] = beta.get("attention_scores", 0.0) + beta.pop("attention")
        beta["attention"] = 0.0
        layers.append(TracedLayer(alpha, beta))
    return tuple(layers)


def trace_activations(config: dict[str, Any], micro_batch: int = 1, seq_lens: tuple[int, int] = (64, 128),
                      attention: str = "sdpa", precision: str = "bf16", keep_listing: bool = False,
                      selective: bool = False) -> ActivationTrace:
    """Saved-tensor bytes per token of every layer and outside the layers, exact in S (module docstring).
    `selective`: also trace each layer with its attention core under torch.utils.checkpoint (what
    selective recomputation keeps: the core's inputs q, k, v and its output)."""
    if attention not in TRACE_ATTENTION:
        raise UserError("training.attention", f"one of {', '.join(TRACE_ATTENTION)} to trace, got {attention!r} "
                        "(flash keeps what sdpa's flash kernel keeps: trace sdpa)")
    if precision not in PRECISIONS:
        raise UserError("training.precision", f"one of {', '.join(PRECISIONS)}, got {precision!r}")
    s1, s2 = seq_lens
    if not (2 <= s1 < s2) or micro_batch < 1:
        raise UserError("seq_lens", f"two sequence lengths 2 <= S1 < S2 and a micro-batch of 1 or more, got "
                        f"{seq_lens} and {micro_batch}")
    model = build_meta(config, attention, precision)
    if precision != "bf16" and any(p.dim() == 3 for p in model.parameters()):
        raise UserError("training.precision", "bf16 to trace fused experts on the meta device: transformers' "
                        "grouped_mm experts run in bf16 only there")
    autocast = precision == "autocast"
    first, out1, listing, constant = _saved_once(model, micro_batch, s1, attention, keep_listing, autocast)
    second, out2, _, _ = _saved_once(model, micro_batch, s2, attention, False, autocast)
    t1, t2 = micro_batch * s1, micro_batch * s2
    layers = _fit(first, second, t1, t2, s1, s2)
    selective_layers: tuple[TracedLayer, ...] = ()
    if selective:
        before = CHECKPOINTED_CORES[0]
        sel1, _, _, _ = _saved_once(model, micro_batch, s1, attention, False, autocast, True)
        sel2, _, _, _ = _saved_once(model, micro_batch, s2, attention, False, autocast, True)
        if CHECKPOINTED_CORES[0] > before:  # else the family's attention bypasses the interface (Falcon):
            selective_layers = _fit(sel1, sel2, t1, t2, s1, s2)  # the account drops the S-growing part
    o_beta = (out2 / t2 - out1 / t1) / (s2 - s1)
    o_alpha = out1 / t1 - o_beta * s1
    vocab = int(model.get_output_embeddings().weight.shape[0])
    logits = 4.0 if precision == "fp32" else 2.0
    return ActivationTrace(str(config["model_type"]), attention, precision, micro_batch, (s1, s2), tuple(layers),
                           o_alpha, o_beta, logits, vocab, constant, selective_layers, listing)


#: The two sequence lengths a plan's trace is taken at (any two give the same alpha + beta S).
PLAN_TRACE_SEQ_LENS = (64, 128)


def cached_trace(config: dict[str, Any], micro_batch: int, attention: str, precision: str,
                 recompute: str = "none") -> ActivationTrace:
    """The trace a plan uses for a family without traits: at the plan's micro-batch, its attention
    (flash keeps what sdpa's kernels keep) and its precision (fp16 keeps bf16's bytes). Cached per
    configuration, so a sweep traces once."""
    import json

    kind = "sdpa" if attention == "flash" else attention
    dtype = precision if precision in ("fp32", "autocast") else "bf16"
    return _cached(json.dumps(config, sort_keys=True), int(micro_batch), kind, dtype, recompute == "selective")


@functools.lru_cache(maxsize=16)
def _cached(config_json: str, micro_batch: int, attention: str, precision: str, selective: bool) -> ActivationTrace:
    import json

    return trace_activations(json.loads(config_json), micro_batch, PLAN_TRACE_SEQ_LENS, attention, precision,
                             selective=selective)
