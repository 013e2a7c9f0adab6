"""A fresh batch of hostile inputs for the command line and the web page (issue 16).

    PYTHONPATH=src python fuzz/hostile_batch.py [-j 2] [--second | --third | --fifth | --sixth | --seventh]

--third runs only the batch of issue 29 (the numeric boundary, cross-checks, sizes, --output before the
work, cross-site web requests); --second only that of the second round; --fifth only the command-line cases
of the fifth (keys given twice, neighbours, config activations, scaling-law runs, empty items); --sixth
only those of the sixth (a value twice in a list, blank names, other scripts' digits, a context too long,
a sequence past a learned position table); --seventh only those of the seventh (counts naming another noun,
derived heads, options given twice or unread beside another, a calibration unit, a neighbour far off).

Each CLI case runs `python -m trainplan ...` in a fresh temporary folder, as a user would. It
is correct when: exit status 2, stdout empty, exactly one stderr line `trainplan: ...` that
holds the expected key, no traceback, no "internal error", no new file left in the folder
and every file that was there unchanged. Each web case is one request to the app of
`trainplan ui` (fastapi's TestClient); it is correct when the status is the expected 4xx (403
for a foreign Host), the answer is JSON with a detail (and the key where one is named),
the security headers are present, and no file content leaks. Prints every failure and the
counts: tried, correct.

These inputs were written after the fixes and their tests, as a check on classes of bad
input the tests did not list one by one.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECRET = "SECRET-7d1c0e"
LLAMA = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000}


@dataclass
class Case:
    args: list[str]
    key: str  # a substring the one stderr line must hold
    files: dict[str, str | bytes] = field(default_factory=dict)
    special: str = ""  # "fifo:NAME", "socket:NAME", "dir:NAME"


def W(toml: str, key: str, **files: str | bytes) -> Case:
    """plan on a workload file w.toml."""
    return Case(["plan", "w.toml", "--output", "out.json"], key, {"w.toml": toml, **files})


def S(key: str, *sets: str) -> Case:
    return Case(["plan", *[x for s in sets for x in ("--set", s)], "--output", "out.json"], key)


CFG = '[model]\nhf_config = "cfg.json"\n'
CAL = "--calibration"

CASES: list[Case] = [
    # ---- workload files: values
    W('[model]\nparams = "1e16"\n', "model.params"),
    W("[model]\nparams = 1e15\n", "model.params"),
    W("[training]\ntokens = -0.0\n", "training.tokens"),
    W("[training]\nmicro_batch = 1e7\n", "training.micro_batch"),
    W("[training]\nzero = 2.5\n", "training.zero"),
    W("[training]\nzero = true\n", "training.zero"),
    W("[training]\nepochs = 1e-9\n", "training.epochs"),
    W('[training]\nprecision = "fp8"\n', "training.precision"),
    W("[training]\noptimizer = 3\n", "training.optimizer"),
    W("[training]\nsaved_tensors_per_layer = 0\n", "training.saved_tensors_per_layer"),
    W("[training]\nselective_keep = 0\n", "training.selective_keep"),
    W('[training]\ntokens = "1e18"\n', "training.tokens"),
    W("[cluster]\naccelerator = 5\n", "cluster.accelerator"),
    W("[cluster]\naccelerator = []\n", "cluster.accelerator"),
    W('[cluster]\naccelerator = { name = "h100-sxm", memory = "1 kB" }\n', "cluster.accelerator.memory"),
    W("[cluster]\naccelerator = { name = 7 }\n", "cluster.accelerator"),
    W('[cluster]\naccelerator = { peak_flops = "1e25 FLOPS", memory = "80 GB" }\n', "cluster.accelerator.peak_flops"),
    W('[cluster]\naccelerator = { peak_flops = "100 TFLOPS" }\n', "cluster.accelerator.memory"),
    W('[cluster]\naccelerator = { peak_flops = "100 TFLOPS", memory = "80 GB", video_decoders = 1e6 }\n',
      "cluster.accelerator.video_decoders"),
    W('[cluster]\naccelerator = { peak_flops = "100 TFLOPS", memory = "80 GB", tdp = "-5 W" }\n',
      "cluster.accelerator.tdp"),
    W('[cluster]\naccelerator = { peak_flops = true, memory = "80 GB" }\n', "cluster.accelerator.peak_flops"),
    W('[cluster]\naccelerator = { peak_flops = "nan TFLOPS", memory = "80 GB" }\n', "cluster.accelerator.peak_flops"),
    W('[cluster]\naccelerator = { peak_flops = "100 TFLOPS", memory = [1] }\n', "cluster.accelerator.memory"),
    W('[cluster]\nmfu = "40"\n', "cluster.mfu"),
    # (headroom = 11 is now read as a multiplier, 11x: docs/workload.md; a negative share stays refused)
    W('[cluster]\nheadroom = "-5 %"\n', "cluster.headroom"),
    W('[cluster]\nprefetch = "no"\n', "cluster.prefetch"),
    W("[cluster]\nmfu_end_to_end = 0\n", "cluster.mfu_end_to_end"),
    W("[cluster]\ncount = 1.5\n", "cluster.count"),
    W('[cluster]\ncount = "1e8"\n', "cluster.count"),
    W("[cluster]\ninterconnect = 0\n", "cluster.interconnect"),
    W('[cluster]\nhost_to_device = "25 GB"\n', "cluster.host_to_device"),
    W('[cluster]\nruntime_buffers = "1 EB"\n', "cluster.runtime_buffers"),
    W("[cluster]\ncores = 1e7\n", "cluster.cores"),
    # ("8 cores" is now a count with its unit: docs/workload.md)
    W('[cluster]\ncores = "8 apples"\n', "cluster.cores"),
    W('[cluster]\ncore_fps_1080p = "120 fps/s"\n', "cluster.core_fps_1080p"),
    W('[data]\nkind = "audio"\n', "data.kind"),
    W("[data]\ncameras = 0\n", "data.cameras"),
    W("[data]\nwidth = 1e6\n", "data.width"),
    W("[data]\nheight = -1080\n", "data.height"),
    W('[data]\nfps = "1e9 Hz"\n', "data.fps"),
    W("[data]\ngop = 0\n", "data.gop"),
    W('[data]\naccess = "sequentiall"\n', "data.access"),
    W("[data]\nbuffer = 0\n", "data.buffer"),
    W("[data]\nbytes_per_token = 0\n", "data.bytes_per_token"),
    W("[data]\nhours = 1e11\n", "data.hours"),
    W('[data]\ntokenize_online = "true"\n', "data.tokenize_online"),
    W("[data]\npatch = 0\n", "data.patch"),
    W('[data]\nbitrate = "8 Mbit/s/s"\n', "data.bitrate"),
    W("[storage]\ncheckpoints_kept = -1\n", "storage.checkpoints_kept"),
    W('[storage]\nsave_every = "0 s"\n', "storage.save_every"),
    W("[storage]\ncopies = 1e5\n", "storage.copies"),
    W('[storage]\nwrite_rate = "1 B/s"\n', "storage.write_rate"),
    W("[prices]\nattempts = 0.5\n", "prices.attempts"),
    W('[prices]\ncore_hour = "$-1"\n', "prices.core_hour"),
    W("[prices]\ndata_hour = 1e10\n", "prices.data_hour"),
    W("[energy]\npue = 0.5\n", "energy.pue"),
    W("[energy]\npue = 11\n", "energy.pue"),
    W('[energy]\nregion = "mars"\n', "energy.region"),
    W("[energy]\nwatts = 0\n", "energy.watts"),
    W('[energy]\ngrid_intensity = "50 kg/kWh"\n', "energy.grid_intensity"),
    W('[serving]\ndtype = "int3"\n', "serving.dtype"),
    W("[serving]\nbatch = 0\n", "serving.batch"),
    W("[serving]\ncontext = 1e10\n", "serving.context"),
    W("[serving]\ntraining_cost = -1\n", "serving.training_cost"),
    W('[[sources]]\nname = "a"\nprice_hour = -1\n', "sources.0.price_hour"),
    W("[[sources]]\nprice_hour = 1\n", "sources.0.name"),
    W('[[sources]]\nname = "a"\nformat = "mp3"\n', "sources.0.format"),
    W('sources = "x"\n', "sources"),
    W('[[sources]]\nname = "a"\nexchange_rate = 0\n', "sources.0.exchange_rate"),
    W('[[sources]]\nname = "a"\nfps = 1e6\n', "sources.0.fps"),
    W("model = 3\n", "model"),
    W("[model.params]\nx = 1\n", "model.params"),
    W('[model]\nlayers = 12\nwidth = 768\nheads = 7\nfamily = "llama"\n', "model.heads"),
    W('[model]\nfamily = "bert"\n', "model.family"),
    W('[model]\ntied = "yes"\n', "model.tied"),
    W("[model]\nexperts = 0\n", "model.experts"),
    # ---- workload files: the file itself
    # (a leading byte-order mark is dropped, as docs/workload.md says: the document after it is checked)
    W("\ufeff[model]\nparams = 1e15\n", "model.params"),
    W("[model]\nparams = 1e9\x00\n", "w.toml"),
    W("[" + ".".join(["k"] * 300) + "]\nx = 1\n", "w.toml"),
    W("a = " + "{b = " * 100 + "1" + "}" * 100 + "\n", "w.toml"),
    W("a = " + "[" * 100000 + "]" * 100000 + "\n", "w.toml"),
    W("x = 1\n" * 200_000, "w.toml"),
    W("[model]\nparams = 1e9\n[model]\nlayers = 2\n", "w.toml"),
    # ---- issue 29, stop 38: keys against their neighbours, counts that name another thing, floats past range
    S("training.sharding", "training.zero=3", "training.sharding=zero1", "cluster.count=4"),
    S("cluster.hfu", "cluster.mfu=0.6", "cluster.hfu=0.2"),
    S("training.state_recipe", "training.precision=fp16", "training.state_recipe=pure_bf16"),
    S("training.state_recipe", "training.optimizer=adamw", "training.state_recipe=sgd_momentum"),
    S("parallel.flash_attention", "training.attention=flash", "parallel.flash_attention=false"),
    S("cluster.cores", 'cluster.cores="4 layers"'),
    S("model.params", 'model.params="70B requests"'),
    W("[cluster]\ncores = 1e999\n", "float range"),
    W('[data]\nkind = "tokens"\n[training]\ntokens = 100\n[model]\nparams = "1B"\n', "training.tokens"),
    W('[measured]\n"model.layerz" = "x"\n', "measured.model.layerz"),
    W('[data]\nfps = 30\n[measured]\n"data.fps" = "x"\n[measured_interval]\n"data.fps" = [40, 50]\n',
      "measured_interval.data.fps"),
    W("[[sources]]\nname = 'x'\n[[sources]]\nname = 'x'\n", "sources[1].name"),
    W(CFG + 'mlp = "gelu"\n', "model.mlp", **{"cfg.json": json.dumps({**LLAMA, "hidden_act": "silu"})}),
    W(CFG, "twice", **{"cfg.json": json.dumps(LLAMA)[:-1] + ', "vocab_size": 2000}'}),
    # ---- config.json named by the workload
    W('[model]\nhf_config = 3\n', "model.hf_config"),
    W('[model]\nhf_config = ""\n', "model.hf_config"),
    W('[model]\nhf_config = "/"\n', "config.json"),
    W('[model]\nhf_config = "/etc/passwd"\n', "/etc/passwd"),
    W('[model]\nhf_config = "/proc/self/mem"\n', "/proc/self/mem"),
    W(CFG, "cfg.json", **{"cfg.json": "[1, 2]"}),
    W(CFG, "hidden_size", **{"cfg.json": json.dumps({**LLAMA, "hidden_size": -5})}),
    W(CFG, "cfg.json", **{"cfg.json": '{"model_type": "llama", "hidden_size": NaN}'}),
    W(CFG, "cfg.json", **{"cfg.json": json.dumps({**LLAMA, "pad": "x" * (5 * 2**20)})}),
    W(CFG, "hidden_size", **{"cfg.json": json.dumps({**LLAMA, "hidden_size": 1e30})}),
    W(CFG, "hidden_size", **{"cfg.json": json.dumps({**LLAMA, "hidden_size": "abc"})}),
    W(CFG, "model_type", **{"cfg.json": json.dumps({**LLAMA, "model_type": 5})}),
    W(CFG, "cfg.json", **{"cfg.json": "[" * 10000 + "]" * 10000}),
    W(CFG, "cfg.json", **{"cfg.json": b"\xff\xfe{}"}),
    W(CFG, "hidden_size", **{"cfg.json": json.dumps({**LLAMA, "hidden_size": True})}),
    # ---- --set
    S("model.params", "model.params="),
    S("--set", "=3"),
    S("model.params", "model.params==3"),
    S("model.params", "model.params=[1,2]"),
    S("model.params", "model.params={a=1}"),
    S("model.params", "model.params=1e15"),
    S("cluster.accelerator.bogus", "cluster.accelerator.bogus=1"),
    S("cluster.accelerator", "cluster.accelerator.name=tpu"),
    S("cluster.accelerator.memory", "cluster.accelerator.memory=-1"),
    S("data", "data=3"),
    S("data.kind", "data.kind.x=1"),
    S("/dev/zero", "model.hf_config=/dev/zero"),
    S("cluster.cores", "cluster.cores=1_0e400"),
    S("energy.region", 'energy.region="\x1b[2J\x1b]0;t\x07"'),
    S("training.zero", "training.zero=-1"),
    S("cluster.nvdec", "cluster.nvdec=on"),
    S("data.fps", "data.fps=-inf"),
    S("model.params", "model.params=nan"),
    # ---- calibration files
    Case(["plan", CAL, "/dev/null"], "/dev/null"),
    Case(["plan", CAL, "d"], "d", special="dir:d"),
    Case(["plan", CAL, "c.toml"], "c.toml", {"c.toml": "format = 1\n" + "# pad\n" * 800_000}),
    Case(["plan", CAL, "c.toml"], "c.toml", {"c.toml": "format = 1\nx = " + "[" * 3000 + "]" * 3000 + "\n"}),
    Case(["plan", CAL, "c.toml"], "cluster.link",
         {"c.toml": 'format = 1\nvalues = [{key = "cluster.link", value = 1e14}]\n'}),
    Case(["plan", CAL, "c.toml"], "cluster.mfu", {"c.toml": 'format = 1\n[[values]]\nkey = "cluster.mfu"\nvalue = 1.5\n'}),
    Case(["plan", CAL, "c.toml"], "cluster.link", {"c.toml": 'format = 1\n[[values]]\nkey = "cluster.link"\nvalue = nan\n'}),
    Case(["plan", CAL, "c.toml"], "cluster.link", {"c.toml": 'format = 1\n[[values]]\nkey = "cluster.link"\nvalue = inf\n'}),
    Case(["plan", CAL, "c.toml"], "c.toml", {"c.toml": 'format = 1.0\n'}),
    Case(["plan", CAL, "c.toml"], "c.toml", {"c.toml": 'format = "1"\n'}),
    Case(["plan", CAL, "c.toml"], "c.toml", {"c.toml": 'format = 1\nupdated = [1]\n'}),
    Case(["plan", CAL, "c.toml"], "cluster.core_fps_1080p",
         {"c.toml": 'format = 1\n[[values]]\nkey = "cluster.core_fps_1080p"\nvalue = "fast"\n'}),
    # ---- output paths
    Case(["plan", "--format", "xml"], "--format"),
    Case(["plan", "--output", "/dev/full"], "--output"),
    Case(["plan", "--output", "d/"], "--output", special="dir:d"),
    Case(["plan", "--output", "d/none/x.json"], "--output", special="dir:d"),
    Case(["plan", "--simulate", "--frames", "10"], "--frames"),
    Case(["plan", "--output", "p"], "--output", special="fifo:p"),
    Case(["plan", "--output", "s"], "--output", special="socket:s"),
    Case(["plan", "w.toml", "--output", "./w.toml"], "--output", {"w.toml": "[cluster]\ncores = 4\n"}),
    Case(["plan", "--output", "x" * 5000], "--output"),
    # validate without a file checks the built-in default (issue 28), so the bare command is not hostile
    Case(["validate", "--format", "xml"], "--format"),
    Case(["validate", "--set", "cluster.cores=-1"], "cluster.cores"),
    Case(["validate", "/dev/zero"], "/dev/zero"),
    # ---- a draw by shard needs a sample and a corpus of shards
    Case(["data", "inspect", "d", "--by-shard"], "--by-shard", special="dir:d"),
    Case(["data", "inspect", "d", "--sample", "3", "--by-shard"], "--by-shard", special="dir:d"),
    Case(["data", "inspect", ".", "--sample", "3", "--by-shard"], "--by-shard", {"clip.mp4": b"\x00" * 64}),
    # the two-stage draw's share of each shard's members: above 0, at most 1, a number, with --by-shard
    *[Case(["data", "inspect", "d", "--sample", "3", "--by-shard", "--shard-fraction", v], "--shard-fraction",
           special="dir:d") for v in ("0", "-0.5", "1.0001", "nan", "inf", "1e400")],
    Case(["data", "inspect", "d", "--sample", "3", "--shard-fraction", "0.5"], "--shard-fraction", special="dir:d"),
    Case(["data", "inspect", "d", "--sample", "3", "--by-shard", "--shard-fraction", "half"], "--shard-fraction",
         special="dir:d"),
    Case(["validate", "p"], "p", special="fifo:p"),
    # ---- simulate
    Case(["simulate", "--decode-dist", "weibull"], "--decode-dist"),
    Case(["simulate", "--decode-dist", "lognormal"], "--cv"),
    Case(["simulate", "--empirical", "/dev/zero"], "/dev/zero"),
    Case(["simulate", "--empirical", "e.txt"], "e.txt", {"e.txt": ""}),
    Case(["simulate", "--empirical", "e.txt"], "e.txt", {"e.txt": "0.01\n1e400\n"}),
    Case(["simulate", "--empirical", "e.txt"], "e.txt", {"e.txt": "0.01\n-0.02\n"}),
    Case(["simulate", "--empirical", "e.json"], "e.json", {"e.json": '{"frame_seconds": "abc"}'}),
    Case(["simulate", "--empirical", "e.txt"], "e.txt", {"e.txt": "1e5\n"}),
    Case(["simulate", "--empirical", "e.json"], "e.json", {"e.json": '[0.01, "0.02"]'}),
    Case(["simulate", "--keyframe-cost", "0"], "--keyframe-cost"),
    Case(["simulate", "--keyframe-cost", "nan"], "--keyframe-cost"),
    Case(["simulate", "--keyframe-interval", "0"], "--keyframe-interval"),
    Case(["simulate", "--read-cv", "-1"], "--read-cv"),
    Case(["simulate", "--read-ahead", "-5"], "--read-ahead"),
    Case(["simulate", "--buffers", "0"], "--buffers"),
    Case(["simulate", "--buffers", "a,b"], "--buffers"),
    Case(["simulate", "--buffers", ",".join(str(i) for i in range(1, 101))], "--buffers"),
    Case(["simulate", "--plot", "x.txt"], "--plot"),
    Case(["simulate", "--frames", "2000", "--plot", "d.png"], "--plot", special="dir:d.png"),
    Case(["simulate", "--seed", "1e3"], "--seed"),
    Case(["simulate", "--frames", "abc"], "--frames"),
    Case(["simulate", "--set", 'data.kind="tokens"', "--set", "training.tokens=1e12"], "data.kind"),
    Case(["simulate", "--set", "cluster.cores=0"], "cluster.cores"),
    Case(["simulate", "--read-latency", "-1 ms"], "--read-latency"),
    Case(["simulate", "--read-latency", "fast"], "--read-latency"),
    # ---- solve
    Case(["solve", "cluster.cores", "--for", "pipeline.busy>=abc"], "--for"),
    Case(["solve", "cluster.cores", "--for", ">=0.5"], "--for"),
    Case(["solve", "cluster.cores", "--for", "bogus.figure>=1"], "--for"),
    Case(["solve", "cluster.cores", "--for", "pipeline.busy>=0.5", "--range", "10:1"], "--range"),
    Case(["solve", "cluster.cores", "--for", "pipeline.busy>=0.5", "--range", "a:b"], "--range"),
    Case(["solve", "bogus.key", "--for", "pipeline.busy>=0.5"], "bogus.key"),
    Case(["solve", "model.family", "--for", "pipeline.busy>=0.5"], "model.family"),
    Case(["solve", "cluster.accelerator", "--among", "tpu-v9"], "cluster.accelerator"),
    Case(["solve", "cluster.accelerator", "--price", "=3"], "--price"),
    Case(["solve", "cluster.accelerator", "--price", "h100-sxm=abc"], "--price"),
    Case(["solve", "cluster.accelerator", "--price", "h100-sxm=1e300"], "--price"),
    Case(["solve", "cluster.cores", "--cheapest", "--for", "pipeline.busy>=0.5"], "--cheapest"),
    Case(["solve", "cluster.cores"], "--for"),
    Case(["solve", "cluster.cores", "--for", "pipeline.busy>=0.5", "--format", "xml"], "--format"),
    Case(["solve", "cluster.cores", "--for", "memory.fits>=nan"], "--for"),
    # ---- serve, roofline
    Case(["serve", "--set", "serving.dtype=int2"], "serving.dtype"),
    Case(["serve", "--format", "xml"], "--format"),
    Case(["serve", "--set", "model.params=9.9e14", "--set", "model.layers=100", "--set", "model.width=10000",
          "--set", "cluster.accelerator.memory=1e8"], "cluster.accelerator.memory"),
    Case(["roofline", "--side", "0"], "--side"),
    Case(["roofline", "--side", "99999999999999999999"], "--side"),
    Case(["roofline", "--set", "cluster.accelerator.memory_bandwidth=0"], "cluster.accelerator.memory_bandwidth"),
    # ---- sweep
    Case(["sweep", "--vary", "cluster.cores=1:1e9"], "--vary"),
    Case(["sweep", "--vary", "cluster.cores=a:b"], "cluster.cores"),
    Case(["sweep", "--vary", "bogus=1:2"], "bogus"),
    Case(["sweep", "--vary", "cluster.cores=1:10:0"], "--vary"),
    Case(["sweep", "--vary", "cluster.cores=10:1"], "--vary"),
    Case(["sweep", "--format", "parquet"], "--output"),
    Case(["sweep", "--vary", "cluster.cores=1:4", "--plot", "pipeline.busy", "--output", "x.svg"], "--against"),
    Case(["sweep", "--vary", "cluster.cores=1:4", "--figures", "bogus"], "bogus"),
    Case(["sweep", "--vary", "cluster.cores=1:1e6:x1.0000001"], "--vary"),
    # (first run: 3000 x 3000 = 9e6 points is within sweep's cap of 5e7: a heavy job, not bad input,
    # that ran past this script's 120 s on the shared machine; replaced by a grid beyond the cap:)
    Case(["sweep", "--vary", "cluster.cores=1:10000", "--vary", "data.fps=1:10000"], "--vary"),
    Case(["sweep", "--vary", "cluster.cores=1:4", "--output", "d"], "--output", special="dir:d"),
    # ---- params, scaling, data
    Case(["params", "/dev/zero"], "/dev/zero"),
    Case(["params", "d"], "config.json", special="dir:d"),
    Case(["params", "c.json"], "c.json", {"c.json": "[1]"}),
    Case(["params", "c.json"], "c.json", {"c.json": "{" * 3000 + "}" * 3000}),
    # (first run: '{"model_type": "llama"}' alone was planned, with transformers' LlamaConfig defaults
    # for the missing fields: what transformers would build, so not bad input; replaced by:)
    Case(["params", "c.json"], "num_hidden_layers", {"c.json": json.dumps({**LLAMA, "num_hidden_layers": -2})}),
    Case(["params", "--format", "xml", "c.json"], "--format", {"c.json": json.dumps(LLAMA)}),
    Case(["scaling", "fit", "/dev/zero"], "/dev/zero"),
    Case(["scaling", "fit", "r.csv"], "r.csv", {"r.csv": "params,tokens,loss\n1e8,1e9,nan\n"}),
    Case(["scaling", "fit", "d"], "d", special="dir:d"),
    Case(["scaling", "fit", "r.csv"], "r.csv", {"r.csv": b"\xff\xfe\x00"}),
    Case(["scaling", "optimal", "--budget", "-1"], "--budget"),
    Case(["scaling", "optimal", "--budget", "1e400"], "--budget"),
    Case(["scaling", "optimal", "--budget", "1e21", "--law", "1,2,3"], "--law"),
    Case(["scaling", "loss", "--params", "0", "--tokens", "1T"], "--params"),
    Case(["scaling", "loss", "--params", "7B", "--tokens", "1T", "--law", "1,2,3,nan,0.3"], "--law"),
    Case(["data", "mix", "--tokens", "15T", "--source", "a:b:c"], "--source"),
    Case(["data", "mix", "--tokens", "-1", "--source", "a:1T:1"], "--tokens"),
    Case(["data", "mix", "--tokens", "15T", "--source", "a:1T:-1"], "--source"),
    Case(["data", "demos", "10", "--success", "0"], "--success"),
    Case(["data", "demos", "10", "--success", "nan"], "--success"),
    Case(["data", "demos", "-5"], "N"),
    # ---- ui: refused before serving
    Case(["ui", "--no-browser", "--port", "0"], "--port"),
    Case(["ui", "--no-browser", "--port", "70000"], "--port"),
    Case(["ui", "--no-browser", "/dev/zero"], "/dev/zero"),
    Case(["ui", "--no-browser", "nope.toml"], "nope.toml"),
    Case(["ui", "--no-browser", "w.toml"], "model.params", {"w.toml": "[model]\nparams = -1\n"}),
]


# A second batch, written after the first batch's fixes, again before looking at what it gets.
SECOND: list[Case] = [
    S("cluster.accelerator.bogus", 'cluster.accelerator={peak_flops="1e15 FLOPS", memory="80 GB", bogus=1}'),
    S("model.layers", "model.layers=1e5", "model.width=512"),
    S("model.vocab", "model.vocab=0"),
    S("training.seq_len", "training.seq_len=0.5"),
    S("training.grad_accum", "training.grad_accum=1e300"),
    S("prices.accelerator_hour", 'prices.accelerator_hour="3 EUR"'),
    S("energy.grid_intensity", 'energy.grid_intensity="-1 g/kWh"'),
    S("serving.requests_per_day", "serving.requests_per_day=1e16"),
    S("storage.save_every", 'storage.save_every="1 ns"'),
    S("data.tokenizer_rate", "data.tokenizer_rate=0"),
    S("cluster.accelerator.peak_flops", "cluster.accelerator.peak_flops=1e8"),
    S("cluster.mfu", 'cluster.mfu="150 %"'),
    Case(["plan", CAL, "c.toml"], "cluster.accelerator.peak_flops",
         {"c.toml": 'format = 1\n[[values]]\nkey = "cluster.accelerator.peak_flops"\nvalue = 1e20\n'}),
    Case(["plan", CAL, "c.toml"], "cluster.link",
         {"c.toml": 'format = 1\nvalues = [{key = "cluster.link", value = 1e9, unit = 3}]\n'}),
    Case(["plan", CAL, "c.toml"], "probes.decode", {"c.toml": "format = 1\nprobes = { decode = [] }\n"}),
    Case(["plan", CAL, "z"], "z", special="link:z:/dev/zero"),
    Case(["plan", "w.toml"], "w.toml", special="link:w.toml:p", files={}),
    Case(["plan", "a.toml"], "a.toml", special="loop:a.toml"),
    Case(["plan", "--output", "l/x.json"], "--output", special="loop:l"),
    Case(["plan", "--output", "/proc/self/comm"], "--output"),
    Case(["plan", "--output", "newdir/"], "--output"),
    Case(["simulate", "--empirical", "e.txt"], "e.txt", {"e.txt": "0\n0\n"}),
    Case(["simulate", "--empirical", "e.json"], "e.json", {"e.json": '{"decode_seconds": [1e-320]}'}),
    Case(["simulate", "--cv", "0", "--decode-dist", "lognormal"], "--cv"),
    Case(["simulate", "--decode-dist", "empirical"], "--empirical"),
    Case(["simulate", "--keyframe-cost", "1e5"], "--keyframe-cost"),
    Case(["simulate", "--timeline", "-1"], "--timeline"),
    Case(["simulate", "--frames", "2000", "--plot", "none/x.PNG"], "--plot"),
    Case(["solve", "cluster.cores", "--for", "pipeline.busy>=0.5", "--largest", "--range", "0:1e30"], "--range"),
    Case(["solve", "cluster.count", "--for", "memory.fits", "--largest", "--range", "1:1e20"], "--range"),
    Case(["solve", "data.fps", "--for", "pipeline.busy>=0.5", "--range", "1e-300:1e300"], "--range"),
    Case(["solve", "cluster.accelerator", "--among", ","], "--among"),
    Case(["solve", "cluster.accelerator", "--price", "h100-sxm=nan"], "--price"),
    Case(["sweep", "--vary", "cluster.cores=1,2,nan"], "cluster.cores"),
    Case(["sweep", "--vary", "cluster.cores=1e300,1e301"], "cluster.cores"),
    Case(["sweep", "--vary", "data.kind=video,audio"], "data.kind"),
    Case(["sweep", "--vary", "cluster.nvdec=true,1"], "cluster.nvdec"),
    Case(["sweep", "--vary", "model.params=-1:10"], "model.params"),
    Case(["sweep", "--vary", "cluster.cores=1:3", "--plot", "bogus", "--against", "cluster.cores", "--output",
          "x.svg"], "--plot"),
    Case(["sweep", "--vary", "cluster.cores=1:3", "--plot", "pipeline.busy", "--against", "data.fps", "--output",
          "x.svg"], "--against"),
    Case(["serve", "--set", "serving.context=0"], "serving.context"),
    Case(["serve", "--set", "serving.batch=1e9"], "serving.batch"),
    Case(["roofline", "--set", "cluster.accelerator.peak_flops=1e8"], "cluster.accelerator.peak_flops"),
    Case(["params", "c.json"], "num_attention_heads", {"c.json": json.dumps({**LLAMA, "num_attention_heads": 0})}),
    Case(["params", "c.json"], "vocab_size", {"c.json": json.dumps({**LLAMA, "vocab_size": 1e30})}),
    Case(["params", "c.json"], "hidden_size", {"c.json": json.dumps({**LLAMA, "hidden_size": 256.5})}),
    Case(["params", "c.json"], "c.json", special="link:c.json:/dev/zero"),
    Case(["params", "c.json"], "c.json", {"c.json": json.dumps({**LLAMA, "x": "y" * (6 * 2**20)})}),
    Case(["scaling", "fit", "r.csv"], "r.csv", {"r.csv": "params,tokens,loss\n1e8,-1e9,3.0\n"}),
    Case(["scaling", "fit", "r.csv"], "r.csv", {"r.csv": "params,tokens,loss\n"}),
    Case(["scaling", "optimal", "--budget", "1e21 W"], "--budget"),
    Case(["scaling", "loss", "--params", "7B", "--tokens", "1T", "--law", "a,b,c,d,e"], "--law"),
    Case(["data", "mix", "--tokens", "15T", "--source", ":1T:1"], "--source"),
    Case(["data", "demos", "10", "--task", "-5 s"], "--task"),
    Case(["data", "demos", "10", "--operators", "0"], "--operators"),
    Case(["validate", "w.toml", CAL, "missing.toml"], "missing.toml", {"w.toml": ""}),
    # (first run expected the line to name w.toml; it names the FIFO the workload points to, the culprit)
    Case(["ui", "--no-browser", "w.toml"], "/p:", {"w.toml": '[model]\nhf_config = "p"\n'}, special="fifo:p"),
    Case(["ui", "--no-browser", "w.toml"], "cfg.json", {"w.toml": CFG, "cfg.json": "[1]"}),
]


# ---- issue 29: the numeric boundary, cross-checks, files, sizes, --output before the work
BIG = "1" + "0" * 400  # past float64
HUGE = "9" * 5000  # past Python's 4,300-digit int(str)
MIX = {"model_type": "mixtral", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2,
       "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000, "num_local_experts": 2}
THIRD: list[Case] = [
    W(f"[model]\nparams = {BIG}\n", "model.params"),
    W(f"[model]\nparams = {HUGE}\n", "w.toml"),
    W(f"[cluster]\nmfu = {BIG}\n", "cluster.mfu"),
    W(f"[energy]\npue = {BIG}\n", "energy.pue"),
    W(f"[training]\nzero = {BIG}\n", "training.zero"),
    W(f"[storage]\nsave_every = {BIG}\n", "storage.save_every"),
    W(f'[cluster]\naccelerator = {{ peak_flops = {BIG}, memory = "80 GB" }}\n', "cluster.accelerator.peak_flops"),
    W("[data]\nbitrate = 5e-324\n", "data.bitrate"),
    W('[training]\nmethod = "lora"\nlora_targets = ["q", "v", "q"]\n[model]\nlayers = 2\nwidth = 256\n',
      "training.lora_targets"),
    W(CFG + "layers = 5\n", "model.layers", **{"cfg.json": json.dumps(LLAMA)}),
    W(CFG + "width = 512\n", "model.width", **{"cfg.json": json.dumps(LLAMA)}),
    W(CFG + "heads = 8\n", "model.heads", **{"cfg.json": json.dumps(LLAMA)}),
    W(CFG + "vocab = 32000\n", "model.vocab", **{"cfg.json": json.dumps(LLAMA)}),
    W(CFG + 'family = "qwen2"\n', "model.family", **{"cfg.json": json.dumps(LLAMA)}),
    W(CFG, "vocab", **{"cfg.json": json.dumps({**LLAMA, "vocab_size": 0})}),
    W(CFG, "vocab", **{"cfg.json": json.dumps({**LLAMA, "vocab_size": 10**13})}),
    W(CFG, "model_type", **{"cfg.json": json.dumps({**LLAMA, "model_type": ["llama"]})}),
    W(CFG, "pad_token_id", **{"cfg.json": json.dumps({**LLAMA, "pad_token_id": 1000})}),
    W(CFG, "num_experts_per_tok", **{"cfg.json": json.dumps({**MIX, "num_experts_per_tok": 3})}),
    W(CFG, "hidden_size", **{"cfg.json": json.dumps({**LLAMA, "hidden_size": 10**400})}),
    W(CFG, "cfg.json", **{"cfg.json": json.dumps(LLAMA).replace('"vocab_size": 1000', f'"vocab_size": {HUGE}')}),
    S("cluster.count", f"cluster.count={BIG}"),
    S("model.params", f"model.params={HUGE}"),
    S("cluster.cores", "cluster.cores=8\ncluster.count=3"),
    S("cluster.cores", "cluster.cores=2e-320"),
    Case(["validate", "w.toml"], "model.layers", {"w.toml": f"[model]\nlayers = {BIG}\n"}),
    Case(["layout", "--devices", BIG], "--devices"),
    Case(["serve", "--set", f"serving.context={BIG}"], "serving.context"),
    Case(["data", "demos", BIG], "COUNT"),
    Case(["data", "demos", "100", "--success", "5e-324"], "--success"),
    Case(["scaling", "optimal", "--budget", "5e-324"], "--budget"),
    Case(["scaling", "optimal", "--budget", BIG], "--budget"),
    Case(["scaling", "loss", "--params", "5e-324", "--tokens", "1e9"], "--params"),
    Case(["solve", "cluster.cores", "--for", "pipeline.bottleneck>=1"], "--for"),
    Case(["solve", "cluster.cores", "--for", "pipeline.busy>=nan"], "--for"),
    Case(["sweep", "--vary", "cluster.cores=1,,2"], "cluster.cores"),
    Case(["simulate", "--vary", "seed=-1", "--frames", "2000"], "--vary seed"),
    Case(["simulate", "--vary", f"seed={2**64}", "--frames", "2000"], "--vary seed"),
    Case(["simulate", "--vary", "cv=1000", "--frames", "2000"], "--vary cv"),
    Case(["simulate", "--vary", "read_cv=1000", "--frames", "2000"], "--vary read_cv"),
    Case(["simulate", "--vary", "keyframe_cost=1e9", "--frames", "2000"], "--vary keyframe_cost"),
    Case(["simulate", "--vary", "buffer=1:1000000000", "--frames", "2000"], "--vary buffer"),
    Case(["simulate", "--vary", "seed=0:999999", "--frames", "2000"], "--vary seed"),
    Case(["simulate", "--empirical", "e.txt", "--frames", "2000"], "e.txt", {"e.txt": "0,004\n0,005\n"}),
    Case(["simulate", "--empirical", "e.json", "--frames", "2000"], "e.json", {"e.json": f"[{BIG}]"}),
    Case(["probe", "matmul", "--n", "1048576"], "--n"),
    Case(["probe", "handover", "--side", "100000"], "--side"),
    Case(["probe", "handover", "--batch", "10000000"], "--batch"),
    Case(["probe", "handover", "--seconds", "inf"], "--seconds"),
    Case(["probe", "decode", "--height", "100000"], "--height"),
    Case(["probe", "decode", "--width", "0"], "--width"),
    Case(["probe", "decode", "--fps", "0"], "--fps"),
    Case(["probe", "decode", "--gop", "0"], "--gop"),
    Case(["probe", "decode", "--side", "0"], "--side"),
    Case(["probe", "decode", "--frames", "1000000000"], "--frames"),
    Case(["probe", "decode", "--seconds", "inf"], "--seconds"),
    Case(["probe", "model", "--set", "model_type=llama", "--set", "num_hidden_layers=100000", "--set",
          "hidden_size=4096", "--set", "intermediate_size=11008", "--set", "num_attention_heads=32"], "--set"),
    Case(["probe", "read", ".", "--size", "1 EB"], "--size"),
    Case(["data", "inspect", "e.bin"], "e.bin", {"e.bin": b""}),
    Case(["data", "inspect", "t.txt"], "t.txt", {"t.txt": b"\xff\xfe hello\n"}),
    Case(["data", "inspect", "a.bin", "--output", "a.bin"], "--output", {"a.bin": bytes(range(256)) * 8}),
    Case(["data", "inspect", "a.bin", "--output", "p"], "--output", {"a.bin": bytes(range(256)) * 8},
         special="fifo:p"),
    Case(["data", "inspect", "a.bin", "--output", "d.toml"], "--output", {"a.bin": bytes(range(256)) * 8},
         special="link:d.toml:nowhere"),
    Case(["sweep", "--vary", "cluster.cores=1:2:0.0000001", "--output", "/dev/full"], "--output"),
    Case(["probe", "decode", "--output", "p"], "--output", special="fifo:p"),
    # a named framework is held to what it has (issue 23): the layout's degrees and its ZeRO stages
    S("parallel.pipeline", "parallel.framework=fsdp", "parallel.pipeline=2", "cluster.count=2"),
    S("parallel.context", "parallel.framework=megatron-2021", "parallel.context=2", "cluster.count=2",
      "training.seq_len=16384"),
    S("training.zero", "parallel.framework=deepspeed-zero3", "training.zero=1", "cluster.count=2"),
    W('[parallel]\nframework = "deepspeed"\npipeline = 2\n[training]\nzero = 3\n[cluster]\ncount = 2\n',
      "training.zero"),
]


def _prepare(folder: Path, case: Case) -> None:
    for name, content in case.files.items():
        p = folder / name
        p.write_bytes(content) if isinstance(content, bytes) else p.write_text(content, encoding="utf-8")
    if case.special:
        kind, name = case.special.split(":", 1)
        if kind == "fifo":
            os.mkfifo(folder / name)
        elif kind == "dir":
            (folder / name).mkdir()
        elif kind == "link":
            link, target = name.split(":", 1)
            if target == "p":
                os.mkfifo(folder / "p")
            os.symlink(target, folder / link)
        elif kind == "loop":
            os.symlink(name + ".2", folder / name)
            os.symlink(name, folder / (name + ".2"))
        elif kind == "socket":
            s = socket.socket(socket.AF_UNIX)
            s.bind(str(folder / name))
            s.close()


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for p in folder.rglob("*"):
        rel = str(p.relative_to(folder))
        if p.is_symlink() or not p.is_file():
            out[rel] = "special"
        else:
            out[rel] = p.read_bytes()
    return out


def run_cli(case: Case) -> str | None:
    """None when correct, else why not."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _prepare(folder, case)
        before = _snapshot(folder)
        try:
            res = subprocess.run([sys.executable, "-m", "trainplan", *case.args], cwd=folder, capture_output=True,
                                 text=True, timeout=120, errors="replace")
        except subprocess.TimeoutExpired:
            return "timed out (hung or unbounded)"
        problems = []
        if res.returncode != 2:
            problems.append(f"exit {res.returncode}")
        if res.stdout:
            problems.append(f"stdout {res.stdout[:80]!r}")
        lines = res.stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("trainplan: "):
            problems.append(f"stderr not one line: {res.stderr[-300:]!r}")
        elif case.key not in lines[0]:
            problems.append(f"line does not name {case.key!r}: {lines[0][:200]!r}")
        if "Traceback" in res.stderr or "internal error" in res.stderr:
            problems.append("traceback/internal error")
        if "\x1b" in res.stderr or "\x07" in res.stderr:
            problems.append("escape sequence on stderr")
        if _snapshot(folder) != before:
            problems.append("files changed or left behind")
        return "; ".join(problems) or None


