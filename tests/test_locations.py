"""`trainplan data inspect URL` (issue 26): corpora read where they live, local and on a real S3 server.

Clips are encoded here with libx264 at a known size, frame rate, frame count and keyframe interval;
WebDataset shards are written by the webdataset package's own TarWriter; token tables by pyarrow,
with a known number of rows, tokens a row and exact duplicate rows. The S3 server is moto's server
mode on 127.0.0.1 (tests/s3_server.py), reached over HTTP by s3fs."""

from __future__ import annotations

import json
import math
import tarfile
from pathlib import Path

import numpy as np
import pytest

from s3_server import CREDENTIALS, s3_server
from trainplan.measure import probe

W, H, FPS, FRAMES, GOP = 160, 120, 25.0, 30, 10
ROWS, TOKENS_A_ROW, DUPLICATES = 20, 100, 3


def _clip(seed: int) -> bytes:
    return probe.synthesize_clip(probe.ClipFormat(W, H, FPS, 200e3, GOP), FRAMES, seed=seed).data


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict:
    wds = pytest.importorskip("webdataset")
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("corpus")
    (root / "wds").mkdir()
    clips: dict[str, bytes] = {}
    for s in range(2):
        with wds.TarWriter(str(root / "wds" / f"shard-{s:04d}.tar")) as w:
            for i in range(3):
                data = _clip(10 * s + i)
                clips[f"shard-{s:04d}.tar#s{s}_{i}.mp4"] = data
                w.write({"__key__": f"s{s}_{i}", "mp4": data, "json": {"caption": f"clip {i}"}})
    (root / "tokens").mkdir()
    rng = np.random.default_rng(0)
    rows = [rng.integers(0, 50_000, TOKENS_A_ROW).astype(np.int32).tolist() for _ in range(ROWS - DUPLICATES)]
    rows += rows[:DUPLICATES]  # exact copies of the first rows
    table = pa.table({"input_ids": rows}, schema=pa.schema([("input_ids", pa.list_(pa.int32()))]))
    pq.write_table(table, root / "tokens" / "part-0.parquet")
    with pa.ipc.new_file(str(root / "part-0.arrow"), table.schema) as writer:
        writer.write_table(table)
    return {"root": root, "clips": clips}


