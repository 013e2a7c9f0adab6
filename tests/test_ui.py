"""`trainplan ui`: the JSON API against plan.build_report, the command, and the page in a real browser.

The browser test drives Debian's chromium (installed by .ci/run) headless through Playwright,
moves the cores slider and checks the busy fraction and the binding stage against the formula
of docs/pipeline-and-bill.md for the default workload:

    demand  D = μ Φ / (6 P n) = 0.4 · Φ_H100,bf16 / (6 · 93e6 · 256)  ≈ 2,770.78 frames/s
    supply  S = cores · 120 frames/s (1080p, frames in order: g = 1, no video decoders)
    busy    = min(1, S / D);  decode binds while S < D, else the accelerator
    8 cores -> 34.6 %, decode;  16 -> 69.3 %, decode;  24 -> 100 %, accelerator
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from trainplan.accounts import pipeline
from trainplan.planning import evaluate as plan# noqa: E402
from trainplan.errors import UserError  # noqa: E402
from trainplan.interfaces.web import create_app, overrides_from_json  # noqa: E402
from trainplan.workload.load import load_workload  # noqa: E402

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
STATIC = Path(plan.__file__).parent.parent / "interfaces" / "static"


@pytest.fixture(scope="module")
def client() -> "TestClient":
    pytest.importorskip("httpx", reason="fastapi's TestClient needs httpx (in the [test] extra)")
    from fastapi.testclient import TestClient

    return TestClient(create_app(), base_url="http://127.0.0.1:8765")  # the Host the page answers


def as_json(obj: object) -> object:
    """What a report looks like after a trip through JSON."""
    return json.loads(json.dumps(obj))


def expected_busy(cores: float) -> tuple[float, str]:
    """The formula by hand for the default workload (module docstring), checked against the account."""
    w = load_workload(None)
    peak = w.accelerator.peak("bf16")
    demand = 0.4 * peak / (6 * 93e6 * 256)
    supply = cores * 120.0
    busy = min(1.0, supply / demand)
    stage = "decode" if supply < demand else "accelerator"
    account = pipeline.pipeline_account(**plan.pipeline_inputs(w, cores=cores))
    assert account.demand_fps == pytest.approx(demand, rel=1e-12)
    assert account.busy == pytest.approx(busy, rel=1e-12)
    assert account.bottleneck == stage
    return account.busy, account.bottleneck


# ---------------------------------------------------------------- the JSON API


def test_default_plan_is_build_report(client: TestClient) -> None:
    res = client.post("/api/plan", json={"set": {}})
    assert res.status_code == 200
    data = res.json()
    series = data.pop("series")
    assert data.pop("display")["compute.wall_seconds"] == {"label": "wall time", "text": "3.91 d"}  # 337,622 s
    # the page's own additions: the first screen in words, the controls' values, the memory bar, the layout
    screen = {line["label"]: line["text"] for line in data.pop("first_screen")}
    # 337,500 s x (1 + 1.302 s save / 3,600 s) = 337,622 s x 1 accelerator / 3,600 = 93.78 accelerator-hours
    # x $3.00 = $281.35 a run, 3 attempts $844.06
    assert screen["Cost"] == "$844.06: $281.35 a run x 3 attempts at $3.00/h per accelerator."
    assert screen["Fits?"].startswith("yes: 9.55 GB per device of 85.5 GB")
    assert set(screen) >= {"Fits?", "Time", "Cost", "Waits on"}
    controls = data.pop("controls")
    assert controls["cluster.accelerator"] == "h100-sxm" and controls["model.params"] == 93e6
    assert controls["data.kind"] == "video" and controls["model.params_locked"] is None
    chart = data.pop("memory_chart")
    assert sum(p["bytes"] for p in chart["parts"]) == pytest.approx(chart["per_device"]["bytes"])
    assert chart["card"]["bytes"] == 81559 * 2**20  # the H100's driver figure
    assert data.pop("layout_text").startswith("one device")
    assert data == as_json(plan.build_report(load_workload(None)))
    assert data["pipeline"]["busy"] == pytest.approx(960 / 2770.777, rel=1e-5)  # docs/pipeline-and-bill.md: 34.6 %
    assert data["pipeline"]["bottleneck"] == "decode"
    assert series["x"] == "cluster.cores"


def test_overrides_with_units_match_the_cli_overrides(client: TestClient) -> None:
    settings = {"cluster.cores": 16, "data.bitrate": "4 Mbit/s", "cluster.nvdec": True,
                "cluster.accelerator": "a100-sxm-80gb", "data.access": "random", "data.width": 1280,
                "data.height": 720, "model.params": 3e8, "prices.core_hour": "$0.04"}
    res = client.post("/api/plan", json={"set": settings})
    assert res.status_code == 200, res.text
    data = res.json()
    data.pop("series")
    for key in ("first_screen", "controls", "memory_chart", "layout_text"):  # the page's own additions
        data.pop(key)
    display = data.pop("display")  # labels and texts from planning/figures.py
    assert display["pipeline.busy"]["label"] == "accelerator busy" and display["pipeline.busy"]["text"].endswith(" %")
    cli_style = ["cluster.cores=16", "data.bitrate=4 Mbit/s", "cluster.nvdec=true",
                 "cluster.accelerator=a100-sxm-80gb", "data.access=random", "data.width=1280",
                 "data.height=720", "model.params=3e8", "prices.core_hour=$0.04"]
    assert data == as_json(plan.build_report(load_workload(None, cli_style)))
    assert data["workload"]["accelerator"] == "a100-sxm-80gb"
    assert data["pipeline"]["video_decoders"] == 5.0


def test_no_body_plans_the_default(client: TestClient) -> None:
    res = client.post("/api/plan")
    assert res.status_code == 200
    assert res.json()["pipeline"]["cores"] == 8.0


def test_series_is_the_vectorised_account(client: TestClient) -> None:
    res = client.post("/api/plan", json={"set": {"cluster.cores": 12}})
    series = res.json()["series"]
    cores = np.array(series["cores"])
    assert cores[0] == 0 and cores[-1] >= 64 and np.all(np.diff(cores) > 0)
    w = load_workload(None, ["cluster.cores=12"])
    a = pipeline.pipeline_arrays(**plan.pipeline_inputs(w, cores=cores))
    assert series["busy"] == pytest.approx(list(a["busy"]), rel=1e-12)
    assert series["bottleneck"] == [pipeline.BOTTLENECKS[i] for i in a["bottleneck_index"]]
    # the curve through the report's point, and the knee at the cores needed (23.09)
    i8 = series["cores"].index(8.0)
    assert series["busy"][i8] == pytest.approx(expected_busy(8)[0], rel=1e-12)
    assert series["bottleneck"][23] == "decode" and series["bottleneck"][24] == "accelerator"


def test_series_reaches_past_the_cores_needed(client: TestClient) -> None:
    # random access with a keyframe every 30 frames: g = 15.5, so 23.09 * 15.5 = 357.9 cores needed
    data = client.post("/api/plan", json={"set": {"data.access": "random"}}).json()
    needed = data["pipeline"]["cores_needed"]
    assert needed == pytest.approx(23.0898 * 15.5, rel=1e-4)
    assert data["series"]["cores"][-1] >= needed
    assert len(data["series"]["cores"]) <= 257
    assert data["series"]["bottleneck"][-1] == "accelerator"


@pytest.mark.parametrize("settings, key", [
    ({"cluster.cores": -1}, "cluster.cores"),
    ({"data.fps": "fast"}, "data.fps"),
    ({"data.bitrate": "8 parsecs"}, "data.bitrate"),
    ({"cluster.coress": 8}, "cluster.coress"),
    ({"cluster.accelerator": "h99"}, "cluster.accelerator"),
    ({"data.access": "sideways"}, "data.access"),
    ({"data.cameras": [1, 2]}, "data.cameras"),
])
def test_bad_value_is_422_naming_the_key(client: TestClient, settings: dict, key: str) -> None:
    res = client.post("/api/plan", json={"set": settings})
    assert res.status_code == 422
    body = res.json()
    assert body["key"] == key
    assert body["detail"].startswith(f"{key}: ")
    assert "\n" not in body["detail"] and "Traceback" not in body["detail"]
    if not isinstance(next(iter(settings.values())), list):
        # the same one line the command line prints for the same --set
        with pytest.raises(UserError) as err:
            load_workload(None, overrides_from_json(settings))
        assert body["detail"] == str(err.value)


@pytest.mark.parametrize("body", [[1, 2], {"sett": {}}, {"set": [1]}, {"set": {"cluster.cores": float("nan")}}])
def test_malformed_request_is_422(client: TestClient, body: object) -> None:
    if isinstance(body, dict) and isinstance(body.get("set"), dict):
        res = client.post("/api/plan", content='{"set": {"cluster.cores": NaN}}',
                          headers={"content-type": "application/json"})
    else:
        res = client.post("/api/plan", json=body)
    assert res.status_code == 422
    assert isinstance(res.json()["detail"], str)


def test_a_key_set_twice_is_422(client: TestClient) -> None:
    """"model.width" and "model.width " are one key: two values for it are refused, not the last one kept;
    the same value twice is one setting."""
    res = client.post("/api/plan", json={"set": {"model.width": 4096, "model.width ": 1024, "model.layers": 2}})
    assert res.status_code == 422
    assert res.json()["key"] == "model.width" and "'4096' and then '1024'" in res.json()["detail"]
    same = client.post("/api/plan", json={"set": {"model.width": 1024, "model.width ": 1024, "model.layers": 2}})
    assert same.status_code == 200 and same.json()["assumptions"]["model.width"]["value"] == 1024


def test_not_json_is_422(client: TestClient) -> None:
    res = client.post("/api/plan", content="cores=16", headers={"content-type": "application/json"})
    assert res.status_code == 422
    assert res.json()["detail"].startswith("request: ")


def test_options_list_the_catalogue(client: TestClient) -> None:
    from trainplan.catalogue.accelerators import accelerators

    opts = client.get("/api/options").json()
    assert [a["key"] for a in opts["accelerators"]] == list(accelerators())
    assert opts["access"] == ["sequential", "random", "decoded"]
    assert {"width": 1920, "height": 1080, "label": "1080p"} in opts["resolutions"]
    assert opts["defaults"]["cluster.cores"] == 8.0 and opts["defaults"]["cluster.accelerator"] == "h100-sxm"


def test_page_and_assets_are_served_from_the_package(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for element in ('id="cores"', 'id="busy"', 'id="bottleneck"', 'id="cores-needed"', 'id="bill-total"',
                    'id="plot"', 'id="error"', 'id="params"', 'id="resolution"', 'id="access"', 'id="nvdec"',
                    'id="accelerator"', 'id="accelerator-hour"', 'id="core-hour"', 'id="cameras"', 'id="fps"'):
        assert element in page.text
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        res = client.get(f"/static/{name}")
        assert res.status_code == 200 and res.headers["content-type"].startswith(kind)
        assert res.text == (STATIC / name).read_text(encoding="utf-8")
    assert client.get("/static/../ui.py").status_code == 404
    assert client.get("/static/missing.js").status_code == 404


def test_no_cdn() -> None:
    """Everything the page loads is shipped in the package: no external URL anywhere in it."""
    for path in STATIC.iterdir():
        text = path.read_text(encoding="utf-8")
        for line in text.splitlines():
            if "http://" in line or "https://" in line:
                assert "http://www.w3.org/2000/svg" in line, f"{path.name}: {line.strip()}"


# ---------------------------------------------------------------- the command


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ui_command_serves_on_loopback_and_opens_the_browser(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import uvicorn
    import webbrowser

    from trainplan.interfaces.cli import main

    seen: dict[str, object] = {}

    def fake_run(self: uvicorn.Server, sockets: object = None) -> None:
        seen["host"], seen["port"] = self.config.host, self.config.port
        self.started = True

    opened: list[str] = []
    monkeypatch.setattr(uvicorn.Server, "run", fake_run)
    monkeypatch.setattr(webbrowser, "open", lambda url, *a, **k: opened.append(url))
    port = _free_port()
    with pytest.raises(SystemExit) as exit_:
        main(["ui", "--port", str(port)])
    assert exit_.value.code == 0
    assert seen == {"host": "127.0.0.1", "port": port}
    deadline = time.monotonic() + 5
    while not opened and time.monotonic() < deadline:
        time.sleep(0.02)
    assert opened == [f"http://127.0.0.1:{port}/"]
    assert f"http://127.0.0.1:{port}/" in capsys.readouterr().out

    opened.clear()
    with pytest.raises(SystemExit):
        main(["ui", "--port", str(port), "--no-browser"])
    time.sleep(0.2)
    assert opened == []


def test_ui_command_port_in_use_is_one_line_exit_2(capsys) -> None:
    from trainplan.interfaces.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(SystemExit) as exit_:
            main(["ui", "--port", str(port), "--no-browser"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("trainplan: --port: ") and str(port) in err and "\n" not in err


# ---------------------------------------------------------------- the page in a browser


@pytest.fixture
def served_url():
    """uvicorn in a background thread on a free loopback port (its own socket: no race)."""
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(port), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


def _settle(page) -> None:  # noqa: ANN001 - a playwright Page
    """Wait until the page shows the answer to its latest change."""
    page.wait_for_function(
        "() => Number(document.body.dataset.shown) >= 1 && "
        "document.body.dataset.shown === document.body.dataset.changes", timeout=20_000)


def _set_slider(page, selector: str, value: str) -> None:  # noqa: ANN001
    page.eval_on_selector(selector, "(el, v) => { el.value = v; el.dispatchEvent(new Event('input', {bubbles: true})); }",
                          value)


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium "
                    "(.ci/run installs chromium and chromium-driver with apt)")
def test_browser_cores_slider_moves_busy_and_binding_stage(served_url: str, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(served_url)
            _settle(page)
            assert page.locator("#accelerator option").count() >= 5
            assert page.input_value("#cores") == "8"

            xs = []
            for cores in (8, 16, 24):
                _set_slider(page, "#cores", str(cores))
                _settle(page)
                busy, stage = expected_busy(cores)
                assert float(page.get_attribute("#busy", "data-value")) == pytest.approx(busy, rel=1e-12)
                assert page.text_content("#busy") == f"{busy * 100:.1f} %"
                assert page.text_content("#bottleneck") == stage
                assert page.text_content("#cores-value") == str(cores)
                assert page.text_content("#cores-needed") == "23.1"
                assert float(page.get_attribute("#plot-point", "cy")) >= 0
                xs.append(float(page.get_attribute("#plot-point", "cx")))
            # docs/pipeline-and-bill.md by hand: 8 -> 34.6 %, 16 -> 69.3 %, 24 -> 100 %
            assert [f"{expected_busy(c)[0] * 100:.1f} %" for c in (8, 16, 24)] == ["34.6 %", "69.3 %", "100.0 %"]
            assert xs[0] < xs[1] < xs[2]
            assert page.text_content("#verdict").startswith("The accelerator binds")
            assert page.is_hidden("#error")

            shot = tmp_path / "ui.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.exists() and shot.stat().st_size > 0
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

            # bad input reaches the page as the one-line message, and the page recovers
            page.eval_on_selector("#accelerator", "el => { el.append(new Option('h99', 'h99')); }")
            page.select_option("#accelerator", "h99")
            _settle(page)
            assert page.is_visible("#error")
            assert page.text_content("#error").startswith("cluster.accelerator: unknown accelerator 'h99'")
            page.select_option("#accelerator", "h100-sxm")
            _settle(page)
            assert page.is_hidden("#error")
            assert errors == []
        finally:
            browser.close()


def test_the_page_opens_on_the_first_file_given() -> None:
    """`trainplan ui A B` opens on A (the options keep the order given, not an alphabetical one), and
    the page asks for no icon it would then fail to load."""
    pytest.importorskip("httpx", reason="fastapi's TestClient needs httpx (in the [test] extra)")
    from fastapi.testclient import TestClient

    root = Path(__file__).resolve().parent.parent / "examples"
    app = create_app(files=[root / "llama2-7b-pretrain.toml", root / "finetune-1b.toml"])
    client = TestClient(app, base_url="http://127.0.0.1:8765")
    assert client.get("/api/options").json()["workloads"] == ["llama2-7b-pretrain.toml", "finetune-1b.toml"]
    assert client.get("/favicon.ico").status_code == 204
    assert 'rel="icon"' not in client.get("/").text


def test_an_uploaded_data_inspect_file_plans_as_the_command_plans_it(client: TestClient, tmp_path) -> None:
    # a file `data inspect --output` wrote carries [measured] and [measured_interval] tables: the page reads
    # them as `trainplan plan FILE` does (it refused them as unknown keys), with the same figures and the
    # measured provenance
    import json
    import subprocess
    import sys

    text = ('[data]\nkind = "video"\nhours = 120.0\nbitrate = 6000000.0\nwidth = 1280\nheight = 720\nfps = 30.0\n'
            'gop = 30.0\n\n[measured]\n"data.hours" = "measured by `trainplan data inspect` on clips/ (40 of 400 files)"\n'
            '"data.bitrate" = "measured by `trainplan data inspect` on clips/ (40 of 400 files)"\n\n'
            '[measured_interval]\n"data.bitrate" = [5500000.0, 6500000.0]\n')
    f = tmp_path / "measured.toml"
    f.write_text(text)
    res = client.post("/api/plan", json={"config": text})
    assert res.status_code == 200, res.text
    page = res.json()
    cli = json.loads(subprocess.run([sys.executable, "-m", "trainplan", "plan", str(f), "--format", "json"],
                                    capture_output=True, text=True, check=True).stdout)
    assert page["pipeline"]["busy"] == cli["pipeline"]["busy"]
    assert page["bill"]["total"] == cli["bill"]["total"]
    assert page["assumptions"]["data.hours"]["provenance"] == "measured"
    assert page["sample_range"]["keys"] == cli["sample_range"]["keys"] == "data.bitrate"
