"""The torchcodec path of `trainplan probe decode PATH` (issue 14), against PyAV as the outside implementation.

The frames torchcodec hands the probe are compared with PyAV's for the same files: the same count,
and pixel for pixel close once both are RGB (at full size both use swscale's YUV-to-RGB, so they
agree to the rounding; resized, torchcodec converts then resizes while PyAV resizes in the
conversion, so they differ by interpolation only, far less than one frame differs from the next).
Counts are checked against the files' construction (a known frame count and keyframe interval).
These tests skip, saying why, where torchcodec does not load (not installed, or FFmpeg's shared
libraries absent); the absence and the load failures themselves are simulated and checked always."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from trainplan.measure import probe

GOPS = (10, 20)
FRAMES = 60
WIDTH, HEIGHT = 256, 144

TC, WHY = probe.torchcodec_or_reason()
needs_torchcodec = pytest.mark.skipif(TC is None, reason=WHY or "torchcodec unavailable")


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("videos")
    for i, gop in enumerate(GOPS):
        clip = probe.synthesize_clip(probe.ClipFormat(WIDTH, HEIGHT, 30.0, 300e3, gop), FRAMES, seed=i)
        (d / f"v{i}.mp4").write_bytes(clip.data)
    return d


def pyav_frames(path: Path, postprocess: str, side: int) -> np.ndarray:
    container, stream = probe.open_single_threaded(str(path))
    with container:
        return np.stack([probe.postprocess_frame(f, postprocess, side) for f in container.decode(stream)])


def torchcodec_frames(path: Path, postprocess: str, side: int, indices: list[int] | None = None) -> np.ndarray:
    dec = probe.open_torchcodec(path, side=side, postprocess=postprocess)
    if indices is None:
        batch = dec.get_frames_in_range(0, len(dec)).data
    else:
        batch = np.stack([dec.get_frame_at(i).data.numpy() for i in indices])
    return np.asarray(batch).transpose(0, 2, 3, 1)  # N x C x H x W -> N x H x W x C, as PyAV's rgb24


@needs_torchcodec
def test_torchcodec_frames_match_pyav(videos):
    for path in sorted(videos.glob("*.mp4")):
        ours = pyav_frames(path, "rgb", 0)
        theirs = torchcodec_frames(path, "rgb", 0)
        assert theirs.shape == ours.shape == (FRAMES, HEIGHT, WIDTH, 3)
        # the scale of a real difference: one frame against the next
        step = np.abs(ours[1:].astype(int) - ours[:-1].astype(int)).mean()
        full = np.abs(theirs.astype(int) - ours.astype(int)).mean(axis=(1, 2, 3))
        assert full.max() <= 1.0 < step  # both swscale's BT.601 conversion: equal up to rounding
        side = 64
        small_ours, small_theirs = pyav_frames(path, "rgb_resize", side), torchcodec_frames(path, "rgb_resize", side)
        assert small_theirs.shape == small_ours.shape == (FRAMES, side, side, 3)
        small = np.abs(small_theirs.astype(int) - small_ours.astype(int)).mean(axis=(1, 2, 3))
        assert small.max() < step / 2
        # each frame is nearer its PyAV counterpart than PyAV's next frame is: same frames, same order
        step_small = np.abs(small_ours[1:].astype(int) - small_ours[:-1].astype(int)).mean(axis=(1, 2, 3))
        assert (small[:-1] < step_small).all()


@needs_torchcodec
def test_torchcodec_random_access_returns_the_target_frame(videos):
    """Seeking: the frame torchcodec returns for a target index is the one PyAV reaches in order."""
    for gop, path in zip(GOPS, sorted(videos.glob("*.mp4"))):
        ours = pyav_frames(path, "rgb", 0)
        targets = probe.random_targets(FRAMES, gop, 16, seed=5)
        theirs = torchcodec_frames(path, "rgb", 0, targets)
        diff = np.abs(theirs.astype(int) - ours[targets].astype(int)).mean(axis=(1, 2, 3))
        assert diff.max() <= 1.0


@needs_torchcodec
def test_torchcodec_probe_counts(videos):
    files = sorted(videos.glob("*.mp4"))
    seq = probe.decode_files_torchcodec(files, access="sequential", side=64)
    assert (seq.decoder, seq.device, seq.files) == ("torchcodec", "cpu", len(files))
    assert seq.frames_decoded == seq.frames_used == FRAMES * len(files)
    assert seq.frames_decoded_per_frame_used == 1.0 and seq.expected_frames_decoded_per_frame_used == 1.0
    samples = 16
    rnd = probe.decode_files_torchcodec(files, access="random", side=64, samples=samples, seed=3)
    assert rnd.frames_used == samples * len(files)
    # torchcodec does not expose how many frames its seeks decoded: not counted, and said so
    assert rnd.frames_decoded_per_frame_used is None
    g_formula = np.mean([(gop + 1) / 2 for gop in GOPS])
    assert rnd.expected_frames_decoded_per_frame_used == pytest.approx(g_formula)
    assert rnd.core_fps_1080p == pytest.approx(
        rnd.frames_used / rnd.cpu_seconds * g_formula * WIDTH * HEIGHT / (1920 * 1080))
    assert seq.core_fps_1080p == pytest.approx(seq.frames_used / seq.cpu_seconds * WIDTH * HEIGHT / (1920 * 1080))


@needs_torchcodec
def test_probe_decode_cli_runs_torchcodec(videos, cli):
    res = cli("probe", "decode", str(videos), "--set", "data.side=64", "--decoders", "1", "-f", "json")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    rows = {(r["decoder"], r["device"], r["access"]): r for r in d["results"]}
    for access in ("sequential", "random"):
        assert rows[("torchcodec", "cpu", access)]["frames_used"] == rows[("pyav", "cpu", access)]["frames_used"]
    assert not [s for s in d["skipped"] if s.startswith("torchcodec:")]
    from trainplan.interfaces.commands.probe import decode_files_table

    d["files_found"] = len(d["files"])
    table = decode_files_table(d)
    assert "torchcodec cpu" in table


def test_cuda_path_skips_in_one_line_without_gpu(videos):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the NVDEC path runs instead of skipping")
    with pytest.raises(probe.ProbeSkipped) as why:
        probe.decode_files_torchcodec(sorted(videos.glob("*.mp4")), device="cuda")
    assert str(why.value).startswith("torchcodec") and "\n" not in str(why.value)


def _hide_torchcodec(monkeypatch) -> None:
    for name in [m for m in sys.modules if m == "torchcodec" or m.startswith("torchcodec.")]:
        monkeypatch.delitem(sys.modules, name)


def test_torchcodec_absent_skips_in_one_line(videos, monkeypatch):
    _hide_torchcodec(monkeypatch)
    monkeypatch.setitem(sys.modules, "torchcodec", None)  # import torchcodec -> ModuleNotFoundError
    tc, why = probe.torchcodec_or_reason()
    assert tc is None and why.startswith("torchcodec: not installed") and "trainplan[decode]" in why
    with pytest.raises(probe.ProbeSkipped, match="^torchcodec: not installed"):
        probe.decode_files_torchcodec(sorted(videos.glob("*.mp4")))
    d = probe.decode_user_files(sorted(videos.glob("*.mp4")), side=64, contention_seconds=0)
    assert why in d["skipped"] and {r["decoder"] for r in d["results"]} == {"pyav"}
    assert all("\n" not in s for s in d["skipped"])


class _FailingImport:
    """A finder that makes `import torchcodec` fail as a broken install does."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201 - importlib's protocol
        if name == "torchcodec" or name.startswith("torchcodec."):
            raise self.error
        return None