def _json(cli, *args: str) -> dict:
    res = cli("data", "inspect", *args, "--format", "json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _check_clips(report: dict, clips: dict[str, bytes]) -> None:
    assert report["kind"] == "video" and report["units"] == "shard members"
    assert report["files_found"] == report["files_inspected"] == len(clips)
    for f in report["files"]:
        name = f["path"].rsplit("/", 1)[-1]
        assert f["bytes"] == len(clips[name])  # the member's own bytes, not the shard's
        assert (f["codec"], f["width"], f["height"], f["fps"], f["frames"], f["gop_median"]) == \
            ("h264", W, H, FPS, FRAMES, GOP)
    a = report["aggregate"]
    assert a["frames"] == FRAMES * len(clips)
    assert a["hours"] == pytest.approx(FRAMES / FPS * len(clips) / 3600)
    assert a["bytes"] == sum(len(c) for c in clips.values())


def test_webdataset_shards_on_a_local_path(cli, corpus):
    _check_clips(_json(cli, str(corpus["root"] / "wds")), corpus["clips"])


def test_tar_listing_reads_member_headers_only(corpus):
    """The members found are those tarfile lists, at the offsets it gives."""
    from trainplan.measure import shards

    units = shards.units([corpus["root"] / "wds"])
    with tarfile.open(corpus["root"] / "wds" / "shard-0000.tar") as t:
        mp4 = [m for m in t.getmembers() if m.name.endswith(".mp4")]
    assert [(u.member, u.offset, u.size) for u in units[:3]] == [(m.name, m.offset_data, m.size) for m in mp4]


def _check_tokens(report: dict, size: int) -> None:
    a = report["aggregate"]
    assert (a["documents"], a["tokens"]) == (ROWS, ROWS * TOKENS_A_ROW)
    assert a["exact_duplicate_documents"] == DUPLICATES
    assert a["effective_unique_tokens"] == (ROWS - DUPLICATES) * TOKENS_A_ROW
    assert a["bytes_per_token"] == pytest.approx(size / (ROWS * TOKENS_A_ROW))
    assert report["files"][0]["token_id_bytes"] == 4  # int32 ids


def test_parquet_and_arrow_token_tables(cli, corpus):
    root = corpus["root"]
    _check_tokens(_json(cli, str(root / "tokens")), (root / "tokens" / "part-0.parquet").stat().st_size)
    _check_tokens(_json(cli, str(root / "part-0.arrow")), (root / "part-0.arrow").stat().st_size)


@pytest.fixture(scope="module")
def bucket(corpus):
    with s3_server():
        import fsspec

        fs = fsspec.filesystem("s3")
        fs.mkdir("corpus")
        fs.put(str(corpus["root"] / "wds"), "corpus/wds", recursive=True)
        fs.put(str(corpus["root"] / "tokens"), "corpus/tokens", recursive=True)
        yield "s3://corpus"


def test_webdataset_shards_on_s3(cli, corpus, bucket):
    res = cli("data", "inspect", f"{bucket}/wds", "--format", "json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    _check_clips(report, corpus["clips"])
    assert report["files"][0]["path"].startswith("s3://corpus/wds/shard-0000.tar#")
    for secret in CREDENTIALS.values():
        if "secret" in secret or "key" in secret:
            assert secret not in res.stdout + res.stderr


def test_parquet_on_s3(cli, corpus, bucket):
    _check_tokens(_json(cli, f"{bucket}/tokens"), (corpus["root"] / "tokens" / "part-0.parquet").stat().st_size)


def test_sample_on_s3_states_intervals(cli, corpus, bucket):
    r = _json(cli, f"{bucket}/wds", "--sample", "4", "--seed", "3")
    assert (r["files_found"], r["files_inspected"]) == (6, 4)
    a = r["aggregate"]
    # every clip has FRAMES frames: the sample's total is exact and its interval has no width
    iv = a["intervals"]["frames"]
    assert iv["estimate"] == iv["low"] == iv["high"] == pytest.approx(6 * FRAMES)
    sizes = [len(corpus["clips"][f["path"].rsplit("/", 1)[-1]]) for f in r["files"]]
    assert a["intervals"]["bytes"]["estimate"] == pytest.approx(6 * np.mean(sizes))
    assert a["intervals"]["bytes"]["low"] < sum(len(c) for c in corpus["clips"].values()) \
        < a["intervals"]["bytes"]["high"]
    table = cli("data", "inspect", f"{bucket}/wds", "--sample", "4", "--no-files")
    assert table.returncode == 0 and "95 % interval" in table.stdout


def test_missing_bucket_is_one_line(cli, bucket):
    res = cli("data", "inspect", "s3://no-such-bucket/x")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "s3://no-such-bucket/x" in res.stderr


def test_credentials_in_a_url_are_never_printed(cli, bucket):
    res = cli("data", "inspect", "s3://someone:hunter2@no-such-bucket/x")
    assert res.returncode == 2 and "hunter2" not in res.stderr and "someone" not in res.stderr


def test_a_scheme_without_its_package_names_the_extra(cli):
    import importlib.util

    if importlib.util.find_spec("gcsfs") is not None:
        pytest.skip("gcsfs is installed here: gs:// would be read")
    res = cli("data", "inspect", "gs://bucket/x")
    assert res.returncode == 2 and "gcsfs" in res.stderr and "trainplan[gcs]" in res.stderr


def test_webdataset_image_members(cli, tmp_path):
    """Image members: sizes as Pillow wrote them, bytes per pixel = member bytes / pixels."""
    wds = pytest.importorskip("webdataset")
    import io

    from PIL import Image

    sizes = [(64, 48)] * 4 + [(32, 32)] * 2
    jpegs = []
    for i, (w, h) in enumerate(sizes):
        buf = io.BytesIO()
        Image.fromarray(np.random.default_rng(i).integers(0, 255, (h, w, 3), dtype=np.uint8)).save(buf, "JPEG")
        jpegs.append(buf.getvalue())
    with wds.TarWriter(str(tmp_path / "images-0.tar")) as w:
        for i, data in enumerate(jpegs):
            w.write({"__key__": f"im{i}", "jpg": data, "cls": i % 2})
    r = _json(cli, str(tmp_path))
    a = r["aggregate"]
    assert r["kind"] == "image" and a["images"] == 6
    assert (a["width"], a["height"], a["codec"]) == (64, 48, "jpeg")
    assert a["bytes"] == sum(len(j) for j in jpegs)
    assert a["bits_per_pixel"] == pytest.approx(8 * sum(len(j) for j in jpegs) / sum(w * h for w, h in sizes))
    table = cli("data", "inspect", str(tmp_path))
    assert table.returncode == 0 and "6 images" in table.stdout


@pytest.fixture(scope="module")
def web_server(corpus):
    """Python's own http.server on 127.0.0.1 serving the corpus folder (it answers no range requests)."""
    pytest.importorskip("aiohttp", reason="aiohttp is not installed (the http extra)")
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # one stderr line a request otherwise
            pass

    class QuietServer(http.server.ThreadingHTTPServer):
        def handle_error(self, request: object, client_address: object) -> None:  # a client that hung up
            pass

    server = QuietServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(corpus["root"])))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_http_location(cli, corpus, web_server):
    _check_tokens(_json(cli, f"{web_server}/tokens/"), (corpus["root"] / "tokens" / "part-0.parquet").stat().st_size)
    res = cli("data", "inspect", f"{web_server}/wds/shard-0000.tar")
    assert res.returncode == 2 and "range requests" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_parquet_text_column_and_a_table_without_one(cli, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    docs = [f"document number {i} " + " ".join(f"w{(i * 31 + j) % 500}" for j in range(60)) for i in range(9)]
    pq.write_table(pa.table({"text": docs + docs[:4], "id": list(range(13))}), tmp_path / "t.parquet")
    a = _json(cli, str(tmp_path / "t.parquet"))["aggregate"]
    assert (a["documents"], a["exact_duplicate_documents"]) == (13, 4)
    assert "pre-tokenizer" in a["tokens_counted_as"]
    pq.write_table(pa.table({"id": [1, 2]}), tmp_path / "bad.parquet")
    res = cli("data", "inspect", str(tmp_path / "bad.parquet"))
    assert res.returncode == 2 and "input_ids" in res.stderr and "text" in res.stderr


def test_a_samples_intervals_reach_the_plans_provenance(cli, corpus, tmp_path):
    from trainplan.units import significant

    out = tmp_path / "w.toml"
    r = _json(cli, str(corpus["root"] / "wds"), "--sample", "4", "--output", str(out))
    iv = r["aggregate"]["intervals"]["bitrate"]
    plan = cli("plan", str(out), "--format", "json")
    assert plan.returncode == 0, plan.stderr
    source = json.loads(plan.stdout)["assumptions"]["data.bitrate"]["source"]
    assert f"bit rate (bit/s) [{significant(iv['low'])}, {significant(iv['high'])}]" in source
    # the interval itself is written beside the value and carried through the plan (planning/intervals.py)
    import tomllib

    written = tomllib.loads(out.read_text())["measured_interval"]
    assert written["data.bitrate"] == pytest.approx([iv["low"], iv["high"]])
    assert "data.hours" not in written  # every clip is as long: the sample's hours are exact, no interval
    report = json.loads(plan.stdout)
    assert report["sample_range"]["keys"] == "data.bitrate"
    assert report["answer"]["range"].startswith("95 % intervals of data.bitrate")
    # a full pass measures the bit rate again, exactly: the sample's interval goes
    assert _json(cli, str(corpus["root"] / "wds"), "--output", str(out))["files_inspected"] == 6
    assert "measured_interval" not in tomllib.loads(out.read_text())


def test_a_draw_by_shard_reads_only_the_shards_drawn(cli, tmp_path, monkeypatch):
    """--sample 4 --by-shard on 5 shards of 3 clips: two shards drawn whole (6 members >= 4), the other
    three never opened; totals are 5 / 2 x the drawn shards' sums, the frames exact (every clip has FRAMES)."""
    wds = pytest.importorskip("webdataset")
    from trainplan.measure import shards

    clips: dict[str, bytes] = {}
    for s in range(5):
        with wds.TarWriter(str(tmp_path / f"shard-{s:04d}.tar")) as w:
            for i in range(3):
                data = _clip(100 + 10 * s + i)
                clips[f"shard-{s:04d}.tar#s{s}_{i}.mp4"] = data
                w.write({"__key__": f"s{s}_{i}", "mp4": data})
    opened: list[str] = []
    real = shards.tar_units
    monkeypatch.setattr(shards, "tar_units", lambda e, fs: opened.append(e.name) or real(e, fs))
    draw = shards.units_by_shard([str(tmp_path)], 4, seed=1)
    assert (draw.shards, draw.drawn, len(draw.units)) == (5, 2, 6) and len(opened) == 2
    r = _json(cli, str(tmp_path), "--sample", "4", "--by-shard", "--seed", "1")
    assert (r["shards_found"], r["shards_inspected"], r["files_inspected"], r["files_found"]) == (5, 2, 6, 15)
    assert r["units"] == "shard members, whole shards drawn"
    drawn_names = sorted({f["path"].rsplit("/", 1)[-1].split("#")[0] for f in r["files"]})
    assert drawn_names == sorted(set(opened))
    a = r["aggregate"]
    iv = a["intervals"]
    assert iv["frames"]["estimate"] == iv["frames"]["low"] == iv["frames"]["high"] == pytest.approx(15 * FRAMES)
    drawn_bytes = sum(len(clips[f["path"].rsplit("/", 1)[-1]]) for f in r["files"])
    assert iv["bytes"]["estimate"] == pytest.approx(5 / 2 * drawn_bytes)
    assert a["bytes_estimated_total"] == pytest.approx(5 / 2 * drawn_bytes)
    bad = cli("data", "inspect", str(tmp_path), "--by-shard")
    assert bad.returncode == 2 and "--by-shard" in bad.stderr and bad.stderr.count("\n") == 1


def test_a_two_stage_draw_inspects_a_share_of_each_drawn_shards_members(cli, tmp_path):
    """--sample 4 --by-shard --shard-fraction 0.5 on 4 shards of 2, 3, 4 and 5 clips: shards are drawn until
    4 members are in hand, in each ceil(0.5 x its clips) of them, and every total is M / m x the sum of
    the members' figures times their shard's clips / clips drawn there (the frames exact: every clip has
    FRAMES, so the weighted count of clips is each drawn shard's count)."""
    wds = pytest.importorskip("webdataset")
    from trainplan.measure import shards

    clips: dict[str, bytes] = {}
    sizes = {0: 2, 1: 3, 2: 4, 3: 5}
    for s, n in sizes.items():
        with wds.TarWriter(str(tmp_path / f"shard-{s:04d}.tar")) as w:
            for i in range(n):
                data = _clip(300 + 10 * s + i)
                clips[f"shard-{s:04d}.tar#s{s}_{i}.mp4"] = data
                w.write({"__key__": f"s{s}_{i}", "mp4": data})
    draw = shards.units_by_shard([str(tmp_path)], 4, seed=3, fraction=0.5)
    per_shard: dict[int, int] = {}
    for c in draw.clusters:
        per_shard[c] = per_shard.get(c, 0) + 1
    names = sorted(p.name for p in tmp_path.glob("*.tar"))
    total_in = {names.index(f"shard-{s:04d}.tar"): n for s, n in sizes.items()}
    assert all(k == math.ceil(0.5 * total_in[c]) for c, k in per_shard.items())
    assert sum(per_shard.values()) >= 4  # shards read in batches until 4 members are in hand
    import random

    order = random.Random(3).sample(range(4), 4)
    assert sorted(per_shard) == sorted(order[:draw.drawn])  # the first shards of the seeded order, no other
    assert draw.weights == [total_in[c] / per_shard[c] for c in draw.clusters]
    r = _json(cli, str(tmp_path), "--sample", "4", "--by-shard", "--shard-fraction", "0.5", "--seed", "3")
    assert r["files_inspected"] == len(draw.units) and r["shards_inspected"] == draw.drawn
    assert r["units"].endswith("(two stages)")
    m = draw.drawn
    weight = {u.url.rsplit("/", 1)[-1]: w for u, w in zip(draw.units, draw.weights)}
    iv = r["aggregate"]["intervals"]
    by_hand = 4 / m * sum(weight[f["path"].rsplit("/", 1)[-1]] * len(clips[f["path"].rsplit("/", 1)[-1]])
                          for f in r["files"])
    assert iv["bytes"]["estimate"] == pytest.approx(by_hand)
    assert r["aggregate"]["bytes_estimated_total"] == pytest.approx(by_hand)
    drawn_clips = sum(total_in[c] for c in per_shard)
    assert iv["frames"]["estimate"] == pytest.approx(4 / m * drawn_clips * FRAMES)
    assert r["files_found"] == round(drawn_clips * 4 / m)
    bad = cli("data", "inspect", str(tmp_path), "--sample", "4", "--shard-fraction", "0.5")
    assert bad.returncode == 2 and "--shard-fraction" in bad.stderr and bad.stderr.count("\n") == 1
    for wrong in ("0", "1.5", "nan"):
        bad = cli("data", "inspect", str(tmp_path), "--sample", "4", "--by-shard", "--shard-fraction", wrong)
        assert bad.returncode == 2 and "--shard-fraction" in bad.stderr and bad.stderr.count("\n") == 1


def test_a_draw_by_shard_reads_headers_in_concurrent_batches(tmp_path, monkeypatch):
    """40 shards of 2 members, --sample 20: one shard read first (2 members), then the 9 the other 18 need at
    that size, capped at LISTING_CONNECTIONS = 8 at once (the second round holds a barrier of 8: read one
    after another it would break), then one more: 10 shards, the first 10 of the seeded order."""
    import random
    import threading

    wds = pytest.importorskip("webdataset")
    from trainplan.measure import shards

    for s in range(40):
        with wds.TarWriter(str(tmp_path / f"shard-{s:04d}.tar")) as w:
            for i in range(2):
                w.write({"__key__": f"s{s}_{i}", "mp4": b"x" * 10})
    barrier = threading.Barrier(shards.LISTING_CONNECTIONS, timeout=30)
    calls: list[str] = []
    lock = threading.Lock()
    real = shards.tar_units

    def counted(e, fs):
        with lock:
            calls.append(e.name)
            n = len(calls)
        if 2 <= n <= 1 + shards.LISTING_CONNECTIONS:
            barrier.wait()  # the second batch's eight reads are in flight together
        return real(e, fs)

    monkeypatch.setattr(shards, "tar_units", counted)
    draw = shards.units_by_shard([str(tmp_path)], 20, seed=5)
    assert (draw.drawn, len(draw.units), len(calls)) == (10, 20, 10)
    names = sorted(p.name for p in tmp_path.glob("*.tar"))
    first = {names[i] for i in random.Random(5).sample(range(40), 40)[:10]}
    assert set(calls) == first


def test_two_camera_webdataset_samples_are_two_streams(cli, tmp_path):
    """A sample holding KEY.front.mp4 and KEY.rear.mp4 is two cameras: both members are inspected, the
    corpus holds two streams, and the workload written gets cameras = 2 and each stream's hours (half the
    clips' total); --cameras overrides what the shards say."""
    wds = pytest.importorskip("webdataset")
    clips = {}
    with wds.TarWriter(str(tmp_path / "cams-0.tar")) as w:
        for i in range(3):
            front, rear = _clip(40 + i), _clip(50 + i)
            clips[f"cams-0.tar#k{i}.front.mp4"], clips[f"cams-0.tar#k{i}.rear.mp4"] = front, rear
            w.write({"__key__": f"k{i}", "front.mp4": front, "rear.mp4": rear, "json": {"i": i}})
    report = _json(cli, str(tmp_path / "cams-0.tar"))
    _check_clips(report, clips)
    assert report["aggregate"]["streams"] == 2
    out = tmp_path / "w.toml"
    res = cli("data", "inspect", str(tmp_path / "cams-0.tar"), "--output", str(out))
    assert res.returncode == 0, res.stderr
    import tomllib

    data = tomllib.loads(out.read_text())["data"]
    assert data["cameras"] == 2
    assert data["hours"] == pytest.approx(6 * FRAMES / FPS / 3600 / 2)
    asked = _json(cli, str(tmp_path / "cams-0.tar"), "--cameras", "3")["aggregate"]
    assert (asked["streams"], asked["streams_basis"]) == (3, "asked for (--cameras 3)")


def test_cameras_as_folders_of_shards(cli, tmp_path):
    """Shards of one field in camera_0/ and camera_1/: two streams, as two folders of files would be."""
    wds = pytest.importorskip("webdataset")
    for cam in range(2):
        (tmp_path / f"camera_{cam}").mkdir()
        with wds.TarWriter(str(tmp_path / f"camera_{cam}" / "shard-0.tar")) as w:
            for i in range(2):
                w.write({"__key__": f"k{i}", "mp4": _clip(60 + 2 * cam + i)})
    report = _json(cli, str(tmp_path))
    assert report["files_found"] == 4 and report["aggregate"]["streams"] == 2


def test_a_bad_camera_count_is_refused_before_any_read(cli, tmp_path):
    """--cameras 0 on a location is refused in one line before the location is read (no server here)."""
    res = cli("data", "inspect", "s3://no-such-bucket/shards", "--cameras", "0")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == ["trainplan: --cameras: expected at least 1 camera, got 0"]
