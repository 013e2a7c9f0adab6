"""The page of `trainplan ui` is safe to leave running (issue 16): the hostile requests of the
issue, each answered without a 500, without reading a file a request names, and with the
security headers.
"""

from __future__ import annotations

import json
import os
import threading

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx", reason="fastapi's TestClient needs httpx (in the [test] extra)")

from fastapi.testclient import TestClient  # noqa: E402

from trainplan.interfaces.web import MAX_BODY_BYTES, create_app  # noqa: E402

PORT = 8765
BASE = f"http://127.0.0.1:{PORT}"
SECRET = "TOPSECRET-4f1d"  # what a file holds that no answer may echo


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(PORT), base_url=BASE, raise_server_exceptions=False)


@pytest.fixture
def secret_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096, "note": SECRET}))
    return path


def _refused(res, key: str, status: int = 422) -> None:
    assert res.status_code == status, (res.status_code, res.text)
    body = res.json()
    assert key in body["key"] or key in body["detail"], body
    assert SECRET not in res.text


def _headers_present(res) -> None:
    assert "default-src 'self'" in res.headers["content-security-policy"]
    assert res.headers["x-frame-options"] == "DENY"
    assert res.headers["x-content-type-options"] == "nosniff"


# ---------------------------------------------------------------- Host (DNS rebinding)


@pytest.mark.parametrize("host", ["evil.example", f"evil.example:{PORT}", "127.0.0.1", f"127.0.0.1:{PORT + 1}",
                                  "localhost", "", f"127.0.0.1:{PORT}.evil.example", f"0.0.0.0:{PORT}"])
def test_a_foreign_host_gets_403(client, host):
    for method, path in (("GET", "/"), ("GET", "/api/options"), ("POST", "/api/plan")):
        res = client.request(method, path, headers={"host": host}, json={"set": {}})
        assert res.status_code == 403, (host, path, res.status_code)
        _headers_present(res)


@pytest.mark.parametrize("host", [f"127.0.0.1:{PORT}", f"localhost:{PORT}", f"[::1]:{PORT}", f"LOCALHOST:{PORT}"])
def test_loopback_hosts_with_the_port_are_answered(client, host):
    assert client.get("/api/options", headers={"host": host}).status_code == 200


# ---------------------------------------------------------------- no file path from a request


def test_hf_config_path_in_set_is_refused_without_reading(client, secret_file):
    res = client.post("/api/plan", json={"set": {"model.hf_config": str(secret_file)}})
    _refused(res, "model.hf_config")


def test_hf_config_path_in_an_uploaded_config_is_refused(client, secret_file):
    res = client.post("/api/plan", json={"config": f'[model]\nhf_config = "{secret_file}"\n'})
    _refused(res, "model.hf_config")


def test_existence_of_files_is_not_revealed(client, tmp_path, secret_file):
    a = client.post("/api/plan", json={"config": f'[model]\nhf_config = "{secret_file}"\n'}).json()
    b = client.post("/api/plan", json={"config": f'[model]\nhf_config = "{tmp_path / "nothing.json"}"\n'}).json()
    assert a["detail"].replace(str(secret_file), "X") == b["detail"].replace(str(tmp_path / "nothing.json"), "X")


def test_a_fifo_does_not_hang_a_worker(client, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(
        res=client.post("/api/plan", json={"set": {"model.hf_config": str(fifo)}})), daemon=True)
    thread.start()
    thread.join(20)
    assert "res" in result, "the request hung on a FIFO"
    _refused(result["res"], "model.hf_config")


def test_dev_zero_is_not_read(client):
    _refused(client.post("/api/plan", json={"config": '[model]\nhf_config = "/dev/zero"\n'}), "model.hf_config")


def test_workload_by_name_only_among_the_command_line_files(tmp_path, client):
    _refused(client.post("/api/plan", json={"workload": "/etc/passwd"}), "workload")
    w = tmp_path / "mine.toml"
    w.write_text("[model]\nparams = 1e9\n[cluster]\ncores = 12\n")
    own = TestClient(create_app(PORT, [w]), base_url=BASE, raise_server_exceptions=False)
    assert own.get("/api/options").json()["workloads"] == ["mine.toml"]
    res = own.post("/api/plan", json={"workload": "mine.toml", "set": {"cluster.cores": 16}})
    assert res.status_code == 200, res.text
    assert res.json()["workload"]["params"] == 1e9
    _refused(own.post("/api/plan", json={"workload": "../mine.toml"}), "workload")