# ---------------------------------------------------------------- web


@dataclass
class WebCase:
    method: str
    path: str
    status: int
    key: str = ""
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)


def web_cases_second() -> list[WebCase]:
    J = {"content-type": "application/json"}
    j = lambda obj: json.dumps(obj).encode()  # noqa: E731
    return [
        WebCase("POST", "/api/plan", 422, "cluster.accelerator", j({"set": {"cluster.accelerator": {"peak_flops": 1}}}), J),
        WebCase("POST", "/api/plan", 422, "cluster.accelerator.peak_flops",
                j({"set": {"cluster.accelerator.peak_flops": "1e-320 FLOPS"}}), J),
        # (first run: a raw ESC inside a TOML string is malformed TOML, so 422 was right; now the TOML escape:)
        WebCase("POST", "/api/plan", 200, "", j({"config": '[[sources]]\nname = "\\u001b[2J"\nhours = 1\n'}), J),
        WebCase("POST", "/api/plan", 422, "cluster.accelerator.memory",
                j({"config": '[cluster]\naccelerator = { peak_flops = "100 TFLOPS", memory = "1 B" }\n'}), J),
        WebCase("POST", "/api/plan", 422, "model.hf_config", j({"set": {"model.hf_config": None}}), J),
        WebCase("POST", "/api/plan", 422, "MODEL", j({"set": {"MODEL.HF_CONFIG": "/etc/passwd"}}), J),
        WebCase("POST", "/api/plan", 422, "model", j({"set": {"model.hf_config\u0000": "x"}}), J),
        WebCase("POST", "/api/plan", 422, "workload", j({"workload": "w.toml"}), J),
        WebCase("POST", "/api/plan", 422, "set2", j({"set": {"cluster.cores": 4}, "set2": 1}), J),
        # (issue 29: a form body is refused before it is read, 415, as a cross-site form would send it)
        WebCase("POST", "/api/plan", 415, "request", b"--x\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--x--",
                {"content-type": "multipart/form-data; boundary=x"}),
        WebCase("GET", "/api/options", 403, "host", headers={"host": "localhost.:8765"}),
        WebCase("GET", "/api/options?" + "q=1&" * 2000, 200),
        WebCase("POST", "/api/plan?path=../../etc/passwd", 200, "", b"{}", J),
        WebCase("OPTIONS", "/api/plan", 405),
        WebCase("GET", "/static/index.html", 200),
        WebCase("POST", "/api/plan", 422, "config", j({"config": "a = " + "{b = " * 40 + "1" + "}" * 40}), J),
        WebCase("POST", "/api/plan", 422, "model.params", j({"config": "\ufeff[model]\nparams = 1e15\n"}), J),
    ]


