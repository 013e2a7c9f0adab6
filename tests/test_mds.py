"""MosaicML streaming (MDS) shards read in place (issue 26): shards written by the mosaicml-streaming
package's own MDSWriter, read by trainplan's reader of the MDS layout (shards.mds_units), locally and
on moto's S3 server. The package is installed without its dependencies (they would replace the
project's torch and numpy; .ci/run installs it so), and its writer is imported without the package's
top-level module, which imports the torch dataset classes (torchvision). Clips are encoded here with a
known format; text documents include a known number of exact copies."""

from __future__ import annotations

import importlib.util
import json
import sys
import types

import pytest

from s3_server import s3_server
from trainplan.measure import probe

W, H, FPS, FRAMES, GOP = 128, 96, 25.0, 25, 5


def _mds_writer():
    if "streaming" in sys.modules:  # the bare package module made below on a first call
        from streaming.base.format.mds.writer import MDSWriter

        return MDSWriter
    spec = importlib.util.find_spec("streaming")
    if spec is None or spec.submodule_search_locations is None:
        pytest.skip("mosaicml-streaming is not installed (.ci/run installs it without its dependencies)")
    if "streaming" not in sys.modules:
        pkg = types.ModuleType("streaming")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["streaming"] = pkg
    try:
        from streaming.base.format.mds.writer import MDSWriter
    except ImportError as err:
        pytest.skip(f"mosaicml-streaming's writer does not import here ({err})")
    return MDSWriter


@pytest.fixture(scope="module")
def mds(tmp_path_factory):
    writer = _mds_writer()
    root = tmp_path_factory.mktemp("mds")
    clips = [probe.synthesize_clip(probe.ClipFormat(W, H, FPS, 150e3, GOP), FRAMES, seed=i).data for i in range(5)]
    with writer(out=str(root / "video"), columns={"video": "bytes", "caption": "str"}, size_limit=2**16) as w:
        for i, c in enumerate(clips):
            w.write({"video": c, "caption": f"clip {i}"})
    docs = [" ".join(f"word{(7 * i + j) % 997}" for j in range(200)) for i in range(8)]
    with writer(out=str(root / "text"), columns={"text": "str"}, size_limit=2**14) as w:
        for d in docs + docs[:2]:  # two exact copies
            w.write({"text": d})
    return root, clips


def test_mds_video_samples(cli, mds):
    root, clips = mds
    index = json.loads((root / "video" / "index.json").read_text())
    assert len(index["shards"]) > 1  # several shards, as the size limit forces
    res = cli("data", "inspect", str(root / "video"), "--format", "json")
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    assert (r["files_found"], r["kind"]) == (5, "video")
    assert sorted(f["bytes"] for f in r["files"]) == sorted(len(c) for c in clips)
    for f in r["files"]:
        assert (f["width"], f["height"], f["fps"], f["frames"], f["gop_median"]) == (W, H, FPS, FRAMES, GOP)


def test_mds_text_samples_on_s3(cli, mds):
    root, _ = mds
    with s3_server():
        import fsspec

        fs = fsspec.filesystem("s3")
        fs.mkdir("mds-bucket")
        fs.put(str(root / "text"), "mds-bucket/text", recursive=True)
        res = cli("data", "inspect", "s3://mds-bucket/text", "--format", "json")
    assert res.returncode == 0, res.stderr
    a = json.loads(res.stdout)["aggregate"]
    assert (a["documents"], a["exact_duplicate_documents"]) == (10, 2)


@pytest.mark.parametrize("encoding,per_member", [
    # dynamic dtype and shape: a dtype byte, (ndim << 2 | uint8 shape) byte, the shape (64 < 256: one byte)
    ("ndarray", 1 + 1 + 1 + 64 * 2),
    ("ndarray:uint16", 1 + 1 + 64 * 2),  # the dtype fixed by the column: no dtype byte
    ("ndarray:uint16:64", 64 * 2),  # dtype and shape fixed: the values alone
])
def test_mds_token_id_columns(cli, tmp_path, encoding: str, per_member: int) -> None:
    """Token ids in an ndarray column (MosaicML's LLM shards: `input_ids` / `tokens`), written by the real
    MDSWriter in each of its layouts: 6 samples of 64 ids, two of them exact copies."""
    import numpy as np

    writer = _mds_writer()
    rows = [np.arange(64, dtype=np.uint16) + 100 * i for i in range(4)]
    rows += rows[:2]
    with writer(out=str(tmp_path / "ids"), columns={"input_ids": encoding, "source": "str"}, size_limit=2**12) as w:
        for r in rows:
            w.write({"input_ids": r, "source": "web"})
    res = cli("data", "inspect", str(tmp_path / "ids"), "--format", "json")
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    a = r["aggregate"]
    assert (r["kind"], r["files_found"], a["tokens"]) == ("tokens", 6, 6 * 64)
    assert a["stored_bytes"] == 6 * per_member
    assert a["bytes_per_token"] == pytest.approx(per_member / 64)


