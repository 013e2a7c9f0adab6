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