def web_cases(secret_path: str, fifo: str) -> list[WebCase]:
    J = {"content-type": "application/json"}
    j = lambda obj: json.dumps(obj).encode()  # noqa: E731
    return [
        WebCase("POST", "/api/plan", 422, "model.hf_config", j({"set": {"model.hf_config": secret_path}}), J),
        WebCase("POST", "/api/plan", 422, "model.hf_config", j({"set": {" model.hf_config ": secret_path}}), J),
        WebCase("POST", "/api/plan", 422, "model.hf_config", j({"config": f'model.hf_config = "{secret_path}"'}), J),
        WebCase("POST", "/api/plan", 422, "model.hf_config", j({"config": f'[model]\n"hf_config" = "{fifo}"'}), J),
        WebCase("POST", "/api/plan", 422, "model.hf_config",
                j({"config": "[model]\nparams = 1e9\n", "set": {"model.hf_config": "/dev/zero"}}), J),
        WebCase("POST", "/api/plan", 422, "workload", j({"workload": secret_path}), J),
        WebCase("POST", "/api/plan", 422, "workload", j({"workload": ["a"]}), J),
        WebCase("POST", "/api/plan", 422, "config", j({"config": "x" * (1024 * 1024 + 10)}), J),
        WebCase("POST", "/api/plan", 422, "config", j({"config": {"model": {"params": 1}}}), J),
        WebCase("POST", "/api/plan", 422, "config", j({"config": "a = " + "{b = " * 60 + "1" + "}" * 60}), J),
        WebCase("POST", "/api/plan", 422, "model.params", j({"config": "[model]\nparams = -1\n"}), J),
        WebCase("POST", "/api/plan", 422, "cluster.cores", j({"set": {"cluster.cores": 1e9}}), J),
        WebCase("POST", "/api/plan", 422, "cluster.cores", j({"set": {"cluster.cores": "1e400"}}), J),
        WebCase("POST", "/api/plan", 422, "cluster.nvdec", j({"set": {"cluster.nvdec": "yes"}}), J),
        WebCase("POST", "/api/plan", 422, "cluster.cores", j({"set": {"cluster.cores": [1, 2]}}), J),
        WebCase("POST", "/api/plan", 422, "cluster.cores", j({"set": {"cluster.cores": None}}), J),
        WebCase("POST", "/api/plan", 422, "set", j({"set": {"": 1}}), J),
        WebCase("POST", "/api/plan", 422, "set", j({"set": "cluster.cores=4"}), J),
        WebCase("POST", "/api/plan", 422, "request", b'{"set": {"cluster.cores": 4}', J),
        WebCase("POST", "/api/plan", 422, "request", b'{"set": {"cluster.cores": -Infinity}}', J),
        WebCase("POST", "/api/plan", 422, "request", b"\x00\x01\x02", J),
        WebCase("POST", "/api/plan", 422, "request", b"{" * 50000, J),
        WebCase("POST", "/api/plan", 422, "request", b'{"a": ' * 40 + b"1" + b"}" * 40, J),
        WebCase("POST", "/api/plan", 422, "request", b"true", J),
        WebCase("POST", "/api/plan", 415, "request", b"12", {"content-type": "text/plain"}),  # (issue 29)
        WebCase("POST", "/api/plan", 413, "request", b"{}", {**J, "content-length": "99999999999999999999"}),
        WebCase("POST", "/api/plan", 413, "request", b"{}", {**J, "content-length": "-1"}),
        WebCase("POST", "/api/plan", 413, "request", b" " * (3 * 2**20), J),
        WebCase("GET", "/api/plan", 405),
        WebCase("DELETE", "/api/options", 405),
        WebCase("GET", "/static/app.js?x=" + "a" * 5000, 200),
        WebCase("GET", "/static/%2fetc%2fpasswd", 404),
        WebCase("GET", "/static/..%2f..%2fweb.py", 404),
        WebCase("GET", "/static/app.js%20", 404),
        WebCase("GET", "/static/style.css%00", 404),
        WebCase("GET", "/static/" + "%00" * 3000, 404),
        WebCase("GET", "/static/\u202eexe.css", 404),
        WebCase("GET", "/api/options/../../etc/passwd", 404),
        WebCase("GET", "/\\..\\web.py", 404),
        WebCase("GET", "/", 403, "host", headers={"host": "attacker.example:8765"}),
        WebCase("POST", "/api/plan", 403, "host", b"{}", {**J, "host": "127.0.0.1.nip.io:8765"}),
        WebCase("GET", "/api/options", 403, "host", headers={"host": "127.0.0.1:8765@evil"}),
        WebCase("GET", "/api/options", 403, "host", headers={"host": "localhost:08765"}),
        WebCase("GET", "/api/options", 403, "host", headers={"host": "[::ffff:127.0.0.1]:8765"}),
    ]


