"""The page's server, second round (issue 29): Origin checked, cross-site forms and text refused,
security headers on the server's own 400s, a read deadline for slow clients, the numeric boundary."""

from __future__ import annotations

import socket
import threading
import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from fastapi.testclient import TestClient  # noqa: E402

from trainplan.interfaces import web  # noqa: E402

PORT = 8765
J = {"content-type": "application/json"}
BODY = b'{"set": {"cluster.cores": 16}}'


@pytest.fixture(scope="module")
def client():
    return TestClient(web.create_app(PORT), base_url=f"http://127.0.0.1:{PORT}")


def _refused(res, status, key):
    assert res.status_code == status, (res.status_code, res.text[:200])
    assert res.json()["key"] == key
    assert res.headers["x-frame-options"] == "DENY" and "default-src 'self'" in res.headers["content-security-policy"]


@pytest.mark.parametrize("headers,status,key", [
    ({**J, "origin": f"http://localhost:{PORT + 2}"}, 403, "origin"),
    ({**J, "origin": "null"}, 403, "origin"),  # a sandboxed frame or a file: page
    ({**J, "origin": f"http://127.0.0.1:{PORT + 1}"}, 403, "origin"),  # another local server
    ({**J, "sec-fetch-site": "cross-site"}, 403, "origin"),
    ({"content-type": "text/plain"}, 415, "request"),
    ({"content-type": "text/plain;charset=UTF-8"}, 415, "request"),
    ({"content-type": "application/x-www-form-urlencoded"}, 415, "request"),
    ({"content-type": "multipart/form-data; boundary=x"}, 415, "request"),
    # a body is JSON, said so: no type, or another one, is not read as JSON (issue 29)
    ({}, 415, "request"),
    ({"content-type": "application/xml"}, 415, "request"),
])
def test_cross_site_posts_are_refused(client, headers, status, key):
    _refused(client.post("/api/plan", content=BODY, headers=headers), status, key)


@pytest.mark.parametrize("origin", [f"http://127.0.0.1:{PORT}", f"http://localhost:{PORT}", None])
def test_the_page_s_own_requests_are_answered(client, origin):
    headers = {**J, **({"origin": origin} if origin else {}), "sec-fetch-site": "same-origin"}
    res = client.post("/api/plan", content=BODY, headers=headers)
    assert res.status_code == 200 and res.json()["workload"]["accelerator"] == "h100-sxm"


def test_a_get_from_anywhere_computes_nothing_and_is_answered(client):
    assert client.get("/api/options", headers={"origin": f"http://localhost:{PORT + 2}"}).status_code == 200


def test_a_401_digit_integer_is_a_422(client):
    res = client.post("/api/plan", content=b'{"set": {"cluster.cores": ' + b"1" * 401 + b"}}", headers=J)
    _refused(res, 422, "cluster.cores")
    assert "float range" in res.json()["detail"]


def test_a_401_digit_integer_sent_as_text_reads_as_the_integer(client):
    # quoted or not, the same number gets the same refusal: its size, not 'inf'
    for value in (b"1" + b"0" * 400, b'"1' + b"0" * 400 + b'"'):
        res = client.post("/api/plan", content=b'{"set": {"cluster.cores": ' + value + b"}}", headers=J)
        _refused(res, 422, "cluster.cores")
        assert res.json()["detail"] == ("cluster.cores: expected a number below 1.8e+308 (float range), "
                                        "got an integer of about 401 digits")


@pytest.mark.parametrize("body", [b"null", b"[]", b"16", b'"set"'])
def test_a_body_that_is_not_an_object_is_a_422(client, body):
    # null is not the default plan: only an empty body is
    res = client.post("/api/plan", content=body, headers=J)
    _refused(res, 422, "request")
    assert res.json()["detail"] == 'request: expected a JSON object such as {"set": {"cluster.cores": 16}}'
    assert client.post("/api/plan", content=b"", headers=J).status_code == 200


def test_a_duplicate_host_is_a_400_with_the_headers(client):
    res = client.get("/api/options", headers=[("host", f"127.0.0.1:{PORT}"), ("host", "evil.example")])
    _refused(res, 400, "host")


@pytest.fixture
def server(monkeypatch):
    """uvicorn with the guarded protocol on a free port, a 1-second read deadline."""
    import uvicorn

    monkeypatch.setattr(web, "READ_TIMEOUT_SECONDS", 1.0)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(web.create_app(port), host="127.0.0.1", port=port, log_level="critical",
                                        http=web.http_protocol()))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.started
    yield port
    srv.should_exit = True
    thread.join(10)


def _exchange(port, data, wait=30.0):
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as conn:
        conn.sendall(data)
        chunks = []
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


@pytest.mark.parametrize("request_bytes", [
    b"GET /api/options HTTP/1.1\r\n\r\n",  # HTTP/1.1 without Host: h11's own 400
    b"GET /api/options HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n",  # malformed
])
def test_the_server_s_own_400s_carry_the_headers(server, request_bytes):
    answer = _exchange(server, request_bytes).decode("latin-1").lower()
    assert answer.startswith("http/1.1 400")
    for name in ("content-security-policy", "x-frame-options: deny", "x-content-type-options: nosniff"):
        assert name in answer, answer


@pytest.mark.parametrize("path", ["/", "/api/options", "/static/app.js"])
def test_head_is_answered_as_get_without_a_body(server, path):
    # GET and HEAD compute nothing (docs/trust.md): HEAD gets GET's status and headers, and no body
    ask = f"{{}} {path} HTTP/1.1\r\nHost: 127.0.0.1:{server}\r\nConnection: close\r\n\r\n"
    got = _exchange(server, ask.format("GET").encode()).decode("utf-8")
    head = _exchange(server, ask.format("HEAD").encode()).decode("utf-8")
    get_head, _, get_body = got.partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 200") and head.endswith("\r\n\r\n") and head.count("\r\n\r\n") == 1
    assert f"content-length: {len(get_body.encode())}\r\n" in head.lower() and get_body
    assert "x-frame-options: deny" in head.lower()


def test_a_slow_client_is_disconnected(server):
    """Half a request line, then nothing: closed after the 1 s deadline (60 s of margin for a busy machine)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server), timeout=60) as conn:
        conn.sendall(b"GET /api/opt")
        assert conn.recv(1024) == b""  # the server closed the connection
    assert time.monotonic() - started >= 0.9


def test_a_slow_body_is_cut_off(server):
    head = (f"POST /api/plan HTTP/1.1\r\nHost: 127.0.0.1:{server}\r\nContent-Type: application/json\r\n"
            "Content-Length: 100\r\n\r\n{").encode()
    answer = _exchange(server, head, wait=60).decode("latin-1")
    assert answer.startswith("HTTP/1.1 408") and "x-frame-options: deny" in answer.lower()
