"""Parameter counts: by hand from the formulas, and against transformers on the meta device."""

from __future__ import annotations

import json
import warnings
from dataclasses import FrozenInstanceError
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from trainplan.interfaces.commands.params import register
from trainplan.errors import UserError
from trainplan.workload.params import (
    SUPPORTED_MODEL_TYPES,
    ParamCount,
    count_from_hf_config,
    count_from_shape,
    load_hf_config,
)

FIXTURES = Path(__file__).parent / "fixtures" / "hf_configs"
ALL_FIXTURES = sorted(path.name for path in FIXTURES.glob("*.json"))
# The published configs (full size); the others are tiny variants.
REAL_FIXTURES = [
    "llama-2-7b.json",
    "llama-3-8b.json",
    "mistral-7b-v0.1.json",
    "qwen2-0.5b.json",
    "qwen2-7b.json",
    "gpt2.json",
    "pythia-160m.json",
    "mixtral-8x7b.json",
]


def fixture(name: str) -> dict[str, Any]:
    return load_hf_config(FIXTURES / name)


# --------------------------------------------------------------------------- #
# transformers on the meta device (no memory, no weights): the outside reference.
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="module")
def hf_count():
    """A function config dict -> parameters of AutoModelForCausalLM.from_config, on meta."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()

    def count(config: dict[str, Any]) -> int:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hf_config = transformers.AutoConfig.for_model(**config)
            with torch.device("meta"):
                model = transformers.AutoModelForCausalLM.from_config(hf_config)
        # parameters() yields a tied tensor once, as it is stored.
        return sum(p.numel() for p in model.parameters())

    return count


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_config_count_matches_transformers(name: str, hf_count) -> None:
    config = fixture(name)
    assert count_from_hf_config(config).total == hf_count(config)


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_config_count_matches_transformers_with_tying_flipped(name: str, hf_count) -> None:
    config = fixture(name)
    tied_as_written = count_from_hf_config(config).tied
    flipped = {**config, "tie_word_embeddings": not tied_as_written}
    ours = count_from_hf_config(flipped)
    assert ours.tied is (not tied_as_written)
    assert ours.total == hf_count(flipped)
    # Tying removes exactly one V·d matrix.
    untied, tied = (ours, count_from_hf_config(config)) if tied_as_written else (count_from_hf_config(config), ours)
    assert untied.total - tied.total == untied.vocab * untied.width == untied.lm_head
    assert tied.lm_head == 0


def test_flags_the_families_ignore_change_nothing(hf_count) -> None:
    """Mistral, Qwen2 and Mixtral hard-code their biases: an attention_bias/mlp_bias key is not read."""
    for name in ("tiny-mistral.json", "tiny-qwen2-untied.json", "tiny-mixtral-tied.json"):
        config = {**fixture(name), "attention_bias": True, "mlp_bias": True}
        assert count_from_hf_config(config).total == count_from_hf_config(fixture(name)).total == hf_count(config)


def test_gpt2_cross_attention_matches_transformers(hf_count) -> None:
    config = {**fixture("tiny-gpt2-untied.json"), "add_cross_attention": True}
    plain = count_from_hf_config(fixture("tiny-gpt2-untied.json"))
    ours = count_from_hf_config(config)
    assert ours.total == hf_count(config)
    d = plain.width
    # c_attn d -> 2d, q_attn d -> d, c_proj d -> d, all with biases; one LayerNorm.
    assert ours.per_layer - plain.per_layer == (2 * d * d + 2 * d) + 2 * (d * d + d) + 2 * d


def test_missing_keys_take_the_config_class_defaults(hf_count) -> None:
    """A config.json that names only the family is counted as transformers would build it."""
    for model_type in ("gpt2", "qwen2"):
        # Small by default (GPT-2 124M); Qwen2's defaults are a 7.7B model with
        # 32 KV heads, only built on the meta device.
        config = {"model_type": model_type}
        assert count_from_hf_config(config).total == hf_count(config)
    tiny_llama_without_kv = {
        "model_type": "llama",
        "hidden_size": 32,
        "intermediate_size": 40,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "vocab_size": 50,
        "bos_token_id": 0,
        "eos_token_id": 0,
    }
    assert count_from_hf_config(tiny_llama_without_kv).total == hf_count(tiny_llama_without_kv)
    assert count_from_hf_config(tiny_llama_without_kv).kv_heads == 4


# Random tiny configurations of every family, against transformers.
_HEAD_WIDTHS = st.sampled_from([2, 4, 6, 8])


@st.composite
def tiny_configs(draw: st.DrawFn) -> dict[str, Any]:
    model_type = draw(st.sampled_from(SUPPORTED_MODEL_TYPES))
    heads = draw(st.integers(1, 4))
    head_width = draw(_HEAD_WIDTHS)
    width = heads * head_width
    layers = draw(st.integers(1, 2))
    vocab = draw(st.integers(8, 64))
    tie = draw(st.booleans())
    common = {"model_type": model_type, "vocab_size": vocab, "tie_word_embeddings": tie, "bos_token_id": 0, "eos_token_id": 0}
    if model_type == "gpt2":
        return {
            **common,
            "n_embd": width,
            "n_head": heads,
            "n_layer": layers,
            "n_positions": draw(st.integers(1, 32)),
            "n_inner": draw(st.one_of(st.none(), st.integers(1, 40))),
            "add_cross_attention": draw(st.booleans()),
        }
    config = {
        **common,
        "hidden_size": width,
        "intermediate_size": draw(st.integers(1, 40)),
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
    }
    if model_type == "gpt_neox":
        config["attention_bias"] = draw(st.booleans())
        config["use_parallel_residual"] = draw(st.booleans())
        return config
    divisors = [n for n in range(1, heads + 1) if heads % n == 0]
    config["num_key_value_heads"] = draw(st.sampled_from(divisors))
    if draw(st.booleans()):
        config["head_dim"] = draw(_HEAD_WIDTHS)
    if model_type == "llama":
        config["attention_bias"] = draw(st.booleans())
        config["mlp_bias"] = draw(st.booleans())
    if model_type == "mixtral":
        experts = draw(st.integers(1, 4))
        config["num_local_experts"] = experts
        config["num_experts_per_tok"] = draw(st.integers(1, experts))
    return config


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=tiny_configs())
def test_random_tiny_configs_match_transformers(config: dict[str, Any], hf_count) -> None:
    assert count_from_hf_config(config).total == hf_count(config)


# --------------------------------------------------------------------------- #
# By hand, from the formulas written out here.
# --------------------------------------------------------------------------- #


def test_standard_block_is_twelve_d_squared() -> None:
    L, d, V = 32, 4096, 128000
    tied = count_from_shape(layers=L, width=d, vocab=V)
    assert tied.family == "standard"
    assert tied.per_layer == 12 * d**2  # attention 4 d^2 + FFN 8 d^2
    assert tied.total == 12 * L * d**2 + V * d == 6_442_450_944 + 524_288_000
    assert tied.embedding == V * d and tied.lm_head == 0 and tied.active == tied.total
    untied = count_from_shape(layers=L, width=d, vocab=V, tied=False)
    assert untied.total == 12 * L * d**2 + 2 * V * d
    assert untied.lm_head == V * d


def test_standard_block_with_explicit_ffn_and_gqa() -> None:
    L, d, V, f, h, g = 2, 64, 100, 200, 8, 2
    k = d // h
    count = count_from_shape(L, d, V, ffn_width=f, heads=h, kv_heads=g)
    # q and o: d·(h k) each; k and v: d·(g k) each; FFN: 2 d f; no biases or norms.
    assert count.per_layer == 2 * d * h * k + 2 * d * g * k + 2 * d * f
    assert count.total == L * count.per_layer + V * d
    # ffn_width 4d and no GQA give back the 12 d^2 approximation.
    assert count_from_shape(L, d, V, ffn_width=4 * d, heads=h, kv_heads=h).per_layer == 12 * d**2


def test_llama_2_7b_by_hand() -> None:
    L, d, V, f = 32, 4096, 32000, 11008
    attention = 4 * d * d  # q, k, v, o (32 heads of 128, no GQA, no biases)
    mlp = 3 * d * f  # gate, up, down
    norms = 2 * d  # two RMSNorm weights
    expected = L * (attention + mlp + norms) + V * d + d + V * d  # + final norm + untied lm_head
    assert expected == 6_738_415_616
    from_config = count_from_hf_config(fixture("llama-2-7b.json"))
    assert from_config.total == from_config.active == expected
    assert from_config.per_layer == attention + mlp + norms
    assert from_config.embedding == from_config.lm_head == V * d
    assert (from_config.heads, from_config.kv_heads, from_config.head_dim) == (32, 32, 128)
    assert not from_config.tied
    from_shape = count_from_shape(L, d, V, ffn_width=f, heads=32, family="llama", tied=False)
    assert from_shape.total == expected


def test_llm_analysis_miss_on_llama_2_7b() -> None:
    """What llm-analysis prints for Llama-2-7B, and where the 2.4 % goes (docs/parameter-counts.md).

    llm-analysis (cli99/llm-analysis, model_configs/NousResearch_Llama-2-7b-hf.json)
    counts attention 4 d^2, an MLP of two matrices of width ffn_embed_dim = 16384
    (= 4 d, not the 3 matrices of width 11008 Llama has), 2 d of norms per layer,
    one final norm, and a single, shared embedding.
    """
    L, d, V = 32, 4096, 32000
    llm_analysis = L * (4 * d * d + 2 * d * 16384 + 2 * d) + d + V * d
    assert llm_analysis == 6_573_789_184
    exact = count_from_hf_config(fixture("llama-2-7b.json")).total
    missing_head = V * d
    mlp_shortfall = L * (3 * d * 11008 - 2 * d * 16384)
    assert exact - llm_analysis == missing_head + mlp_shortfall == 164_626_432
    assert round((exact - llm_analysis) / exact, 3) == 0.024


def test_mixtral_active_by_hand() -> None:
    count = count_from_hf_config(fixture("mixtral-8x7b.json"))
    L, d, V, f, n, k = 32, 4096, 32000, 14336, 8, 2
    kv_width = 8 * 128
    expert = 3 * d * f
    shared = L * (2 * d * d + 2 * d * kv_width + d * n + 2 * d) + V * d + d + V * d
    assert count.total == shared + L * n * expert == 46_702_792_704
    assert count.active == shared + L * n * expert * k // n == 12_879_925_248
    assert count.per_layer == 2 * d * d + 2 * d * kv_width + d * n + 2 * d + n * expert
    assert (count.experts, count.experts_per_token) == (n, k)
    assert count_from_shape(L, d, V, f, 32, 8, family="mixtral", tied=False, experts=n, experts_per_token=k) == count


def test_qwen2_biases_and_tied_head_by_hand() -> None:
    count = count_from_hf_config(fixture("qwen2-0.5b.json"))
    L, d, V, f, h, g, k = 24, 896, 151936, 4864, 14, 2, 64
    attention = (d * h * k + h * k) + 2 * (d * g * k + g * k) + h * k * d  # q/k/v biases, none on o
    per_layer = attention + 3 * d * f + 2 * d
    assert count.per_layer == per_layer
    assert count.total == L * per_layer + V * d + d == 494_032_768
    assert count.tied and count.lm_head == 0


def test_gpt2_by_hand() -> None:
    count = count_from_hf_config(fixture("gpt2.json"))
    L, d, V, P = 12, 768, 50257, 1024
    block = (2 * d) + (d * 3 * d + 3 * d) + (d * d + d) + (2 * d) + (d * 4 * d + 4 * d) + (4 * d * d + d)
    assert count.per_layer == block
    assert count.embedding == V * d + P * d  # learned positions
    assert count.total == count.embedding + L * block + 2 * d == 124_439_808
    assert count.tied and count.lm_head == 0
    assert count_from_shape(L, d, V, heads=12, family="gpt2") == count


def test_gpt_neox_by_hand() -> None:
    count = count_from_hf_config(fixture("pythia-160m.json"))
    L, d, V, f = 12, 768, 50304, 3072
    block = 2 * (2 * d) + (d * 3 * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d)
    assert count.total == V * d + L * block + 2 * d + V * d == 162_322_944
    assert not count.tied
    no_bias = count_from_hf_config({**fixture("pythia-160m.json"), "attention_bias": False})
    assert count.per_layer - no_bias.per_layer == 3 * d + d  # qkv and dense biases
    parallel_or_not = count_from_hf_config({**fixture("pythia-160m.json"), "use_parallel_residual": False})
    assert parallel_or_not == count


@pytest.mark.parametrize("name", REAL_FIXTURES)
def test_shape_and_config_agree(name: str) -> None:
    from_config = count_from_hf_config(fixture(name))
    kwargs: dict[str, Any] = {}
    if from_config.family == "gpt2":
        kwargs["positions"] = fixture(name)["n_positions"]
    from_shape = count_from_shape(
        from_config.layers,
        from_config.width,
        from_config.vocab,
        from_config.ffn_width,
        from_config.heads,
        from_config.kv_heads,
        family=from_config.family,
        tied=from_config.tied,
        experts=from_config.experts,
        experts_per_token=from_config.experts_per_token,
        **kwargs,
    )
    assert from_shape == from_config


def test_llama_flags_and_head_dim_by_hand() -> None:
    count = count_from_hf_config(fixture("tiny-llama-biases.json"))
    L, d, V, f, h, g, k = 3, 64, 301, 176, 4, 2, 24
    attention = (d * h * k + h * k) + 2 * (d * g * k + g * k) + (h * k * d + d)
    mlp = 2 * (d * f + f) + (f * d + d)
    assert count.per_layer == attention + mlp + 2 * d
    assert count.total == L * count.per_layer + V * d + d  # tied
    assert count.head_dim == k


def test_shape_without_vocabulary_counts_the_blocks_alone() -> None:
    L, d = 4, 256
    count = count_from_shape(L, d, 0, tied=False)
    assert count.total == 12 * L * d**2
    assert count.embedding == count.lm_head == 0


def test_param_count_is_frozen() -> None:
    count = count_from_shape(2, 8, 10)
    with pytest.raises(FrozenInstanceError):
        count.total = 0  # type: ignore[misc]
    assert isinstance(count, ParamCount)


# --------------------------------------------------------------------------- #
# Bad input: UserError naming the key or the file.
# --------------------------------------------------------------------------- #


def test_unsupported_model_type_lists_the_supported_ones() -> None:
    with pytest.raises(UserError) as caught:
        count_from_hf_config({"model_type": "bert", "hidden_size": 768})  # an encoder, not a decoder-only model
    assert caught.value.where == "model_type"
    assert "'bert'" in caught.value.expected
    for model_type in SUPPORTED_MODEL_TYPES:
        assert model_type in caught.value.expected
    with pytest.raises(UserError, match="model_type"):
        count_from_hf_config({"hidden_size": 768})


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"model_type": "llama", "hidden_size": "4096"}, "hidden_size"),
        ({"model_type": "llama", "num_hidden_layers": 0}, "num_hidden_layers"),
        ({"model_type": "llama", "num_hidden_layers": True}, "num_hidden_layers"),
        ({"model_type": "llama", "num_key_value_heads": 5}, "num_key_value_heads"),
        ({"model_type": "llama", "num_attention_heads": 3}, "num_attention_heads"),
        ({"model_type": "llama", "tie_word_embeddings": "yes"}, "tie_word_embeddings"),
        ({"model_type": "mixtral", "num_experts_per_tok": 9}, "num_experts_per_tok"),
        ({"model_type": "mixtral", "num_experts": 0}, "num_experts"),
        ({"model_type": "gpt2", "hidden_size": -1}, "hidden_size"),
        ({"model_type": "gpt2", "n_positions": 1.5}, "n_positions"),
        ({"model_type": "gpt_neox", "intermediate_size": None}, "intermediate_size"),
    ],
)
def test_bad_config_values_name_the_key(config: dict[str, Any], key: str) -> None:
    with pytest.raises(UserError) as caught:
        count_from_hf_config(config)
    assert caught.value.where == key


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"family": "bert"}, "family"),
        ({"family": "llama"}, "ffn_width"),  # gated MLPs need a width
        ({"kv_heads": 2}, "heads"),
        ({"heads": 4, "kv_heads": 3}, "kv_heads"),
        ({"family": "gpt2", "heads": 4, "kv_heads": 2}, "kv_heads"),
        ({"family": "mistral", "ffn_width": 8, "attention_bias": True}, "attention_bias"),
        ({"family": "llama", "ffn_width": 8, "experts": 2}, "experts"),
        ({"experts": 2, "experts_per_token": 3}, "experts_per_token"),
        ({"family": "llama", "ffn_width": 8, "positions": 10}, "positions"),
        ({"width": 0}, "width"),
        ({"vocab": -1}, "vocab"),
    ],
)
def test_bad_shapes_name_the_argument(kwargs: dict[str, Any], key: str) -> None:
    shape: dict[str, Any] = {"layers": 2, "width": 16, "vocab": 10, **kwargs}
    with pytest.raises(UserError) as caught:
        count_from_shape(**shape)
    assert caught.value.where == key


def test_load_hf_config_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(UserError) as caught:
        load_hf_config(missing)
    assert caught.value.where == str(missing)
    broken = tmp_path / "broken.json"
    broken.write_text('{"model_type": "llama",')
    with pytest.raises(UserError, match="valid JSON") as caught:
        load_hf_config(broken)
    assert caught.value.where == str(broken)
    a_list = tmp_path / "list.json"
    a_list.write_text("[1, 2]")
    with pytest.raises(UserError, match="JSON object"):
        load_hf_config(a_list)


def test_load_hf_config_accepts_a_model_folder(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(fixture("gpt2.json")))
    assert load_hf_config(tmp_path) == fixture("gpt2.json")
    assert load_hf_config(str(tmp_path / "config.json")) == fixture("gpt2.json")


# --------------------------------------------------------------------------- #
# The command.
# --------------------------------------------------------------------------- #


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:  # a callback keeps `params` a subcommand, as in cli.py
        """trainplan (test app)."""

    register(app)
    return app


def test_cli_json(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["params", str(FIXTURES / "mixtral-8x7b.json"), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {key: data[key] for key in ("total", "active", "embedding", "lm_head", "per_layer", "family")} == {
        "total": 46_702_792_704,
        "active": 12_879_925_248,
        "embedding": 131_072_000,
        "lm_head": 131_072_000,
        "per_layer": 1_451_270_144,
        "family": "mixtral",
    }


def test_cli_table(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["params", str(FIXTURES / "llama-2-7b.json")])
    assert result.exit_code == 0, result.output
    assert "6,738,415,616" in result.stdout and "6.74 B" in result.stdout
    # each figure in words (the JSON keeps lm_head, per_layer): no raw ids in a table a person reads
    for figure in ("total", "active per token", "token embedding", "output head", "one layer", "llama"):
        assert figure in result.stdout
    assert "lm_head" not in result.stdout and "per_layer" not in result.stdout


def test_cli_bad_input_raises_user_error(app: typer.Typer, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["params", str(FIXTURES / "gpt2.json"), "--format", "xml"])
    assert isinstance(result.exception, UserError) and result.exception.where == "--format"
    result = runner.invoke(app, ["params", str(tmp_path / "missing.json")])
    assert isinstance(result.exception, UserError)
    bert = tmp_path / "bert.json"
    bert.write_text('{"model_type": "bert"}')
    result = runner.invoke(app, ["params", str(bert)])
    assert isinstance(result.exception, UserError)
    assert result.exception.where == f"{bert}: model_type"



# --------------------------------------------------------------------------- #
# Issue 12: eight more families, exact; any other family on the meta device.
# --------------------------------------------------------------------------- #

MORE_CONFIGS = {
    "gemma": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=24, vocab_size=100),
    "gemma2": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=24, vocab_size=100),
    "phi3": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=100, pad_token_id=0, bos_token_id=0, eos_token_id=0),
    "qwen2_moe": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=100, num_experts=4, num_experts_per_tok=2,
                      moe_intermediate_size=32, shared_expert_intermediate_size=48, mlp_only_layers=[1]),
    "falcon": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=100,
                   ffn_hidden_size=160, bos_token_id=0, eos_token_id=0),
    "olmo": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=100, pad_token_id=0, eos_token_id=0),
    "stablelm": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, vocab_size=100, qk_layernorm=True, use_qkv_bias=True),
    "gptj": dict(n_embd=64, n_layer=2, n_head=4, vocab_size=100, rotary_dim=8, bos_token_id=0, eos_token_id=0),
}
VARIANTS = [
    ("falcon", dict(new_decoder_architecture=True, num_kv_heads=2, bias=True)),
    ("falcon", dict(parallel_attn=False, multi_query=False)),
    ("stablelm", dict(use_parallel_residual=True, qk_layernorm=False, tie_word_embeddings=True)),
    ("gemma", dict(attention_bias=True, tie_word_embeddings=False)),
    ("qwen2_moe", dict(decoder_sparse_step=2, qkv_bias=False)),
    ("gptj", dict(n_inner=96)),
]


@pytest.mark.parametrize("family", sorted(MORE_CONFIGS))
def test_more_families_tiny_match_transformers(family: str, hf_count) -> None:
    config = {"model_type": family, **MORE_CONFIGS[family]}
    assert count_from_hf_config(config).total == hf_count(config)


@pytest.mark.parametrize("family,changes", VARIANTS)
def test_more_families_variants_match_transformers(family: str, changes: dict, hf_count) -> None:
    config = {"model_type": family, **MORE_CONFIGS[family], **changes}
    assert count_from_hf_config(config).total == hf_count(config)


@pytest.mark.parametrize("family", sorted(MORE_CONFIGS))
def test_more_families_default_configs_match_transformers(family: str, hf_count) -> None:
    """The configuration class's defaults (full size: Gemma-7B, Phi-3-mini, Qwen1.5-MoE-A2.7B,
    Falcon-7B, OLMo-7B, StableLM-3B, GPT-J-6B shapes), built on the meta device."""
    assert count_from_hf_config({"model_type": family}).total == hf_count({"model_type": family})


def test_other_families_counted_on_the_meta_device(hf_count) -> None:
    config = {"model_type": "phi", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
              "num_attention_heads": 4, "vocab_size": 100}
    count = count_from_hf_config(config)
    assert count.total == hf_count(config)
    assert "meta device" in count.family


def test_other_families_without_transformers_name_the_extra(monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now raises ImportError
    with pytest.raises(UserError) as err:
        count_from_hf_config({"model_type": "phi"})
    assert err.value.where == "model_type" and "trainplan[model]" in err.value.expected


def test_qwen2_moe_active_parameters_by_hand() -> None:
    """Active = everything but the (E - k) experts not routed to, per sparse layer (3 d f_moe each)."""
    config = {"model_type": "qwen2_moe", **MORE_CONFIGS["qwen2_moe"]}
    count = count_from_hf_config(config)
    sparse_layers = 2  # layer 1 is in mlp_only_layers
    assert count.total - count.active == sparse_layers * (4 - 2) * 3 * 64 * 32


def test_config_activation_names_are_transformers_own():
    """The names catalogue/activation_traits.toml [hf_activations] accepts are exactly transformers' ACT2CLS
    (what ACT2FN looks a config's hidden_act up in when the model is built)."""
    activations = pytest.importorskip("transformers.activations")
    from trainplan import catalogue

    assert set(catalogue.table("activation_traits")["hf_activations"]["names"]) == set(activations.ACT2CLS)