def web_cases_third() -> list[WebCase]:
    """Issue 29: cross-site requests, the numeric boundary, one Host."""
    J = {"content-type": "application/json"}
    body = b'{"set": {"cluster.cores": 16}}'
    return [
        WebCase("POST", "/api/plan", 422, "cluster.cores", b'{"set": {"cluster.cores": ' + b"1" * 401 + b"}}", J),
        WebCase("POST", "/api/plan", 422, "request", b'{"set": {"cluster.cores": ' + b"1" * 5000 + b"}}", J),
        WebCase("POST", "/api/plan", 422, "cluster.count", b'{"config": "[cluster]\\ncount = ' + b"1" * 401 + b'"}', J),
        WebCase("POST", "/api/plan", 422, "cluster.cores", b'{"set": {"cluster.cores": 5e-324}}', J),
        WebCase("POST", "/api/plan", 403, "origin", body, {**J, "origin": "http://evil.example"}),
        WebCase("POST", "/api/plan", 403, "origin", body, {**J, "origin": "null"}),
        WebCase("POST", "/api/plan", 403, "origin", body, {**J, "sec-fetch-site": "cross-site"}),
        WebCase("POST", "/api/plan", 415, "request", body, {"content-type": "text/plain;charset=UTF-8"}),
        WebCase("POST", "/api/plan", 415, "request", b"set=1", {"content-type": "application/x-www-form-urlencoded"}),
        WebCase("POST", "/api/plan", 200, "", body, {**J, "origin": "http://127.0.0.1:8765"}),
        # stop 40: one key written twice (a trailing space is the same key), a kernel beside unfused attention
        WebCase("POST", "/api/plan", 422, "model.width",
                b'{"set": {"model.width": 4096, "model.width ": 1024, "model.layers": 2}}', J),
        WebCase("POST", "/api/plan", 422, "parallel.flash_kernel",
                b'{"set": {"parallel.flash_kernel": "flash1", "parallel.flash_attention": false}}', J),
    ]


