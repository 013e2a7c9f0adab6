"""Fuzz target for the web API of `trainplan ui` (issue 16): `python fuzz/fuzz_web.py -max_total_time=60`.

Each input becomes one HTTP request to the app of trainplan.interfaces.web (in process,
through fastapi's TestClient): a method, a path (the page's own, near misses, traversal,
NUL, percent-encoding, very long names), a Host header (the loopback names with and
without the port, others), and a body (JSON built from workload keys with hostile values,
file paths for model.hf_config, uploaded TOML, deep nesting, raw bytes). A crash is a 500,
an exception, a response without the security headers, an API answer that is not JSON, or
an answer to a foreign Host that is not 403. The loop, corpus and crash files are
fuzz/_harness.py's.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import Harness, atheris, chooser  # noqa: E402

if atheris is not None:
    with atheris.instrument_imports():
        from trainplan.interfaces import web
        from trainplan.workload import schema
else:
    from trainplan.interfaces import web
    from trainplan.workload import schema

from fastapi.testclient import TestClient  # noqa: E402

warnings.simplefilter("ignore")

PORT = 8765
CLIENT = TestClient(web.create_app(PORT), base_url=f"http://127.0.0.1:{PORT}", raise_server_exceptions=False)
GOOD_HOSTS = [f"127.0.0.1:{PORT}", f"localhost:{PORT}", f"[::1]:{PORT}"]
BAD_HOSTS = ["evil.example", "127.0.0.1", "localhost", f"127.0.0.1:{PORT + 1}", f"evil.example:{PORT}", "",
             f"127.0.0.1:{PORT}.evil.example", "0.0.0.0:8765", "[::1]"]
PATHS = ["/", "/api/plan", "/api/options", "/static/app.js", "/static/style.css", "/static/index.html",
         "/static/app.js%00.css", "/static/" + "a" * 10_000 + ".css", "/static/../web.py", "/static/%2e%2e/web.py",
         "/static/", "/static/.hidden.js", "/static//etc/passwd", "/static/app.js/", "/api/plan/../options",
         "/%ff", "/docs", "/openapi.json", "/" + "x" * 5000, "/static/\u00e9.css", "/static/app.JS"]
METHODS = ["GET", "POST", "PUT", "DELETE", "OPTIONS", "HEAD", "PATCH"]
KEYS = schema.leaf_keys() + ["cluster.accelerator.memory", "cluster.accelerator.peak_flops", "bogus", "", "a.b.c.d"]
VALUES: list[object] = [0, -1, 1, 16, 1e308, -1e308, 5e-324, 2**80, True, False, None, "", "x", "8 Mbit/s", "1e400",
                        "/etc/passwd", "/dev/zero", "/tmp", "\x00", "\x1b[2J", [], [1], {}, {"a": 1}, "h100-sxm",
                        # issue 29: past float range, past 4,300 digits (as JSON text), subnormal, -0
                        10**400, -(10**400), 2**53 + 1, "1" + "0" * 400, "5e-324", -0.0]
ORIGINS = [None, f"http://127.0.0.1:{PORT}", "http://evil.example", "null", f"http://localhost:{PORT + 1}"]
CONTENT_TYPES = ["application/json", "application/json; charset=utf-8", "text/plain", "multipart/form-data; boundary=x",
                 "application/x-www-form-urlencoded", ""]


def _body(rng) -> bytes:  # noqa: ANN001 - a random.Random
    kind = rng.randrange(8)
    if kind == 0:
        depth = rng.choice([5, 40, 3000])
        return b"[" * depth + b"]" * depth
    if kind == 1:
        return rng.randbytes(rng.randrange(64))
    if kind == 2:
        return json.dumps({"config": rng.choice(['[model]\nhf_config = "/etc/hostname"\n', "[cluster]\ncores = 4\n",
                                                 "[[[", "a = " + "[" * 100 + "]" * 100, "\x00"])}).encode()
    if kind == 3:
        return json.dumps({"workload": rng.choice(["/etc/passwd", "w.toml", "", 3, None])}).encode()
    settings = {rng.choice(KEYS): copy.deepcopy(rng.choice(VALUES)) for _ in range(rng.randrange(4))}
    body: object = {"set": settings} if kind != 4 else rng.choice([settings, [settings], "set", 3, None])
    return json.dumps(body).encode()


def one_input(data: bytes) -> None:
    rng = chooser(data)
    method = rng.choice(METHODS) if rng.random() < 0.3 else rng.choice(["GET", "POST"])
    path = rng.choice(PATHS)
    foreign = rng.random() < 0.15
    host = rng.choice(BAD_HOSTS) if foreign else rng.choice(GOOD_HOSTS)
    body = _body(rng) if method in ("POST", "PUT", "PATCH") else b""
    if rng.random() < 0.05:  # an integer of more digits than json.dumps may write
        body = b'{"set": {"cluster.cores": ' + b"7" * rng.choice([401, 4301, 6000]) + b"}}"
    origin = rng.choice(ORIGINS) if rng.random() < 0.3 else None
    kind = rng.choice(CONTENT_TYPES) if rng.random() < 0.3 else "application/json"
    headers = {"host": host, "content-type": kind, **({"origin": origin} if origin else {})}
    res = CLIENT.request(method, path, content=body, headers=headers)
    if res.status_code >= 500:
        raise AssertionError(f"{method} {path[:80]} host={host!r} body={body[:200]!r} -> {res.status_code} {res.text[:200]}")
    for header in ("content-security-policy", "x-frame-options", "x-content-type-options"):
        if header not in res.headers:
            raise AssertionError(f"{method} {path[:80]} -> {res.status_code} without {header}")
    if foreign and res.status_code != 403:
        raise AssertionError(f"host {host!r} answered {res.status_code}")
    cross = origin not in (None, f"http://127.0.0.1:{PORT}") or kind.split(";")[0] in (
        "text/plain", "multipart/form-data", "application/x-www-form-urlencoded")
    if cross and method not in ("GET", "HEAD") and res.status_code < 400:
        raise AssertionError(f"a cross-site {method} (origin {origin!r}, {kind!r}) answered {res.status_code}")
    if path.startswith("/api/") and method != "HEAD":
        res.json()  # an API answer is JSON, whatever the status


if __name__ == "__main__":
    Harness("web", one_input).main()
