"""The interactive page of `trainplan ui` (docs/index.md): a FastAPI app over plan.build_report.

The page (static/index.html, app.js, style.css, shipped in the package, no CDN)
sends every change of a slider or selector to `POST /api/plan` as dotted workload
keys, the same names `--set` takes, and draws what comes back. Nothing is
computed in the browser: the numbers are those of `trainplan plan`.

    POST /api/plan   {"set": {"cluster.cores": 16, "data.bitrate": "8 Mbit/s"}}
                     -> the report of plan.build_report, plus "series": busy fraction
                        and binding stage against CPU cores for the plot
                     bad input -> 422 {"detail": "<the one-line UserError message>", "key": "..."}
    GET  /api/options catalogue accelerators, access patterns, resolutions, the defaults
    GET  /           the page; /static/* its assets
"""

from __future__ import annotations

import json
import math
from importlib import resources
from typing import Any

import numpy as np

from trainplan.planning import evaluate as plan_mod
from trainplan.errors import UserError
from trainplan.workload.schema import DataSection, Workload, load_workload

#: Resolutions offered by the page's selector (width, height, label).
RESOLUTIONS: tuple[tuple[int, int, str], ...] = (
    (640, 480, "480p"),
    (1280, 720, "720p"),
    (1920, 1080, "1080p"),
    (2560, 1440, "1440p"),
    (3840, 2160, "2160p (4K)"),
)

#: The plot's x axis: CPU cores from 0 to at least this many.
SERIES_MIN_CORES = 64
#: At most this many points in the plotted series.
SERIES_MAX_POINTS = 257
#: The x axis reaches past the cores needed by this factor, so the knee is in view.
SERIES_PAST_NEEDED = 1.25
#: ... but never past this many cores (a tiny model on 4K video needs thousands).
SERIES_MAX_CORES = 4096


def overrides_from_json(settings: Any) -> list[str]:
    """{"cluster.cores": 16, "cluster.nvdec": true, "data.bitrate": "8 Mbit/s"} -> KEY=VALUE strings.

    Values go through the same parser as `--set` (TOML, else a plain string); strings
    are quoted so that "h100-sxm" or "16" stay what the page sent.
    """
    if settings is None:
        return []
    if not isinstance(settings, dict):
        raise UserError("set", f"expected an object of dotted workload keys to values, got {type(settings).__name__}")
    out = []
    for key, value in settings.items():
        if not isinstance(key, str) or not key.strip():
            raise UserError("set", f"expected dotted workload keys such as cluster.cores, got {key!r}")
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (int, float)):
            if not math.isfinite(value):
                raise UserError(key, f"expected a finite number, got {value!r}")
            text = repr(value)
        elif isinstance(value, str):
            text = json.dumps(value)  # a TOML basic string
        else:
            raise UserError(key, f"expected a number, a string or true/false, got {json.dumps(value)}")
        out.append(f"{key}={text}")
    return out


def _finite_list(values: Any) -> list[float | None]:
    return [float(v) if math.isfinite(v) else None for v in np.asarray(values, dtype=float).ravel()]


def cores_series(w: Workload, cores_now: float, cores_needed: float) -> dict[str, Any]:
    """Busy fraction and binding stage against CPU cores, the rest of the workload held
    fixed: one vectorised call of pipeline.pipeline_arrays."""
    top = max(float(SERIES_MIN_CORES), float(cores_now))
    if math.isfinite(cores_needed):
        top = max(top, min(float(SERIES_MAX_CORES), cores_needed * SERIES_PAST_NEEDED))
    step = max(1, math.ceil(top / (SERIES_MAX_POINTS - 1)))
    cores = np.arange(0, math.ceil(top / step) * step + step, step, dtype=float)
    from trainplan.planning.inputs import PlanInputs

    figures = plan_mod.evaluate(PlanInputs.of(w, {"cluster.cores": cores}), ["pipeline.busy", "pipeline.bottleneck"])
    busy = np.broadcast_to(figures["pipeline.busy"], cores.shape)
    bottleneck = np.broadcast_to(figures["pipeline.bottleneck"], cores.shape)
    return {
        "x": "cluster.cores",
        "cores": _finite_list(cores),
        "busy": _finite_list(busy),
        "bottleneck": [str(b) for b in bottleneck],
    }