def run_web(second: bool = False, third: bool = False) -> tuple[int, int, list[str]]:
    from fastapi.testclient import TestClient

    from trainplan.interfaces.web import create_app

    client = TestClient(create_app(8765), base_url="http://127.0.0.1:8765", raise_server_exceptions=False)
    failures, correct = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        secret = Path(tmp) / "config.json"
        secret.write_text(json.dumps({**LLAMA, "note": SECRET}))
        fifo = Path(tmp) / "fifo"
        os.mkfifo(fifo)
        cases = web_cases_third() if third else web_cases_second() if second else web_cases(str(secret), str(fifo))
        for c in cases:
            try:
                res = client.request(c.method, c.path, content=c.body, headers=c.headers)
            except Exception as err:  # noqa: BLE001
                failures.append(f"{c.method} {c.path[:60]} {c.body!r:.80}: raised {type(err).__name__}: {err}")
                continue
            problems = []
            if res.status_code != c.status:
                problems.append(f"status {res.status_code}, expected {c.status}: {res.text[:150]!r}")
            for h in ("content-security-policy", "x-frame-options", "x-content-type-options"):
                if h not in res.headers:
                    problems.append(f"no {h}")
            if SECRET in res.text:
                problems.append("the secret file leaked")
            if "\x1b" in res.text or "\\u001b" in res.text:
                problems.append("an escape sequence in the answer")
            if c.status >= 400 and c.status != 405:
                try:
                    body = res.json()
                    if c.key and c.key not in body.get("key", "") + body.get("detail", ""):
                        problems.append(f"does not name {c.key!r}: {body}")
                except ValueError:
                    problems.append("not JSON")
            if problems:
                failures.append(f"{c.method} {c.path[:60]} {(c.body or b'')[:80]!r}: " + "; ".join(problems))
            else:
                correct += 1
    return len(cases), correct, failures