def _failing(monkeypatch, error: BaseException) -> tuple[object, str]:
    _hide_torchcodec(monkeypatch)
    monkeypatch.setattr(sys, "meta_path", [_FailingImport(error), *sys.meta_path])
    return probe.torchcodec_or_reason()


def test_torchcodec_without_ffmpeg_names_the_missing_libraries(monkeypatch):
    # torchcodec tries FFmpeg 8 down to 4 and raises one RuntimeError listing every attempt's error
    attempts = "\n".join(f"FFmpeg version {v}:\nOSError: libavutil.so.{v + 52}: cannot open shared object file: "
                         "No such file or directory" for v in (8, 7, 6, 5, 4))
    tc, why = _failing(monkeypatch, RuntimeError(f"Could not load libtorchcodec. Likely causes:\n{attempts}"))
    assert tc is None and "\n" not in why
    assert why.startswith("torchcodec: installed but FFmpeg's shared libraries are missing")
    assert "libavutil.so.60" in why and "libavutil.so.56" in why and "apt-get install ffmpeg" in why


def test_torchcodec_cuda_build_on_cpu_torch_says_so(monkeypatch):
    cause = OSError("libnvrtc.so.13: cannot open shared object file: No such file or directory")
    error = OSError("Could not load this library: .../torchcodec/libtorchcodec_image.so")
    error.__cause__ = cause
    tc, why = _failing(monkeypatch, error)
    assert tc is None and "\n" not in why
    assert "built for CUDA" in why and "libnvrtc.so.13" in why and "trainplan[decode]" in why