def test_the_config_json_a_command_line_workload_names_is_read(tmp_path):
    (tmp_path / "cfg.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000, "tie_word_embeddings": False}))
    w = tmp_path / "w.toml"
    w.write_text('[model]\nhf_config = "cfg.json"\n')
    own = TestClient(create_app(PORT, [w]), base_url=BASE, raise_server_exceptions=False)
    res = own.post("/api/plan", json={"workload": "w.toml"})
    assert res.status_code == 200, res.text
    # llama by hand: embeddings 2 x 1000 x 256; per layer 4 x 256^2 attention + 3 x 256 x 688 MLP + 2 x 256 norms
    per_layer = 4 * 256 * 256 + 3 * 256 * 688 + 2 * 256
    assert res.json()["workload"]["params"] == 2 * 1000 * 256 + 2 * per_layer + 256


def test_an_uploaded_config_is_planned(client):
    res = client.post("/api/plan", json={"config": "[model]\nparams = 2e9\n", "set": {"cluster.cores": 4}})
    assert res.status_code == 200, res.text
    assert res.json()["workload"]["params"] == 2e9


# ---------------------------------------------------------------- bodies


@pytest.mark.parametrize("body", [
    b"[" * 3000 + b"]" * 3000,  # deeper than Python's parser
    b'{"set": ' * 100 + b"{}" + b"}" * 100,
    b"\xff\xfe\x00",
    b"NaN",
    b'{"set": {"cluster.cores": Infinity}}',
    b"not json",
    b"[1, 2]",
    b'"set"',
    b'{"set": [1]}',
    b'{"set": {"cluster.cores": {"a": 1}}}',
    b'{"set": {"": 1}}',
    b'{"bogus": 1}',
    b'{"config": 3}',
    b'{"config": "[[["}',
    b'{"config": "a = ' + b"[" * 2000 + b"]" * 2000 + b'"}',
    b'{"config": "x = 1", "workload": "w.toml"}',
    b'{"set": {"cluster.cores": 1e308}}',
    b'{"set": {"model.params": 1e308}}',
    b'{"set": {"cluster.accelerator.peak_flops": 1e-320}}',
    b'{"set": {"cluster.nvdec": 1}}',
    b'{"set": {"data.bitrate": "\\u001b[2J"}}',
])
def test_hostile_bodies_get_422(client, body):
    res = client.post("/api/plan", content=body, headers={"content-type": "application/json"})
    assert res.status_code == 422, (body[:60], res.status_code, res.text[:200])
    assert "\x1b" not in res.text
    _headers_present(res)


def test_body_cap(client):
    json_type = {"content-type": "application/json"}
    res = client.post("/api/plan", content=b" " * (MAX_BODY_BYTES + 1), headers=json_type)
    assert res.status_code == 413
    res = client.post("/api/plan", content=b"{}", headers={**json_type, "content-length": str(10**12)})
    assert res.status_code == 413

    def chunks():  # no Content-Length: the cap still holds
        for _ in range(MAX_BODY_BYTES // 65536 + 2):
            yield b" " * 65536

    assert client.post("/api/plan", content=chunks(), headers=json_type).status_code == 413


# ---------------------------------------------------------------- paths


@pytest.mark.parametrize("path", ["/static/app.js%00.css", "/static/" + "a" * 10_000 + ".css", "/static/../web.py",
                                  "/static/%2e%2e/web.py", "/static/", "/static/.x.css", "/static//etc/passwd",
                                  "/static/app.js/x.css", "/%ff", "/" + "x" * 10_000, "/docs", "/openapi.json"])
def test_hostile_paths_get_404_not_500(client, path):
    res = client.get(path)
    assert res.status_code == 404, (path[:60], res.status_code)
    _headers_present(res)


def test_every_answer_carries_the_security_headers(client):
    for res in (client.get("/"), client.get("/static/app.js"), client.get("/api/options"),
                client.post("/api/plan", json={}), client.put("/api/plan")):
        assert res.status_code < 500
        _headers_present(res)
    assert client.get("/static/app.js").headers["content-type"].startswith("text/javascript")


def test_a_real_server_checks_the_host():
    """uvicorn serving create_app(port): the Guard sits in front of the app on the wire too."""
    import http.client
    import socket
    import time

    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(port), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.started

        def status(host: str) -> int:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
            conn.request("GET", "/api/options", headers={"Host": host})
            res = conn.getresponse()
            res.read()
            conn.close()
            return res.status

        assert status(f"127.0.0.1:{port}") == 200
        assert status(f"localhost:{port}") == 200
        assert status(f"rebound.example:{port}") == 403
    finally:
        server.should_exit = True
        thread.join(10)
