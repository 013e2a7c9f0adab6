"""Codec names (the codecs a workload may name and the aliases people type for them), and the kinds of
data that are decoded frame by frame."""

from __future__ import annotations

# Video codec names as users write them (the codec, not the decoder library: AV1 is av1 whether libdav1d
# or libaom decodes it), and the other spellings taken for them.
CODECS = ("h264", "hevc", "av1", "vp9", "vp8", "mpeg4", "mpeg2video", "mjpeg", "prores", "jpeg", "png", "webp")
CODEC_ALIASES = {"avc": "h264", "h.264": "h264", "x264": "h264", "h265": "hevc", "h.265": "hevc", "x265": "hevc",
                 "libdav1d": "av1", "libaom-av1": "av1", "mpeg2": "mpeg2video",
                 "jpg": "jpeg"}

# The data.kind values planned frame by frame: video frames, and images (each one intra-coded frame)
FRAME_KINDS = ("video", "images")
