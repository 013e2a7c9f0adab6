"""Fuzz target for the workload loader (issue 8): `python fuzz/fuzz_workload.py -max_total_time=60` or `-runs=N`.

Each input becomes a workload file (raw bytes, or TOML built from the schema's own keys
with hostile values: nan, inf, negatives, zero, huge, wrong units, wrong types, tables)
plus `--set` overrides, loaded with `load_workload` as `trainplan plan` does; a workload
that loads is then planned with `build_report` and rendered to JSON. A crash is any
exception other than trainplan.errors.UserError, or a JSON report with a non-finite number.
Values are deep-copied into each document: the shared table is never mutated (issue 16:
an earlier version put a table of VALUES into a document and then set keys inside it, so
VALUES came to contain itself). The loop, the corpus and crash files are fuzz/_harness.py's.
"""

from __future__ import annotations

import atexit
import copy
import json
import os
import shutil
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import Harness, atheris, chooser  # noqa: E402

import tomli_w  # noqa: E402

if atheris is not None:
    with atheris.instrument_imports():
        from trainplan.errors import UserError
        from trainplan.planning import evaluate as plan
        from trainplan.present import render
        from trainplan import limits
        from trainplan.workload import schema as workload
        from trainplan.workload.load import load_workload
else:
    from trainplan.errors import UserError
    from trainplan.planning import evaluate as plan
    from trainplan.present import render
    from trainplan import limits
    from trainplan.workload import schema as workload
    from trainplan.workload.load import load_workload

warnings.simplefilter("ignore")  # numpy overflow warnings: the CLI hides them; a crash is an exception

# model.hf_config names a file: the loads run inside limits.only_files(()), so any path is refused
# before it is opened (a fuzzed /dev/zero or FIFO cannot hang the loop) and the refusal is checked.
KEYS = workload.leaf_keys() + [
    "cluster.accelerator.peak_flops", "cluster.accelerator.memory", "cluster.accelerator.name",
    "cluster.accelerator.video_decoders", "cluster.accelerator.tdp", "model.bogus", "bogus.key"]
VALUES: list[object] = [0, 1, -1, 2, 3, 7, 14, 224, 300, 2**63 - 1, -(2**63), 0.0, 0.5, 1.5, -0.5, 1e-300, 1e300,
                        float("nan"), float("inf"), float("-inf"), True, False, "", "x", "nan", "inf", "-inf",
                        "1e400", "7B", "93M", "8 Mbit/s", "8 MB", "32 GB", "1.5 GB/s", "200 TFLOPS", "1 h",
                        "25 %", "150 %", "$3", "$1,234.50", "700 W", "h100-sxm", "h200", "cpu-core", "video",
                        "tokens", "decoded", "random", "full", "selective", "sgd", "fp32", "llama", "\x00", "/dev/zero",
                        "\x1b[31m", "yes", 1e15, 1e-320, 5e-324, 1e18, 10**20,
                        [], [1, 2], {}, {"peak_flops": "1 FLOPS", "memory": "1 B"}, {"name": "h100-sxm"}]
# issue 29: integers past float range and past 4,300 digits, subnormals, -0, and a line break that
# would smuggle a second key into a --set
VALUES += [10**400, -(10**400), 2**53 + 1, 2**64, "5e-324", "-0", ["q", "q"], ["q", "v", "q"]]
SET_VALUES = ["0", "-1", "nan", "inf", "1e999", '"8 Mbit/s"', "true", "[1]", "{a=1}", "x y", '"', "", "1.5",
              '"h100-sxm"', "3", "300", "1" * 401, "1" * 5000, "5e-324", "-0", "8\ncluster.count = 3",
              '["q", "q"]', "2e-320"]
# A config.json beside the workload (the only file the fuzzed workload may name): the model keys given
# beside it must agree with it, and its own values pass the numeric boundary.
CONFIG_FIELDS = ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "vocab_size",
                 "intermediate_size", "pad_token_id", "model_type", "num_local_experts", "num_experts_per_tok",
                 "tie_word_embeddings", "head_dim"]
CONFIG_VALUES: list[object] = [0, 1, 2, 4, 8, 1000, 10**13, 10**400, -1, 1.5, None, True, "llama", "mixtral", ["llama"],
                               {"a": 1}, "gemma", "bogus"]
LLAMA = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000}

_DIR = tempfile.mkdtemp(prefix="fuzz_workload.")
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)  # each run's scratch folder, not left in /tmp
_FILE = os.path.join(_DIR, "w.toml")
_CONFIG = os.path.join(_DIR, "c.json")


def _structured(rng) -> tuple[bytes, list[str]]:  # noqa: ANN001 - a random.Random
    doc: dict = {}
    for _ in range(rng.randrange(8)):
        key = rng.choice(KEYS)
        value = copy.deepcopy(rng.choice(VALUES))  # never a shared object: VALUES stays as written
        try:
            workload.set_path(doc, key.split("."), value, key)
        except UserError:
            pass
    sets = [f"{rng.choice(KEYS)}={rng.choice(SET_VALUES)}" for _ in range(rng.randrange(3))]
    if rng.randrange(4) == 0:
        sets.append(rng.choice(["=", "a=1", "a.=1", ".b=1", "data.bitrate", "model..params=1"]))
    if rng.randrange(6) == 0:  # a config.json beside the workload, with hostile fields
        config = dict(LLAMA)
        for _ in range(rng.randrange(3)):
            config[rng.choice(CONFIG_FIELDS)] = copy.deepcopy(rng.choice(CONFIG_VALUES))
        with open(_CONFIG, "w") as fh:
            json.dump(config, fh)
        doc.setdefault("model", {})
        if isinstance(doc["model"], dict):
            doc["model"]["hf_config"] = _CONFIG
            for key in rng.sample(["layers", "width", "heads", "vocab", "family"], rng.randrange(3)):
                doc["model"][key] = rng.choice([2, 256, 4, 1000, 5, "llama", "gpt2"])
    if rng.randrange(10) == 0:  # deep nesting
        sets = []
        depth = rng.choice([10, 40, 1000, 5000])
        return ("a = " + "[" * depth + "]" * depth + "\n").encode(), sets
    try:
        text = tomli_w.dumps(doc)
    except (TypeError, ValueError):
        text = ""
    if rng.randrange(8) == 0:  # an integer tomli_w cannot write: past 4,300 digits, as text
        text += f"\n[training]\ntokens = {'9' * rng.choice([400, 4301, 6000])}\n"
    return text.encode("utf-8"), sets


def one_input(data: bytes) -> None:
    rng = chooser(data)
    # a corpus file that starts with #raw is the workload file itself
    if data.startswith(b"#set"):  # direct: each following line is one --set, the bytes as they are
        body, sets = b"", data.decode("utf-8", "replace").splitlines()[1:]
    else:
        body, sets = (data, []) if data.startswith(b"#raw") or rng.random() >= 0.8 else _structured(rng)
    with open(_FILE, "wb") as fh:
        fh.write(body)
    try:
        with limits.only_files([_FILE, _CONFIG]):
            w = load_workload(_FILE, sets)
            report = plan.build_report(w)
    except UserError as err:
        if "\n" in str(err) or "\x1b" in str(err):
            raise AssertionError(f"a refusal that is not one printable line: {str(err)!r}") from None
        return
    json.loads(render.to_json(report), parse_constant=_refuse)


def _refuse(name: str) -> float:
    raise AssertionError(f"the JSON report holds {name}")


if __name__ == "__main__":
    Harness("workload", one_input).main()