def plan_response(settings: Any) -> dict[str, Any]:
    """The JSON of POST /api/plan: build_report for these overrides, plus the plot's series."""
    w = load_workload(None, overrides_from_json(settings))
    report = plan_mod.build_report(w)
    p = report["pipeline"]
    needed = p["cores_needed"] if p["cores_needed"] is not None else math.inf
    report["series"] = cores_series(w, w.cluster.cores, needed) if w.data.kind == "video" else None
    report["display"] = display_of(report)
    return report


def display_of(report: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Each declared figure's label and text as the CLI writes it (planning/figures.py), for the page."""
    from trainplan.present.render import flatten, format_value, label_of

    return {k: {"label": label_of(k), "text": format_value(k, v)}
            for k, v in flatten({s: report[s] for s in report if isinstance(report[s], dict)}).items()
            if not isinstance(v, list)}


def options() -> dict[str, Any]:
    """What the page's selectors offer, and the defaults they start at."""
    from trainplan.catalogue.accelerators import accelerators

    w = load_workload(None)
    defaults = {
        "data.cameras": w.data.cameras, "data.width": w.data.width, "data.height": w.data.height,
        "data.fps": w.data.fps, "model.params": w.model.params, "cluster.cores": w.cluster.cores,
        "data.access": w.data.access, "cluster.nvdec": w.cluster.nvdec,
        "cluster.accelerator": w.cluster.accelerator, "prices.accelerator_hour": w.prices.accelerator_hour,
        "prices.core_hour": w.prices.core_hour,
    }
    return {
        "accelerators": [{"key": a.key, "name": a.name, "video_decoders": a.video_decoders}
                         for a in accelerators().values()],
        "access": list(DataSection.model_fields["access"].annotation.__args__),  # type: ignore[union-attr]
        "resolutions": [{"width": wd, "height": ht, "label": label} for wd, ht, label in RESOLUTIONS],
        "defaults": defaults,
    }


def _static_text(name: str) -> str:
    return resources.files("trainplan.interfaces").joinpath("static").joinpath(name).read_text(encoding="utf-8")


_MEDIA_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}


def create_app() -> Any:
    """The FastAPI application (fastapi is the optional `ui` dependency, imported here)."""
    from fastapi import Body, FastAPI, HTTPException
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import HTMLResponse, JSONResponse, Response

    app = FastAPI(title="trainplan", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(UserError)
    async def _user_error(_request: Any, err: UserError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": str(err), "key": err.where})

    @app.exception_handler(RequestValidationError)
    async def _bad_request(_request: Any, err: RequestValidationError) -> JSONResponse:
        first = err.errors()[0] if err.errors() else {}
        msg = first.get("msg", "malformed request")
        return JSONResponse(status_code=422, content={
            "detail": f"request: expected a JSON object such as {{\"set\": {{\"cluster.cores\": 16}}}} ({msg})",
            "key": "request"})

    @app.post("/api/plan")
    def api_plan(body: Any = Body(default=None)) -> dict[str, Any]:  # noqa: B008 - FastAPI's idiom
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise UserError("request", 'expected a JSON object such as {"set": {"cluster.cores": 16}}')
        unknown = sorted(set(body) - {"set"})
        if unknown:
            raise UserError(unknown[0], 'unknown field; expected {"set": {...}}')
        return plan_response(body.get("set"))

    @app.get("/api/options")
    def api_options() -> dict[str, Any]:
        return options()

    @app.get("/", response_class=HTMLResponse)
    def index() -> HTMLResponse:
        return HTMLResponse(_static_text("index.html"))

    @app.get("/static/{name}")
    def static(name: str) -> Response:
        suffix = name[name.rfind("."):] if "." in name else ""
        if "/" in name or "\\" in name or name.startswith(".") or suffix not in _MEDIA_TYPES:
            raise HTTPException(status_code=404)
        try:
            text = _static_text(name)
        except (FileNotFoundError, IsADirectoryError):
            raise HTTPException(status_code=404) from None
        return Response(text, media_type=_MEDIA_TYPES[suffix], headers={"Cache-Control": "no-cache"})

    return app
