"""`trainplan data inspect` (issue 14): figures checked against what the files were made with.

Video: clips encoded here with libx264 at a known frame rate, frame count and keyframe interval
(keyint = min-keyint = G, scene-cut detection off, so a keyframe falls exactly every G frames),
and the bit rate against the file's own size (container overhead is a few per cent of it).
Tokens: corpora built here with a known number of exact copies and of near copies (a few words
changed of several hundred, true Jaccard of the 5-shingle sets computed with Python sets, far
above 0.8), and distinct documents (true Jaccard near 0)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from trainplan.measure import inspect as insp
from trainplan.measure import probe
from trainplan.workload.load import load_workload

FPS, FRAMES = 25.0, 60


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("clips")
    for i, gop in enumerate((12, 20)):
        clip = probe.synthesize_clip(probe.ClipFormat(320, 240, FPS, 400e3, gop), FRAMES, seed=i)
        (d / f"clip{i}.mp4").write_bytes(clip.data)
    (d / "notes.md").write_text("not a video")  # ignored in a folder: not a video or token suffix
    return d


def test_video_per_file_figures_are_those_it_was_encoded_with(clips):
    f = insp.inspect_video(clips / "clip0.mp4")
    assert (f.codec, f.width, f.height, f.fps, f.frames) == ("h264", 320, 240, FPS, FRAMES)
    assert "mp4" in f.container
    # keyframes at 0, 12, 24, 36, 48: four intervals of exactly 12
    assert f.keyframes == 5 and f.gop_intervals == [12] * 4
    assert (f.gop_median, f.gop_min, f.gop_max, f.gop_iqr, f.gop_stdev) == (12, 12, 12, 0, 0)
    assert f.seconds == pytest.approx(FRAMES / FPS)
    assert f.hours == pytest.approx(FRAMES / FPS / 3600)
    size = (clips / "clip0.mp4").stat().st_size
    # the stream's bits are the file's less the container (moov, headers): within 5 % of size*8/seconds
    assert f.bitrate == pytest.approx(size * 8 / (FRAMES / FPS), rel=0.05)
    assert f.bitrate < size * 8 / (FRAMES / FPS)
    assert f.bits_per_pixel == pytest.approx(f.bitrate / (320 * 240 * FPS))


def test_video_aggregate_by_hand(clips):
    r = insp.inspect_paths([clips])
    assert r["files_found"] == 2 and r["files_inspected"] == 2
    a = r["aggregate"]
    files = [insp.inspect_video(clips / f"clip{i}.mp4") for i in (0, 1)]
    assert a["frames"] == 2 * FRAMES and a["hours"] == pytest.approx(2 * FRAMES / FPS / 3600)
    # intervals: 4 of 12 and 2 of 20 -> median 12, min 12, max 20
    assert (a["gop_median"], a["gop_min"], a["gop_max"]) == (12, 12, 20)
    bits = sum(f.bitrate * f.seconds for f in files)
    assert a["bitrate"] == pytest.approx(bits / (2 * FRAMES / FPS))
    assert a["bits_per_pixel"] == pytest.approx(a["bitrate"] / (320 * 240 * FPS))


def test_sample_scales_totals(clips):
    r = insp.inspect_paths([clips], sample_files=1)
    assert r["files_inspected"] == 1 and r["files_found"] == 2
    assert r["aggregate"]["hours_estimated_total"] == pytest.approx(2 * r["aggregate"]["hours"])


def test_output_writes_measured_data_section_the_plan_reads(clips, tmp_path, cli):
    out = tmp_path / "w.toml"
    res = cli("data", "inspect", str(clips), "--output", str(out), "--format", "json")
    assert res.returncode == 0, res.stderr
    w = load_workload(out)
    assert (w.data.width, w.data.height, w.data.fps, w.data.gop) == (320, 240, FPS, 12)
    for key in ("data.width", "data.height", "data.fps", "data.bitrate", "data.gop", "data.hours"):
        assert w.provenance[key].kind == "measured", key
        assert "data inspect" in w.provenance[key].source
    assert w.provenance["data.side"].kind == "assumed"
    plan = cli("plan", str(out), "--format", "json")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["assumptions"]["data.gop"]["provenance"] == "measured"


def test_table_and_progress_run(clips, cli):
    res = cli("data", "inspect", str(clips / "clip1.mp4"))
    assert res.returncode == 0, res.stderr
    assert "keyframe every 20 frames" in res.stdout and "320x240" in res.stdout


def test_bad_inputs_one_line_exit_2(tmp_path, cli):
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"\x00" * 100)
    for args in (["data", "inspect", str(tmp_path / "missing")], ["data", "inspect", str(bad)],
                 ["data", "inspect", str(bad), "--sample", "0"]):
        res = cli(*args)
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr


# ---------------------------------------------------------------- tokens


def _words(rng: random.Random, n: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(6)) for _ in range(n)]


def _jaccard(a: list[str], b: list[str]) -> float:
    sa, sb = insp._shingles(a), insp._shingles(b)  # noqa: SLF001
    return len(sa & sb) / len(sa | sb)


def test_text_exact_and_near_duplicates(tmp_path):
    rng = random.Random(0)
    base = [_words(rng, 400) for _ in range(20)]
    docs = [" ".join(d) for d in base]
    exact = [docs[0], docs[1], docs[2]]  # 3 exact copies
    near = []
    for d in base[3:7]:  # 4 near copies: 2 words of 400 replaced
        copy = list(d)
        for i in (100, 300):
            copy[i] = "changed"
        assert _jaccard(d, copy) > 0.9
        near.append(" ".join(copy))
    assert max(_jaccard(base[0], b) for b in base[1:]) < 0.05
    lines = [json.dumps({"text": t}) for t in docs + exact + near]
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n")
    a = insp.inspect_paths([path])["aggregate"]
    n = 27
    assert a["documents"] == n
    assert a["exact_duplicate_documents"] == 3 and a["exact_duplicate_share"] == pytest.approx(3 / n)
    assert a["near_duplicate_documents"] == 4 and a["near_duplicate_share"] == pytest.approx(4 / n)
    # GPT-2 pre-tokens of "abcdef ghijkl ...": each word of letters is one piece (with its leading space)
    assert a["tokens"] == 400 * n
    assert a["effective_unique_tokens"] == 400 * 20
    assert a["bytes_per_token"] == pytest.approx(path.stat().st_size / (400 * n))


def test_token_ids_npy_with_eos_and_bin(tmp_path):
    rng = np.random.default_rng(0)
    eos = 0
    docs = [rng.integers(1, 60_000, size=300) for _ in range(10)]
    stream = []
    for d in docs + [docs[4], docs[7]]:  # two exact copies
        stream.extend(d.tolist() + [eos])
    ids = np.array(stream, dtype=np.uint32)
    np.save(tmp_path / "ids.npy", ids)
    r = insp.inspect_paths([tmp_path / "ids.npy"], eos=eos)
    a = r["aggregate"]
    assert a["documents"] == 12 and a["tokens"] == 12 * 301
    assert a["exact_duplicate_documents"] == 2 and a["near_duplicate_documents"] == 0
    assert a["effective_unique_tokens"] == 10 * 301
    assert r["files"][0]["token_id_bytes"] == 4
    # .bin: raw uint16 without an eos id: 2048-token chunks are the documents
    raw = rng.integers(0, 65_535, size=5000, dtype=np.uint16)
    (tmp_path / "b").mkdir()
    raw.tofile(tmp_path / "b" / "ids.bin")
    b = insp.inspect_paths([tmp_path / "b"])["aggregate"]
    assert b["tokens"] == 5000 and b["documents"] == 3 and b["bytes_per_token"] == 2.0


def test_token_output_sets_training_tokens_measured(tmp_path):
    ids = np.concatenate([np.arange(1, 101, dtype=np.uint16)] * 3)  # one 100-token chunk... repeated
    ids.tofile(tmp_path / "rep.bin")
    r = insp.inspect_paths([tmp_path / "rep.bin"])
    out = insp.to_workload(r, tmp_path / "w.toml", "measured here")
    w = load_workload(out)
    assert w.data.kind == "tokens" and w.data.bytes_per_token == 2.0
    assert w.training.tokens == r["aggregate"]["effective_unique_tokens"] == 300
    assert w.provenance["training.tokens"].kind == "measured"
    assert w.provenance["data.bytes_per_token"].kind == "measured"
