"""The interactive page of `trainplan ui` (docs/index.md): a FastAPI app over plan.build_report.

The page (static/index.html, app.js, style.css, shipped in the package, no CDN)
sends every change of a slider or selector to `POST /api/plan` as dotted workload
keys, the same names `--set` takes, and draws what comes back. Nothing is
computed in the browser: the numbers are those of `trainplan plan`.

    POST /api/plan   {"set": {"cluster.cores": 16, "data.bitrate": "8 Mbit/s"}}
                     optionally "config": "<the text of a workload TOML file>" (uploaded
                     content) or "workload": "<the name of a file given to `trainplan ui`>"
                     as the base the overrides apply to
                     -> the report of plan.build_report, plus "series": busy fraction
                        and binding stage against CPU cores for the plot
                     bad input -> 422 {"detail": "<the one-line UserError message>", "key": "..."}
    GET  /api/options catalogue accelerators, access patterns, resolutions, the defaults,
                     the workload files given on the command line
    GET  /           the page; /static/* its assets

Safe to leave running (issue 16): a request never names a file to read (model.hf_config and
any other path are refused; only the files given on the command line, and the config.json
each names, are read); only requests whose Host is 127.0.0.1, localhost or [::1] with the
server's port are answered (a DNS-rebinding page gets 403); every response carries
Content-Security-Policy default-src 'self', X-Frame-Options DENY and X-Content-Type-Options
nosniff; a request body is at most MAX_BODY_BYTES (413 beyond); JSON nested deeper than
limits.MAX_NESTING is refused (422); no path or body gives a 500.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

import numpy as np

try:  # fastapi resolves the endpoint's annotations in this module's globals
    from starlette.requests import Request
except ImportError:  # pragma: no cover - the `ui` extra is absent; create_app says which to install
    Request = Any  # type: ignore[misc,assignment]

from trainplan.planning import evaluate as plan_mod
from trainplan.planning.answer import data_unit
from trainplan.errors import UserError
from trainplan.quantities import json_safe
from trainplan.workload.load import load_workload, workload_of_document
from trainplan.workload.schema import DataSection, Workload
from trainplan.workload.codecs import FRAME_KINDS

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


#: The largest request body accepted (bytes): a workload file is at most 1 MiB
#: (limits.MAX_BYTES["workload"]), uploaded inside a JSON string that may escape it.
MAX_BODY_BYTES = 2 * 2**20
#: Keys whose value is a file path: never taken from a request.
FILE_KEYS = frozenset({"model.hf_config"})
#: Headers of every response.
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", b"default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-resource-policy", b"same-origin"),
)
#: The port the page is served on when none is given (trainplan ui's default).
DEFAULT_PORT = 8765


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
        if key.strip() in FILE_KEYS:
            raise UserError(key.strip(), "the page reads no file named in a request: give the model's shape "
                            "(model.layers, model.width ...) or start `trainplan ui WORKLOAD.toml` with a "
                            "workload that names its config.json")
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (int, float)):
            from trainplan import units

            units.number(value, key)  # the numeric boundary: a 401-digit integer is a 422, not a 500 (issue 29)
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


def workload_of_request(settings: Any, config: Any = None, workload: Any = None,
                        files: dict[str, Path] | None = None) -> Workload:
    """The workload of a request: uploaded TOML text (`config`) or a file given on the command
    line (`workload`, by name), or the built-in default; then the overrides of `set`."""
    from trainplan import limits
    from trainplan.workload import schema

    overrides = overrides_from_json(settings)
    from trainplan.workload.load import check_each_key_once

    check_each_key_once(overrides, '"set"')  # "model.width" and "model.width " are one key
    files = files or {}
    if config is not None and workload is not None:
        raise UserError("request", "expected at most one of config (uploaded text) and workload (a file name)")
    if workload is not None:
        if not isinstance(workload, str) or workload not in files:
            choices = ", ".join(sorted(files)) or "none were given to `trainplan ui`"
            raise UserError("workload", f"expected the name of a workload file given on the command line "
                            f"({choices})")
        return load_workload(files[workload], overrides)
    if config is None:
        return load_workload(None, overrides)
    if not isinstance(config, str):
        raise UserError("config", "expected the text of a workload TOML file")
    if len(config.encode("utf-8", "surrogatepass")) > limits.MAX_BYTES["workload"]:
        raise UserError("config", f"expected a workload of at most {limits.MAX_BYTES['workload'] // 2**20} MiB")
    doc = limits.loads_toml(config, "config")
    keys = {k for k, _, _ in schema._dotted(doc)}
    bad = sorted(keys & FILE_KEYS)
    if bad:
        raise UserError(bad[0], "the page reads no file named in a request: give the model's shape, or start "
                        "`trainplan ui WORKLOAD.toml` with the workload that names its config.json")
    # read as the command reads a file: its [measured] tables (a `data inspect --output` file), overrides,
    # provenance (the upload's keys are the person's, as a file's are)
    return workload_of_document(doc, overrides, label="(uploaded on the page)")


def plan_response(settings: Any, config: Any = None, workload: Any = None,
                  files: dict[str, Path] | None = None) -> dict[str, Any]:
    """The JSON of POST /api/plan: build_report for these overrides, plus the plot's series."""
    w = workload_of_request(settings, config, workload, files)
    report = plan_mod.build_report(w)
    p = report["pipeline"]
    needed = p["cores_needed"] if p["cores_needed"] is not None else math.inf
    report["series"] = cores_series(w, w.cluster.cores, needed) if w.data.kind in FRAME_KINDS else None
    report["display"] = display_of(report)
    report["first_screen"] = first_screen_of(report)
    report["controls"] = controls_of(w, report)
    report["memory_chart"] = memory_chart_of(report)
    report["layout_text"] = layout_text_of(report)
    return report


