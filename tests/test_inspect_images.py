"""Image folders (issue 25): `data inspect` and `probe decode` on JPEG, PNG and WebP files made here with PIL.

Sizes and formats are those the files were written with, bytes their sizes on disk; the decode probe's rate
is compared with a hand-written PIL loop timed here (generous bounds: timings on a shared machine wander,
and a miss is retried once, reported)."""

from __future__ import annotations

import io
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from trainplan.measure import inspect as insp
from trainplan.measure import probe
from trainplan.workload.load import load_workload

SIZES = {"a.jpg": ("JPEG", 160, 120), "b.jpg": ("JPEG", 160, 120), "c.png": ("PNG", 80, 60),
         "d.webp": ("WEBP", 160, 120)}


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(0)
    for name, (fmt, w, h) in SIZES.items():
        Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(d / name, fmt)
    (d / "broken.jpg").write_bytes(b"not a jpeg")
    return d


def test_inspect_an_image_folder(images, tmp_path, cli):
    out = tmp_path / "w.toml"
    res = cli("data", "inspect", str(images), "--format", "json", "--output", str(out))
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    assert r["kind"] == "image" and r["files_skipped"] == 1 and "broken.jpg" in res.stderr
    by_name = {Path(f["path"]).name: f for f in r["files"]}
    for name, (fmt, w, h) in SIZES.items():
        f = by_name[name]
        assert (f["codec"], f["width"], f["height"]) == (fmt.lower(), w, h)
        assert f["bytes"] == (images / name).stat().st_size
    a = r["aggregate"]
    pixels = [w * h for _, w, h in SIZES.values()]
    assert a["images"] == 4 and a["pixels_per_frame"] == pytest.approx(sum(pixels) / 4)
    assert (a["codec"], a["width"], a["height"]) == ("jpeg", 160, 120)
    w = load_workload(out)
    sizes = [(images / n).stat().st_size for n in SIZES]
    # an image corpus: its count and mean bytes as measured, each image planned as one frame at one frame
    # a second, so the bit rate is the mean bits an image and hours x 3600 the images
    assert (w.data.kind, w.data.images, w.data.image_bytes) == ("images", 4, pytest.approx(np.mean(sizes)))
    assert w.provenance["data.images"].kind == "measured" and w.provenance["data.fps"].kind == "derived"
    assert (w.data.codec, w.data.gop, w.data.random_decodes, w.data.fps) == ("jpeg", 1, 1.0, 1.0)
    assert w.data.bitrate == pytest.approx(np.mean(sizes) * 8)
    assert w.data.hours * 3600 == pytest.approx(4)
    assert w.data.pixels_per_frame == pytest.approx(sum(pixels) / 4)


def _pil_loop(paths: list[Path], side: int, seconds: float) -> float:
    """Images per CPU-second of a plain PIL loader: open from memory, RGB, bilinear resize, to an array."""
    blobs = [p.read_bytes() for p in paths]
    n, c0 = 0, time.thread_time()
    while n == 0 or time.thread_time() - c0 < seconds:
        for b in blobs:
            with Image.open(io.BytesIO(b)) as img:
                np.asarray(img.convert("RGB").resize((side, side), Image.Resampling.BILINEAR))
            n += 1
    return n / (time.thread_time() - c0)


def test_image_decode_probe_agrees_with_a_pil_loop_and_names_its_decoder(images, tmp_path):
    paths = [images / n for n in SIZES]
    for attempt in (1, 2):
        d = probe.decode_images(paths, side=64, seconds=0.3)
        ratio = d["frames_per_cpu_second"] / _pil_loop(paths, 64, 0.3)
        if 0.6 <= ratio <= 1.6:
            break
        if attempt == 1:
            warnings.warn(f"image probe against a PIL loop {ratio:.2f}x (retrying once)", stacklevel=1)
    assert 0.6 <= ratio <= 1.6, ratio
    mean_px = np.mean([w * h for _, w, h in SIZES.values()])
    assert d["core_fps_1080p"] == pytest.approx(d["frames_per_cpu_second"] * mean_px / (1920 * 1080))
    assert d["decoder"].startswith(("Pillow", "pillow-simd"))


def test_probe_decode_on_images_writes_a_calibration_the_plan_takes(images, tmp_path, cli):
    work, cal = tmp_path / "w.toml", tmp_path / "cal.toml"
    good = tmp_path / "good"
    good.mkdir()
    for n in ("a.jpg", "b.jpg"):
        (good / n).write_bytes((images / n).read_bytes())
    assert cli("data", "inspect", str(good), "-o", str(work)).returncode == 0
    res = cli("probe", "decode", str(good), "--format", "json", "--output", str(cal))
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    text = cal.read_text()
    assert 'decoder = "Pillow' in text or 'decoder = "pillow-simd' in text
    w = load_workload(work, calibration=cal)
    assert w.provenance["cluster.core_fps_1080p"].kind == "measured"
    assert w.cluster.core_fps_1080p == pytest.approx(d["core_fps_1080p"])
    plan = cli("plan", str(work), "--calibration", str(cal), "--format", "json")
    assert plan.returncode == 0, plan.stderr
