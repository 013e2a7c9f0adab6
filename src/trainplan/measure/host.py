"""The machine a probe runs on, and what it has (torch, a GPU): shared by every probe."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path
from typing import Any

import numpy as np




class ProbeSkipped(Exception):
    """A probe that cannot run here (no torch, no GPU); the message says why and what would make it run."""


def machine() -> dict[str, Any]:
    """Where a measurement was taken: hostname, CPU model, core count, library versions."""
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count() or 1,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    try:
        affinity = len(os.sched_getaffinity(0))
        info["cpus_usable"] = affinity
    except (AttributeError, OSError):
        pass
    try:
        import av

        info["av"] = av.__version__
    except ImportError:  # pragma: no cover - av is a core dependency
        pass
    torch = _torch_or_none()
    if torch is not None:
        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    return info


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _torch_or_none() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def require_torch(probe: str) -> Any:
    torch = _torch_or_none()
    if torch is None:
        raise ProbeSkipped(f"{probe}: torch is not installed; install the extra with "
                           f"`pip install 'trainplan[torch]'` (or `pip install torch`) to run it")
    return torch
