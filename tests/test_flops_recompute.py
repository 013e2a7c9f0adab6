"""Full recomputation's executed FLOPs against the real module's, reentrant and not (issue 24).

transformers' gradient checkpointing (use_reentrant=False by default) stops re-running a layer once
every tensor its backward keeps is back; a reentrant checkpoint (Megatron-LM's, DeepSpeed's,
use_reentrant=True) re-runs the whole forward. The plan's executed FLOPs per token under
`training.recompute = "full"` are compared with torch.utils.flop_counter.FlopCounterMode over one
forward and backward of each family catalogue/checkpoint_tail.toml names, built by transformers on
CPU with random weights: framework `transformers` against use_reentrant=False, `megatron-core` against
use_reentrant=True."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from trainplan import catalogue  # noqa: E402
from trainplan.planning.evaluate import build_report  # noqa: E402
from trainplan.workload.load import load_workload  # noqa: E402

BASE = dict(vocab_size=1000, hidden_size=128, intermediate_size=352, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2)
MOE = dict(vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
           num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=8, num_experts_per_tok=2)
# one tiny configuration of every family the catalogue names (dropouts 0: the catalogue's measurement)
FAMILIES: dict[str, dict[str, Any]] = {
    "llama": BASE, "mistral": BASE, "qwen2": BASE, "qwen3": {**BASE, "head_dim": 32},
    "phi3": {**BASE, "pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0},
    "stablelm": {**BASE, "qk_layernorm": True, "use_qkv_bias": True},
    "gpt2": dict(n_embd=128, n_layer=2, n_head=4, vocab_size=1000, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0),
    "gpt_neox": dict(hidden_size=128, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                     vocab_size=1000, attention_dropout=0.0, hidden_dropout=0.0),
    "falcon": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=8, num_kv_heads=2,
                   new_decoder_architecture=True, vocab_size=1000, bos_token_id=0, eos_token_id=0,
                   attention_dropout=0.0, hidden_dropout=0.0),
    "gemma2": {**BASE, "head_dim": 32, "sliding_window": 16},
    "gemma3_text": dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=8),
    "mixtral": {**BASE, "num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen2_moe": {**BASE, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 96, "num_experts": 4,
                  "num_experts_per_tok": 2},
    "qwen3_moe": {**MOE, "tie_word_embeddings": False},
    "olmoe": {**MOE, "intermediate_size": 32, "num_key_value_heads": 4, "pad_token_id": 0, "eos_token_id": 0,
              "bos_token_id": 0},
}
SEQ = 64


def test_every_family_of_the_catalogue_is_measured_here() -> None:
    assert set(catalogue.table("checkpoint_tail")["families"]) == set(FAMILIES)


def _counted(config: dict[str, Any], reentrant: bool | None) -> float:
    """FlopCounterMode's FLOPs per token of one forward + backward; `reentrant` None: no checkpoint."""
    from torch.utils.flop_counter import FlopCounterMode

    cfg = transformers.AutoConfig.for_model(**config)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager",
                                                              experts_implementation="eager")
    model.train()
    if reentrant is not None:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    ids = torch.randint(0, config["vocab_size"], (1, SEQ))
    counter = FlopCounterMode(display=False)
    with counter:
        model(input_ids=ids, labels=ids).loss.backward()
    return counter.get_total_flops() / SEQ