def test_mds_float_arrays_are_not_token_ids(cli, tmp_path) -> None:
    import numpy as np

    writer = _mds_writer()
    with writer(out=str(tmp_path / "f"), columns={"input_ids": "ndarray:float32"}, size_limit=2**12) as w:
        w.write({"input_ids": np.ones(8, dtype=np.float32)})
    res = cli("data", "inspect", str(tmp_path / "f"), "--format", "json")
    assert res.returncode == 2 and res.stdout == ""
    assert "integer token ids" in res.stderr and res.stderr.count("\n") == 1


def test_a_draw_by_shard_reads_the_mds_index_once(tmp_path, monkeypatch) -> None:
    """40 samples in 20 shards of 2; --sample 10 --by-shard draws 5 shards and reads index.json once."""
    import numpy as np

    from trainplan.measure import shards

    writer = _mds_writer()
    with writer(out=str(tmp_path / "ids"), columns={"input_ids": "ndarray:uint16"}, size_limit=2**9) as w:
        for _ in range(40):
            w.write({"input_ids": np.arange(64, dtype=np.uint16)})
    listed = len(json.loads((tmp_path / "ids" / "index.json").read_text())["shards"])
    reads: list[str] = []
    real = shards.mds_shards
    monkeypatch.setattr(shards, "mds_shards", lambda e, fs: reads.append(e.path) or real(e, fs))
    draw = shards.units_by_shard([str(tmp_path / "ids")], 10, seed=0)
    per_shard = 40 // listed
    assert (draw.shards, len(reads)) == (listed, 1)
    assert draw.drawn == -(-10 // per_shard) and len(draw.units) == draw.drawn * per_shard


def test_mds_two_camera_columns(cli, tmp_path):
    """A sample of two video columns (front_video, rear.mp4) beside a caption: both columns inspected,
    two streams, each stream's hours written to the workload."""
    writer = _mds_writer()
    clips = [probe.synthesize_clip(probe.ClipFormat(W, H, FPS, 150e3, GOP), FRAMES, seed=20 + i).data
             for i in range(6)]
    with writer(out=str(tmp_path / "cams"), columns={"front_video": "bytes", "rear.mp4": "bytes",
                                                     "caption": "str"}, size_limit=2**16) as w:
        for i in range(3):
            w.write({"front_video": clips[2 * i], "rear.mp4": clips[2 * i + 1], "caption": f"drive {i}"})
    out = tmp_path / "w.toml"
    res = cli("data", "inspect", str(tmp_path / "cams"), "--format", "json", "--output", str(out))
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    assert (r["files_found"], r["kind"], r["aggregate"]["streams"]) == (6, "video", 2)
    assert sorted(f["bytes"] for f in r["files"]) == sorted(len(c) for c in clips)
    import tomllib

    data = tomllib.loads(out.read_text())["data"]
    assert (data["cameras"], data["hours"]) == (2, pytest.approx(6 * FRAMES / FPS / 3600 / 2))


@pytest.mark.parametrize("name,encoding,suffix", [
    ("video", "bytes", ".mp4"), ("clip", "bytes", ".mp4"), ("front_video", "bytes", ".mp4"),
    ("cam_0_videos", "bytes", ".mp4"), ("rear.mp4", "bytes", ".mp4"), ("left.mkv", "bytes", ".mkv"),
    ("mp4", "bytes", ".mp4"), ("clip_embedding", "bytes", None), ("video_meta", "bytes", None),
    ("caption", "bytes", None), ("video", "str", None), ("input_ids", "ndarray:int32", ".npy"),
    ("text", "str", ".txt"), ("image", "jpeg", ".jpg"),
])
def test_which_mds_columns_are_read(name, encoding, suffix):
    """An MDS column's kind from its name and encoding (shards._mds_suffix), as docs/data-where-it-lives.md
    states it: no writer is needed."""
    from trainplan.measure.shards import _mds_suffix

    assert _mds_suffix(name, encoding) == suffix