def memory_chart_of(report: dict[str, Any]) -> dict[str, Any]:
    """Per-device memory by part against the card, as the HTML report draws it (present/html.py)."""
    from trainplan.present.html import memory_parts

    return memory_parts(report)


#: The layout's degrees in words, in the order the first screen names them.
LAYOUT_WORDS = (("tensor", "tensor-parallel"), ("pipeline", "pipeline stages"), ("context", "context-parallel"),
                ("expert", "expert-parallel"), ("data", "data-parallel"))


def layout_text_of(report: dict[str, Any]) -> str:
    """The layout in words: the parallel degrees, the micro-batch, ZeRO and recomputation."""
    lay = report.get("parallel", {}).get("layout")
    if not isinstance(lay, dict):
        return "one device, no layout"
    name = " x ".join(f"{word} {lay[key]}" for key, word in LAYOUT_WORDS if lay.get(key, 1) > 1) or "one device"
    return (f"{name}; micro-batch {lay.get('micro_batch')} x {lay.get('micro_batches')} per step; "
            f"ZeRO stage {lay.get('zero')}; recomputation {lay.get('recompute')}")


def first_screen_of(report: dict[str, Any]) -> list[dict[str, str]]:
    """The report's `answer` (planning/answer.py) as label/text pairs: Fits? / Time / Cost / Waits on /
    Measure / Layout / Network / Decide, the lines of the terminal's first screen and the HTML report."""
    from trainplan.present.html import answer_lines

    return [{"label": label, "text": text} for label, text in answer_lines(report)]


#: The page's controls by workload key: what it shows for the chosen workload, so that a slider
#: starts at the file's value and only the controls a person moves are sent back.
CONTROL_KEYS = ("data.cameras", "data.width", "data.height", "data.fps", "data.access", "cluster.cores",
                "cluster.nvdec", "cluster.count", "prices.accelerator_hour", "prices.core_hour")


def controls_of(w: Workload, report: dict[str, Any]) -> dict[str, Any]:
    """The chosen workload's value of each control of the page; `model.params` is the planned count
    (from config.json, a shape or the file), locked where the file names a config.json or a shape
    (moving it would contradict the file); `cluster.accelerator` is None for an inline device."""
    out: dict[str, Any] = {}
    for key in CONTROL_KEYS:
        section, name = key.split(".")
        out[key] = getattr(getattr(w, section), name)
    acc = w.cluster.accelerator
    out["cluster.accelerator"] = acc.strip().lower() if isinstance(acc, str) else None
    out["cluster.accelerator_name"] = report["workload"]["accelerator_name"]
    out["data.kind"] = w.data.kind
    out["data.unit"] = data_unit(w.data.kind)  # what the bill is counted per, in words
    out["model.params"] = report["workload"]["params"]
    from trainplan.present.render import applies

    out["serving"] = applies(report, "serving")  # the workload describes serving: the page shows it
    m = w.model
    out["model.params_locked"] = ("from the model's config.json" if m.hf_config is not None
                                  else "from the model's shape in the file" if m.layers is not None and m.params is None
                                  else None)
    return out


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


def _static_names() -> dict[str, str]:
    """The page's assets by name -> media type: only these are served."""
    folder = resources.files("trainplan.interfaces").joinpath("static")
    out = {}
    for entry in folder.iterdir():
        suffix = entry.name[entry.name.rfind("."):] if "." in entry.name else ""
        if entry.is_file() and suffix in _MEDIA_TYPES and not entry.name.startswith("."):
            out[entry.name] = _MEDIA_TYPES[suffix]
    return out


def _static_text(name: str) -> str:
    return resources.files("trainplan.interfaces").joinpath("static").joinpath(name).read_text(encoding="utf-8")