def _planned(tmp_path, config: dict[str, Any], framework: str, recompute: str = "full") -> dict[str, Any]:
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "w.toml").write_text(
        f'[model]\nhf_config = "config.json"\n[training]\ntokens = "1M"\nmicro_batch = 1\nseq_len = {SEQ}\n'
        f'attention = "eager"\nrecompute = "{recompute}"\n[parallel]\nframework = "{framework}"\n'
        '[data]\nkind = "tokens"\n')
    return build_report(load_workload(tmp_path / "w.toml", []))["compute"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_full_recomputation_counts_what_the_checkpoint_reruns(tmp_path, family: str) -> None:
    config = {"model_type": family, **FAMILIES[family]}
    plain = _counted(config, None)
    reentrant, non_reentrant = _counted(config, True), _counted(config, False)
    assert reentrant > plain  # the checkpoint ran
    assert _planned(tmp_path, config, "megatron-core")["flops_per_token_executed"] == pytest.approx(
        reentrant, rel=1e-9)
    hf = _planned(tmp_path, config, "transformers")
    assert hf["flops_per_token_executed"] == pytest.approx(non_reentrant, rel=1e-9)
    skips = catalogue.table("checkpoint_tail")["families"][family]
    assert ("but its MLP down projection" in hf["recompute_rerun"]) == skips
    # the meta-device measurement (what a family outside the catalogue gets) says the same
    from trainplan.measure.model_probe import checkpoint_tail_params

    assert checkpoint_tail_params(config) == pytest.approx((reentrant - non_reentrant) / 2, rel=1e-9)
    # the model FLOPs (MFU's) do not depend on the checkpoint
    assert hf["flops_per_token_model"] == _planned(tmp_path, config, "megatron-core")["flops_per_token_model"]


@pytest.mark.parametrize("family", ["granite", "gptj", "olmo2", "starcoder2"])
def test_a_family_the_catalogue_does_not_name_is_measured_on_its_own_module(tmp_path, family: str) -> None:
    """Families outside the catalogue: what a non-reentrant checkpoint skips is measured on the module on
    the meta device (model_probe.checkpoint_tail_params), equal to FlopCounterMode on CPU; GPT-J's
    parallel block and Starcoder2's plain MLP skip their down projection, OLMo-2's norm after the MLP
    keeps it."""
    configs = {"granite": BASE, "olmo2": BASE,
               "gptj": dict(n_embd=128, n_layer=2, n_head=4, vocab_size=1000, rotary_dim=16, resid_pdrop=0.0,
                            embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0),
               "starcoder2": {**BASE, "residual_dropout": 0.0, "embedding_dropout": 0.0, "attention_dropout": 0.0}}
    config = {"model_type": family, **configs[family]}
    hf = _planned(tmp_path, config, "transformers")
    assert hf["flops_per_token_executed"] == pytest.approx(_counted(config, False), rel=1e-9)
    assert "measured on" in hf["recompute_rerun"]


def test_without_torch_an_unnamed_family_is_counted_as_a_reentrant_checkpoint_runs_it(tmp_path, monkeypatch) -> None:
    from trainplan.measure import trace

    monkeypatch.setattr(trace, "available", lambda: False)
    config = {"model_type": "granite", **BASE}
    hf = _planned(tmp_path, config, "transformers")
    assert hf["flops_per_token_executed"] == pytest.approx(_counted(config, True), rel=1e-9)
    assert "granite is not measured" in hf["recompute_rerun"]


def test_dropout_makes_the_non_reentrant_checkpoint_rerun_the_whole_layer(tmp_path) -> None:
    """GPT-2 with its dropouts on: the re-run draws the masks again, so the down projection runs again too
    (FlopCounterMode, use_reentrant=False with dropout against use_reentrant=True)."""
    config = {"model_type": "gpt2", **{**FAMILIES["gpt2"], "resid_pdrop": 0.1, "attn_pdrop": 0.1}}
    assert _counted(config, False) == pytest.approx(_counted(config, True), rel=1e-9)
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "w.toml").write_text(
        f'[model]\nhf_config = "config.json"\n[training]\ntokens = "1M"\nmicro_batch = 1\nseq_len = {SEQ}\n'
        'attention = "eager"\nrecompute = "full"\ndropout = true\n[parallel]\nframework = "transformers"\n'
        '[data]\nkind = "tokens"\n')
    compute = build_report(load_workload(tmp_path / "w.toml", []))["compute"]
    assert compute["flops_per_token_executed"] == pytest.approx(_counted(config, False), rel=1e-9)
    assert "dropout" in compute["recompute_rerun"]
