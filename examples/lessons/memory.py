"""Lesson figures: memory of training state and activations.

Run: PYTHONPATH=src python examples/lessons/memory.py   (the last part needs the torch extra)
Held by tests/test_lessons.py::test_fp32_adam_7b, ::test_activation_gib, ::test_training_budget_180_gb,
::test_encoder_layer_adamw_state.
"""

from __future__ import annotations

from trainplan.accounts import compute as compute_mod
from trainplan.accounts import memory as memory_mod
from trainplan.catalogue.dtypes import bytes_per_element, state_bytes_per_param
from trainplan.workload.params import count_from_shape

GIB = 2.0**30
GB = 1e9
CARD_GIB = 80.0


def fp32_adam(params: float = 7e9) -> dict:
    """4 (weights) + 4 (grads) + 8 (two moments) bytes per parameter."""
    state = state_bytes_per_param("fp32", "adamw")
    total = params * state.total
    return {"bytes_per_param": state.total, "gib": total / GIB, "fits_80_gib": total / GIB <= CARD_GIB}


def activations_gib(seq_len: int, layers: int = 32, width: int = 4096, tensors: float = 16) -> float:
    """One sequence, 16 width-sized bf16 tensors per layer per token."""
    return memory_mod.activation_bytes(1, seq_len, width, layers, bytes_per_element("bf16"), tensors) / GIB


def training_budget() -> dict:
    """32 layers, width 4,096, vocabulary 128,000; four sequences of 4,096; bf16 mixed-precision AdamW."""
    params = float(count_from_shape(32, 4096, 128_000).total)
    s = state_bytes_per_param("bf16", "adamw")
    kept = memory_mod.retained_tensors(16, "none", 1.0)
    one = memory_mod.retained_tensors(16, "full", 1.0)  # one activation kept per block
    act = memory_mod.activation_bytes(4, 4096, 4096, 32, bytes_per_element("bf16"), kept)
    act_one = memory_mod.activation_bytes(4, 4096, 4096, 32, bytes_per_element("bf16"), one)
    parts = {"weights": params * s.weights, "grads": params * s.grads, "master": params * s.master,
             "adam": params * s.optimizer, "activations": act}
    state = parts["weights"] + parts["grads"] + parts["master"] + parts["adam"]
    extra = compute_mod.training_flops(1, 1, "full") / compute_mod.training_flops(1, 1, "none") - 1
    return {"params": params, "parts_gb": {k: v / GB for k, v in parts.items()},
            "total_gb": (state + act) / GB, "one_per_block_gb": (state + act_one) / GB, "extra_arithmetic": extra}


def encoder_layer_state() -> dict | None:
    """A real nn.TransformerEncoderLayer(512, 8, 2048) after one AdamW step, counted in torch."""
    try:
        import torch
    except ImportError:
        print("  (install the torch extra, pip install 'trainplan[torch]', for the measured layer)")
        return None
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048)
    opt = torch.optim.AdamW(layer.parameters())
    layer(torch.randn(4, 2, 512)).sum().backward()
    opt.step()
    params = sum(p.numel() for p in layer.parameters())
    state = sum(t.numel() for st in opt.state.values() for t in st.values() if torch.is_tensor(t))
    return {"params": params, "state_numbers": state, "ratio": state / params,
            "account_ratio": state_bytes_per_param("fp32", "adamw").optimizer / bytes_per_element("fp32")}


def main() -> None:
    a = fp32_adam()
    print(f"fp32 Adam, {a['bytes_per_param']:g} bytes per parameter: 7 B needs {a['gib']:.0f} GiB "
          f"({'fits' if a['fits_80_gib'] else 'does not fit'} an 80 GiB card)")
    print(f"activations, 32 layers x 4,096 wide, 16 bf16 tensors: {activations_gib(512):.0f} GiB at 512 tokens, "
          f"{activations_gib(32768):.0f} GiB at 32,768")
    b = training_budget()
    p = b["parts_gb"]
    print(f"{b['params'] / 1e9:.2f} B parameters, four sequences of 4,096: {b['total_gb']:.0f} GB = "
          f"{p['weights']:.0f} + {p['grads']:.0f} + {p['master']:.0f} + {p['adam']:.0f} + {p['activations']:.0f}")
    print(f"one activation kept per block: {b['one_per_block_gb']:.0f} GB, "
          f"+{b['extra_arithmetic'] * 100:.0f} % arithmetic")
    e = encoder_layer_state()
    if e is not None:
        print(f"nn.TransformerEncoderLayer(512, 8, 2048) after one AdamW step: {e['params']:,} parameters, "
              f"{e['state_numbers']:,} numbers of state, {e['ratio']:.1f}x (the account: {e['account_ratio']:.1f}x)")


if __name__ == "__main__":
    main()
