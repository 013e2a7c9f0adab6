"""data.kind = "images": an image corpus planned as frames, one intra-coded frame an image (docs/workload.md).

Every figure below is worked out by hand from the formulas of docs/pipeline-and-bill.md and docs/accounts.md
with the image's own numbers: a frame per image, decoded once in any order, its bytes the image's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from trainplan.errors import UserError
from trainplan.planning.evaluate import build_report
from trainplan.workload.load import load_workload

IMAGES = ["data.kind='images'", "data.images=2e6", 'data.image_bytes="150 kB"', "data.width=640",
          "data.height=480", "data.side=224", "data.patch=16"]


def test_an_image_corpus_is_planned_one_frame_an_image() -> None:
    w = load_workload(None, IMAGES)
    assert (w.data.cameras, w.data.fps, w.data.gop, w.data.random_decodes) == (1, 1.0, 1, 1.0)
    assert w.data.hours == pytest.approx(2e6 / 3600) and w.data.bitrate == pytest.approx(150e3 * 8)
    assert w.data.codec == "jpeg" and w.provenance["data.codec"].source.startswith("assumed: JPEG")
    assert w.provenance["data.fps"].kind == "derived"
    r = build_report(w)
    tokens_per_image = (224 // 16) ** 2  # 196
    assert r["pipeline"]["tokens_per_frame"] == tokens_per_image
    assert r["workload"]["tokens"] == pytest.approx(2e6 * tokens_per_image)  # one epoch over the images
    assert r["storage"]["data_bytes"] == pytest.approx(2e6 * 150e3)
    assert r["pipeline"]["stored_bytes_per_token"] == pytest.approx(150e3 / tokens_per_image)
    # decode: demand x pixels / 1080p / the core rate
    demand = r["pipeline"]["demand_fps"]
    assert r["pipeline"]["cores_needed"] == pytest.approx(demand * 640 * 480 / (1920 * 1080) / 120.0)


def test_random_access_decodes_an_image_once() -> None:
    """A video at random access decodes (G + 1) / 2 frames a frame used; an image is its own keyframe."""
    seq = build_report(load_workload(None, IMAGES))["pipeline"]
    rnd = build_report(load_workload(None, [*IMAGES, "data.access='random'"]))["pipeline"]
    assert rnd["decoded_per_used"] == 1.0 and rnd["cores_needed"] == pytest.approx(seq["cores_needed"])
    video = build_report(load_workload(None, ["data.access='random'"]))["pipeline"]
    assert video["decoded_per_used"] == pytest.approx((30 + 1) / 2)


def test_image_bytes_default_to_a_jpeg_photo() -> None:
    w = load_workload(None, ["data.kind='images'", "data.width=500", "data.height=400"])
    assert w.data.bitrate == pytest.approx(0.6 * 500 * 400 * 8)


@pytest.mark.parametrize("key", ["data.fps=25", "data.cameras=2", "data.hours=10", "data.gop=12", "cluster.nvdec=true"])
def test_a_frame_key_beside_an_image_corpus_is_refused(key: str) -> None:
    with pytest.raises(UserError, match=key.split("=")[0]):
        load_workload(None, ["data.kind='images'", key])


def test_the_command_line_refuses_it_in_one_line() -> None:
    res = subprocess.run([sys.executable, "-m", "trainplan", "plan", "--set", "data.kind='images'", "--set",
                          "data.fps=25"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("trainplan: data.fps:")


def test_the_report_says_images_and_leaves_out_the_camera_keys() -> None:
    r = build_report(load_workload(None, [*IMAGES, "cluster.cores=1"]))  # decode-bound: the bill's words
    assert r["pipeline"]["kind"] == "images" and r["pipeline"]["bottleneck"] == "decode"
    assert "per 3,600 images" in " ".join(str(v) for v in r["answer"].values())
    from trainplan.present import render

    shown = {k for k, _ in render.shown_assumptions(r)[0]}
    assert {"data.images", "data.image_bytes", "data.width", "cluster.core_fps_1080p"} <= shown
    assert not shown & {"data.fps", "data.cameras", "data.hours", "data.bitrate", "data.bytes_per_token"}
    assert json.loads(render.to_json(r))["assumptions"]["data.fps"]["provenance"] == "derived"
    # a vision encoder on images is served one forward pass a request
    assert r.get("serving") is None or r["serving"]["mode"] == "encode"


def test_the_full_report_names_its_unit_of_data_in_the_datas_words():
    # every "per hour of data" figure of the table (and the HTML, which reads the same rows) says what an
    # hour of data is: 3,600 images for an image corpus, an hour of video for video
    from trainplan.present.render import section_rows

    images = build_report(load_workload("examples/imagenet-vit.toml"))
    labels = [label for s in ("pipeline", "bill") for label, _, _ in section_rows(images, s)]
    assert "transport per 3,600 images" in labels and "frames per 3,600 images" in labels
    assert not any("hour of data" in label for label in labels)
    video = build_report(load_workload(None))
    labels = [label for s in ("pipeline", "bill") for label, _, _ in section_rows(video, s)]
    assert "transport per hour of video" in labels


def test_the_html_bill_chart_names_the_datas_unit():
    # the bill chart's title and axis say "per 3,600 images" for an image corpus, as the tables do
    from trainplan.present.html import bill_plot

    svg = bill_plot(build_report(load_workload("examples/imagenet-vit.toml")))
    assert "3,600 images" in svg and "hour of data" not in svg