#: The fifth round (issue 29, stop 40): keys given twice, a kernel generation beside an unfused attention,
#: an activation transformers does not build, runs that cannot pin a scaling law, empty list items and
#: options of --full without it.
SAME_RUN = "params,tokens,loss\n" + "1e9,2e10,2.5\n" * 12
FIFTH: list[Case] = [
    S("model.width", "model.width=1024", "model.layers=2", "model.width=2048"),
    S("parallel.flash_kernel", "parallel.flash_kernel=flash1", "parallel.flash_attention=false"),
    S("parallel.flash_kernel", "training.attention=eager", "parallel.flash_kernel=flash2"),
    W(CFG, "hidden_act", **{"cfg.json": json.dumps({**LLAMA, "hidden_act": "swish42"})}),
    W(CFG, "hidden_act", **{"cfg.json": json.dumps({**LLAMA, "hidden_act": ["silu"]})}),
    Case(["params", "cfg.json"], "activation_function",
         {"cfg.json": json.dumps({"model_type": "gpt2", "n_embd": 256, "n_layer": 2, "n_head": 4,
                                  "vocab_size": 1000, "activation_function": "gelu_newest"})}),
    Case(["scaling", "fit", "runs.csv", "--drop", "0"], "runs.csv", {"runs.csv": SAME_RUN}),
    Case(["scaling", "fit", "runs.csv", "--drop", "0"], "runs.csv",
         {"runs.csv": "params,tokens,loss\n" + "".join(f"1e9,{d}e10,{3 - d / 10}\n" for d in range(1, 8))}),
    Case(["solve", "cluster.accelerator", "--among", "h100-sxm,,a100-sxm-80gb"], "--among"),
    Case(["probe", "collectives", "--ops", "allreduce,"], "--ops"),
    Case(["data", "inspect", "a.bin", "--journal", "j.jsonl"], "--journal", {"a.bin": bytes(range(256)) * 8}),
    Case(["data", "inspect", "a.bin", "--batch", "4"], "--batch", {"a.bin": bytes(range(256)) * 8}),
    Case(["data", "inspect", "a.bin", "--sample", "1", "--seed", "-1"], "--seed", {"a.bin": bytes(range(256)) * 8}),
    # the stop-40 helper's audit: an x264 preset, a replica too small to serve, a count beside a shape, options
    # another one makes meaningless, an argument's own name
    Case(["probe", "decode", "--width", "64", "--height", "64", "--preset", "bogus"], "--preset"),
    Case(["serve", "--set", "model.layers=80", "--set", "model.width=8192", "--set", "model.vocab=32000",
          "--set", "serving.tensor=1"], "serving.tensor"),
    S("model.params", "model.layers=32", "model.width=4096", "model.vocab=32000", "model.params=1e9"),
    Case(["simulate", "--decode-dist", "deterministic", "--cv", "1.5"], "--cv"),
    Case(["simulate", "--keyframe-interval", "5"], "--keyframe-interval"),
    Case(["sweep", "--vary", "cluster.cores=1:2", "--against", "cluster.cores"], "--against"),
    Case(["validate-against", "foo"], "SUITE"),
]

