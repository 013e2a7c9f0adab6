"""Probes: measure on this machine what the accounts otherwise assume (docs/measurement.md).

Each probe is a function that runs a short, self-contained measurement and returns a
frozen dataclass of plain floats in SI units (frames/s, bytes/s, FLOP/s) together with
the settings it ran under, so that a calibration file can record both. Nothing here
prints; `trainplan.interfaces.commands.probe` renders and `trainplan.workload.calibration` records.

- `decode`: synthesise an H.264 clip in the workload's own format with PyAV (its wheel
  carries libx264; no network), decode it single-threaded, and time it in CPU-seconds
  (`time.process_time`) and wall seconds. Sequential access decodes every frame in
  order; random access seeks to the keyframe before a random target and decodes forward
  to it, so it also measures frames decoded per frame used (docs/pipeline-and-bill.md: g = (G+1)/2).
- `read`: bytes/s reading a file on a given path, cold (the file's pages dropped from
  the page cache with posix_fadvise) and warm (read again at once).
- `matmul`: achieved FLOP/s of a square matmul with numpy, and with torch on the CPU
  and on a GPU when torch and a GPU are present.
- `transfer`: host-to-device bytes/s with torch on a GPU (pinned and pageable memory).
- `allreduce`: bytes/s of an all-reduce with torch.distributed: gloo with several
  local processes here, NCCL when launched by torchrun on a GPU cluster.

Probes that need torch or a GPU raise `ProbeSkipped` with a clear reason when it is absent.

Each probe lives in the module of what it measures: `decode.py`, `read.py`, `accelerator.py`
(matmul, transfer), `allreduce.py`; `host.py` says what machine ran them. This module is what
`trainplan probe all` collects (ProbeSet) and the one name the commands import the probes by.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from trainplan.measure.host import (  # noqa: F401 (re-exported: probe.NAME is the commands' name)
    ProbeSkipped, require_torch, _torch_or_none, cpu_model, machine)
from trainplan.measure.decode import (  # noqa: F401 (re-exported: probe.NAME is the commands' name)
    Access, CUDA_ONLY_LIBRARIES, Clip, ClipFormat, ContentionRow, DecodeProbe, DecodeResult, FileDecode,
    HANDOFF_TEXT, Handoff, PIXELS_1080P, POSTPROCESS_TEXT, Postprocess, TORCHCODEC_BATCH, _Handoff, _av_version,
    _codec_of, _contention_worker, _dominant_codec, _file_facts, _file_result, _first_line, _fps_rational,
    _pixels_weighted, _result, _torchcodec_load_failure, cores_present, decode, decode_contention,
    decode_files_pyav, decode_files_torchcodec, decode_images, decode_random, decode_sequential,
    decode_user_files, from_1080p, image_decoder, open_single_threaded, open_torchcodec, postprocess_frame,
    random_targets, synthesize_clip, synthetic_frames, to_1080p, torchcodec_or_reason)
from trainplan.measure.read import (  # noqa: F401 (re-exported: probe.NAME is the commands' name)
    ReadResult, _drop_from_cache, _timed_read, _write_test_file, read)
from trainplan.measure.accelerator import (  # noqa: F401 (re-exported: probe.NAME is the commands' name)
    MatmulResult, TransferResult, _blas_threads, _repeat_until, matmul, matmul_numpy, matmul_torch, transfer)
from trainplan.measure.allreduce import (  # noqa: F401 (re-exported: probe.NAME is the commands' name)
    AllreduceResult, _allreduce_timed, _allreduce_worker, _free_port, allreduce, join_torchrun_job,
    leave_torchrun_job, run_local_ranks)


@dataclass(frozen=True)
class Skipped:
    probe: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ProbeSet:
    """What `trainplan probe all` collects: each result, or why it was skipped."""

    decode: DecodeProbe | None = None
    read: ReadResult | None = None
    matmul: list[MatmulResult] = field(default_factory=list)
    transfer: TransferResult | None = None
    allreduce: AllreduceResult | None = None
    skipped: list[Skipped] = field(default_factory=list)