_MEDIA_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}


def allowed_hosts(port: int) -> frozenset[str]:
    """Host headers the page answers: loopback names with the server's port."""
    return frozenset(f"{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]"))


class Guard:
    """ASGI middleware: the Host check, the body cap, the security headers, and no 500 escaping
    to the client as a traceback (issue 16)."""

    def __init__(self, app: Any, port: int, max_body: int = MAX_BODY_BYTES) -> None:
        self.app, self.hosts, self.max_body = app, allowed_hosts(port), max_body

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets
            return
        raw_headers = [(k.lower(), v) for k, v in scope.get("headers", [])]
        headers = dict(raw_headers)
        if sum(1 for k, _ in raw_headers if k == b"host") > 1:  # which one is meant is anyone's guess
            await _plain(send, 400, "host: expected one Host header")
            return
        host = headers.get(b"host", b"").decode("latin-1").strip().lower()
        if host not in self.hosts:
            await _plain(send, 403, "host: this page answers only 127.0.0.1, localhost or [::1] with its port")
            return
        refusal = _cross_site(scope.get("method", "GET"), headers, self.hosts)
        if refusal is not None:
            await _plain(send, *refusal)
            return
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await _plain(send, 413, f"request: expected a body of at most {self.max_body} bytes")
            return
        body = b""
        more = True
        while more:
            try:  # a body that trickles in is cut off: a slow client holds no connection open (issue 29)
                message = await asyncio.wait_for(receive(), READ_TIMEOUT_SECONDS)
            except asyncio.TimeoutError:
                await _plain(send, 408, f"request: expected the body within {READ_TIMEOUT_SECONDS:g} s")
                return
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_body:
                await _plain(send, 413, f"request: expected a body of at most {self.max_body} bytes")
                return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        started = False

        async def with_headers(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                names = {k.lower() for k, _ in message.get("headers", [])}
                message = {**message, "headers": [*message.get("headers", []),
                                                  *[(k, v) for k, v in SECURITY_HEADERS if k not in names]]}
            await send(message)

        try:
            await self.app(scope, replay, with_headers)
        except Exception as err:  # noqa: BLE001 - a bug: one line, never a traceback to the client
            if not started:
                await _plain(send, 500, f"internal error: {type(err).__name__}")


#: Content types a page on another site can POST without asking first (a form, or text/plain):
#: the API takes JSON only, so a cross-site form cannot make the server compute (issue 29).
FORM_TYPES = frozenset({b"text/plain", b"application/x-www-form-urlencoded", b"multipart/form-data"})
#: Seconds a client has to send a request's headers, and then its body: a page sends both in
#: milliseconds; ten seconds leave room for a slow link and close what a slow-loris client holds open.
READ_TIMEOUT_SECONDS = 10.0


def _cross_site(method: str, headers: dict[bytes, bytes], hosts: frozenset[str]) -> tuple[int, str] | None:
    """(status, detail) refusing a request another site's page made, or None. A request that changes or
    computes anything (not GET or HEAD) must come from the page's own origin when it names one (Origin,
    Sec-Fetch-Site), and must be JSON: browsers send a cross-site JSON request only after asking (CORS),
    which this server never grants."""
    if method in ("GET", "HEAD"):
        return None
    origin = headers.get(b"origin")
    if origin is not None and origin.decode("latin-1").strip().lower() not in {f"http://{h}" for h in hosts}:
        return 403, "origin: this page answers requests from its own origin only"
    if headers.get(b"sec-fetch-site", b"").strip().lower() == b"cross-site":
        return 403, "origin: this page answers requests from its own origin only (Sec-Fetch-Site: cross-site)"
    kind = headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower()
    length = headers.get(b"content-length", b"0").strip()
    has_body = (not length.isdigit() or int(length) > 0) or b"transfer-encoding" in headers
    # a body is JSON, said so (a body sent as application/xml or without a type is not read as JSON: issue 29);
    # an empty POST plans the default workload
    if kind in FORM_TYPES or (has_body and kind != b"application/json"):
        return 415, "request: expected content-type application/json"
    return None


def http_protocol() -> type:
    """uvicorn's h11 protocol with the security headers on its own 400s (a missing Host, a malformed
    request) and a deadline for a request's headers: a connection that has not sent a whole request
    READ_TIMEOUT_SECONDS after its first byte is closed (issue 29). For uvicorn.Config(http=...)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        _deadline: Any = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            if self._deadline is None:
                self._deadline = self.loop.call_later(READ_TIMEOUT_SECONDS, self._too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _answering(self) -> bool:
            return self.cycle is not None and not self.cycle.response_complete

        def _too_slow(self) -> None:
            self._deadline = None
            if not self._answering() and not self.transport.is_closing():
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            if not self._answering():
                self._arm()  # a request begins (or goes on arriving): its headers have a deadline
            super().data_received(data)
            if self._answering():
                self._disarm()  # a whole request arrived; Guard bounds its body

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            import h11

            body = json.dumps({"detail": f"request: {msg}", "key": "request"}).encode("utf-8")
            event = h11.Response(status_code=400, reason=b"Bad Request", headers=[
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"), *SECURITY_HEADERS])
            try:
                self.transport.write(self.conn.send(event))
                self.transport.write(self.conn.send(h11.Data(data=body)))
                self.transport.write(self.conn.send(h11.EndOfMessage()))
            except h11.LocalProtocolError:  # the connection's state forbids a response: just close it
                pass
            self.transport.close()

    return GuardedH11Protocol


async def _plain(send: Any, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail, "key": detail.split(":", 1)[0]}).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})


def _workload_files(files: Iterable[str | Path]) -> tuple[dict[str, Path], set[str]]:
    """(the workload files by the name a request chooses them by, the real paths a request may read): each
    file and the config.json it names, read now so that a bad one is refused by the command, with one line."""
    workloads: dict[str, Path] = {}
    readable: set[str] = set()
    for f in files:
        path = Path(f)
        w = load_workload(path)  # a bad file is refused now, by the command, with one line
        plan_mod.resolve_model(w)  # and its config.json, read now (a FIFO or a bad file is refused here)
        name = path.name if path.name not in workloads else str(path)
        workloads[name] = path
        readable.add(os.path.realpath(path))
        if w.model.hf_config is not None:
            config = w.base_dir / w.model.hf_config
            readable.update({os.path.realpath(config), os.path.realpath(config / "config.json")})
    return workloads, readable


def _answer_errors(app: Any) -> None:
    """Nothing: `app` answers a UserError, a malformed request and an HTTP error with JSON {detail, key}."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

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

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Any, err: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(status_code=err.status_code, content={"detail": str(err.detail), "key": "path"})


def create_app(port: int = DEFAULT_PORT, files: Iterable[str | Path] = ()) -> Any:
    """The FastAPI application (fastapi is the optional `ui` dependency, imported here), behind
    Guard. `port`: the port it is served on (the Host check). `files`: workload files a request
    may choose by name; they, and the config.json each names, are the only files read."""
    from fastapi import FastAPI, HTTPException
    from fastapi.responses import HTMLResponse, JSONResponse, Response

    from trainplan import limits

    workloads, readable = _workload_files(files)
    assets = _static_names()

    app = FastAPI(title="trainplan", docs_url=None, redoc_url=None, openapi_url=None)
    _answer_errors(app)

    @app.post("/api/plan")
    async def api_plan(request: Request) -> JSONResponse:
        raw = await request.body()
        if raw.strip():
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise UserError("request", "expected a UTF-8 JSON body") from None
            body = limits.loads_json(text, "request")
        else:
            body = {}  # no body at all: the default plan
        if not isinstance(body, dict):  # null, a list, a number: wrongly shaped, as is a wrong field
            raise UserError("request", 'expected a JSON object such as {"set": {"cluster.cores": 16}}')
        unknown = sorted(set(body) - {"set", "config", "workload"})
        if unknown:
            raise UserError(str(unknown[0]), 'unknown field; expected {"set": {...}} and optionally '
                            '"config" (TOML text) or "workload" (a file given on the command line)')
        from starlette.concurrency import run_in_threadpool

        def evaluate() -> dict[str, Any]:
            with limits.only_files(readable), np.errstate(all="ignore"):
                return json_safe(plan_response(body.get("set"), body.get("config"), body.get("workload"),
                                               workloads))

        return JSONResponse(await run_in_threadpool(evaluate))

    @app.api_route("/api/options", methods=["GET", "HEAD"])
    def api_options() -> JSONResponse:
        with limits.only_files(readable):
            out = options()
        out["workloads"] = list(workloads)  # in the order given: the first is the one the page opens on
        return JSONResponse(json_safe(out))

    @app.api_route("/favicon.ico", methods=["GET", "HEAD"])
    def favicon() -> Response:
        return Response(status_code=204)  # no icon, and no 404 in the browser's console

    @app.api_route("/", methods=["GET", "HEAD"], response_class=HTMLResponse)
    def index() -> HTMLResponse:
        return HTMLResponse(_static_text("index.html"))

    @app.api_route("/static/{name:path}", methods=["GET", "HEAD"])
    def static(name: str) -> Response:
        if name not in assets:  # only the page's own files: no path, no NUL, no long name reaches a read
            raise HTTPException(status_code=404, detail="no such file")
        return Response(_static_text(name), media_type=assets[name], headers={"Cache-Control": "no-cache"})

    return Guard(app, port)