#: The sixth round (issue 29, stop 41): the stop-40 helper's findings left open then: a value twice in a
#: list of rows, a blank source name, digits of other scripts, a context too long beside weights that fit,
#: and a sequence past a learned position table.
GPT2_77 = json.dumps({"model_type": "gpt2", "n_embd": 48, "n_head": 4, "n_layer": 2, "n_inner": 100,
                      "n_positions": 77, "bos_token_id": 0, "eos_token_id": 0, "vocab_size": 211})
SIXTH: list[Case] = [
    Case(["simulate", "--buffers", "4,4,16", "--frames", "2000"], "--buffers"),
    Case(["simulate", "--vary", "seed=0,1,0", "--frames", "2000"], "--vary seed"),
    Case(["sweep", "--vary", "cluster.cores=8,16,8.0"], "cluster.cores"),
    Case(["sweep", "--vary", "cluster.accelerator=h100-sxm,a100-sxm-80gb,h100-sxm"], "cluster.accelerator"),
    W('[[sources]]\nname = ""\n', "sources.0.name"),
    W('[[sources]]\nname = "  "\n', "sources.0.name"),
    S("cluster.count", "cluster.count=\u0663"),
    S("data.hours", "data.hours=\u0661\u0660 h"),
    Case(["layout", "--devices", "\u0663"], "--devices"),
    Case(["simulate", "--frames=\uff11\uff10\uff10\uff10"], "--frames"),
    Case(["serve", str(ROOT / "examples" / "llama3-70b-512gpu.toml"), "--set", "serving.tensor=2", "--set",
          "serving.context=1000000"], "serving.context"),
    Case(["probe", "model", "cfg.json", "--batch", "1", "--seq-len", "4096"], "--seq-len", {"cfg.json": GPT2_77}),
    Case(["probe", "model", "cfg.json", "--batch", "1", "--seq-len", "64", "--flop-seq-lens", "32,100"],
         "--flop-seq-lens", {"cfg.json": GPT2_77}),
    Case(["probe", "model", "cfg.json", "--batch", "1", "--flop-seq-lens", "32,,64"], "--flop-seq-lens",
         {"cfg.json": GPT2_77}),
]

#: The seventh round (issue 29, stop 42): the classes of the stop-42 audit, each in a form its tests do not
#: hold: counts naming another noun, heads derived from the width, options given twice or beside an option
#: that leaves them unread, a calibration unit, a neighbour too far off.
SEVENTH: list[Case] = [
    S("model.layers", "model.layers=24 heads", "model.width=1024"),
    S("data.cameras", "data.cameras=3 frames"),
    S("model.experts", "model.experts=8 tokens", "model.layers=4", "model.width=512"),
    S("cluster.nvdec_fps_1080p", "cluster.nvdec_fps_1080p=700 tokens/s"),
    S("parallel.tensor", "parallel.tensor=7", "cluster.count=7"),
    S("parallel.tensor", "model.layers=4", "model.width=640", "parallel.tensor=4", "cluster.count=4"),
    S("data.pixels_per_frame", "data.pixels_per_frame=1e9", "data.width=640", "data.height=360"),
    S("training.state_recipe", "training.state_recipe=fp8_te", "cluster.accelerator=a100-sxm-40gb"),
    S("serving.mfu", "serving.mfu=1e-9"),
    Case(["layout", "--top", "3", "--top", "4"], "--top"),
    Case(["serve", "-o", "a.json", "--output", "b.json"], "--output"),
    Case(["solve", "cluster.count", "--for", "memory.fits", "--among", "h100-sxm"], "--among"),
    Case(["solve", "cluster.accelerator", "--for", "memory.fits", "--range", "1:8"], "--range"),
    Case(["sweep", "--vary", "cluster.accelerator=b200,B200"], "--vary cluster.accelerator"),
    Case(["sweep", "--vary", "cluster.accelerator=h100-sxm,h1oo-sxm"], "--vary cluster.accelerator"),
    Case(["simulate", "--frames", "1000", "--decode-dist", "empirical", "--empirical", "e.txt", "--vary",
          "cv=0.5,1"], "--vary cv", {"e.txt": "0.01 0.02 0.03\n"}),
    Case(["scaling", "optimal", "--budget", "1e21", "--law", "1.69,406.4,410.7,0.34,0.28", "--law",
          "1.7,400,400,0.3,0.3"], "--law"),
    Case(["plan", "--calibration", "c.toml"], "values[0].unit",
         {"c.toml": 'format = 1\n[[values]]\nkey = "cluster.core_fps_1080p"\nvalue = 200\nunit = "GB"\n'}),
    Case(["data", "mix", "--tokens", "1T", "--source", "web:2T frames:1"], "--source web tokens"),
    W("[[training]]\nseq_len = 2048\n", "training"),
    # the stop-42 second audit: config.json fields, a config's layout, runs CSVs
    Case(["params", "c.json"], "head_dim", {"c.json": json.dumps({
        "model_type": "gemma2", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
        "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 300, "head_dim": None})}),
    Case(["params", "c.json"], "num_experts_per_tok", {"c.json": json.dumps({
        "model_type": "mixtral", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
        "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 300, "num_local_experts": 2,
        "num_experts_per_tok": 3})}),
    Case(["serve", "--set", "model.hf_config=c.json"], "sliding_window", {"c.json": json.dumps({
        "model_type": "mistral", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
        "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 300, "sliding_window": 0})}),
    Case(["plan", "--set", "model.hf_config=c.json", "--set", "parallel.pipeline=4", "--set", "cluster.count=4"],
         "parallel.pipeline", {"c.json": json.dumps({
             "model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 3,
             "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 300})}),
    Case(["scaling", "fit", "r.csv"], "r.csv", {"r.csv": "N,params,D,loss\n1e8,1e8,2e9,3.4\n"}),
    Case(["scaling", "fit", "r.csv"], "r.csv", {"r.csv": "params,tokens,loss\n1e8,2e9,3.4,1\n"}),
]


def main() -> None:
    jobs = int(sys.argv[sys.argv.index("-j") + 1]) if "-j" in sys.argv else 2
    second = "--second" in sys.argv  # only the second batch
    third = "--third" in sys.argv  # only the third (issue 29)
    fifth = "--fifth" in sys.argv  # only the fifth (issue 29, stop 40)
    sixth = "--sixth" in sys.argv  # only the sixth (issue 29, stop 41)
    seventh = "--seventh" in sys.argv  # only the seventh (issue 29, stop 42)
    cases = (SEVENTH if seventh else SIXTH if sixth else FIFTH if fifth else THIRD if third else SECOND if second
             else CASES + SECOND + THIRD + FIFTH + SIXTH + SEVENTH)
    with ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(run_cli, cases))
    cli_failures = [f"{' '.join(c.args)[:120]} {list(c.files)}: {r}" for c, r in zip(cases, results) if r]
    batches = [] if fifth or sixth or seventh else [run_web(third=True)] if third else [run_web(second=True)] if second else [
        run_web(), run_web(second=True), run_web(third=True)]
    web_tried, web_correct = sum(b[0] for b in batches), sum(b[1] for b in batches)
    web_failures = [f for b in batches for f in b[2]]
    for f in cli_failures + web_failures:
        print("FAIL", f)
    cli_tried, cli_correct = len(cases), len(cases) - len(cli_failures)
    print(f"command line: {cli_tried} tried, {cli_correct} correct")
    print(f"web page: {web_tried} tried, {web_correct} correct")
    print(f"total: {cli_tried + web_tried} tried, {cli_correct + web_correct} correct")
    sys.exit(1 if cli_failures or web_failures else 0)


if __name__ == "__main__":
    main()
