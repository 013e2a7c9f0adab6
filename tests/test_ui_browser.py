"""The page plans exactly the workload chosen (issue 28), driven in headless Chromium.

Expected figures by hand for examples/finetune-1b.toml (docs/report.md's formulas):

    training FLOPs  6 N D = 6 x 1e9 x 1e9 = 6e18
    compute time    6e18 / (n x 200e12 x MFU 0.3 x scaling 0.8): n = 4 -> 31,250 s; n = 8 -> 15,625 s
    wall time       x (1 + 14 s save / 3,600 s between saves): 31,371.5 s = 8.71 h; n = 8: 4.36 h
    cost of a run   31,371.5 s x 4 / 3,600 = 34.86 accelerator-hours x $3.00 = $104.57; 3 attempts $313.72
    memory          16 GB state + 2.15 GB activations + 2 GB buffers, x 1.25 headroom = 25.2 GB of 32 GB

and for the upload below (the same file with MFU 0.5): 18,750 s x (1 + 14 / 3,600) = 18,822.9 s =
5.23 h, 20.91 accelerator-hours, $62.74 a run, $188.23 for three. The Llama 2 7B workload names a config.json: 6,738,415,616
parameters, the count Meta publishes for Llama-2-7b (and transformers gives on the meta device).
"""

from __future__ import annotations

import math
import socket
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
sync_api = pytest.importorskip("playwright.sync_api")

from trainplan.interfaces.web import create_app  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FINETUNE = ROOT / "examples" / "finetune-1b.toml"
LLAMA = ROOT / "examples" / "llama2-7b-pretrain.toml"
IMAGENET = ROOT / "examples" / "imagenet-vit.toml"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium "
                                "(.ci/run installs it with apt)")


@pytest.fixture(scope="module")
def served_url():
    """uvicorn in a background thread, given the two example workloads as `trainplan ui` would be."""
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = create_app(port, files=[FINETUNE, LLAMA, IMAGENET])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
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


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


def _settle(page) -> None:  # noqa: ANN001 - a playwright Page
    page.wait_for_function(
        "() => Number(document.body.dataset.shown) >= 1 && "
        "document.body.dataset.shown === document.body.dataset.changes", timeout=60_000)


def _line(page, label: str) -> str:  # noqa: ANN001
    return page.text_content(f'#first-screen dd[data-label="{label}"]')


def _open(browser, url: str, width: int = 1280):  # noqa: ANN001
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.set_default_timeout(60_000)  # generous: the machine is shared (never timing-sensitive)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    # a console error (a resource the page's own policy blocks, a 404) is a defect too
    # (the API's 422, a refusal the page shows as its error line, is logged by the browser and meant)
    page.on("console", lambda m: errors.append(f"console: {m.text}")
            if m.type == "error" and "status of 422" not in m.text else None)
    page.goto(url)
    _settle(page)
    return page, errors


def test_the_file_given_is_planned_not_the_reference(browser, served_url: str, tmp_path: Path) -> None:
    page, errors = _open(browser, served_url)
    assert page.input_value("#base") == "finetune-1b.toml"  # the file `trainplan ui` was given comes first
    assert _line(page, "Cost") == "$313.72: $104.57 a run x 3 attempts at $3.00/h per accelerator."
    assert _line(page, "Fits?").startswith("yes: 25.2 GB per device of 32 GB")
    assert page.text_content("#training-cost") == "$313.72"
    assert page.text_content("#wall-time") == "8.71 h"
    assert page.text_content("#memory-per-device") == "25.2 GB of 32 GB"
    assert page.text_content("#layout").startswith("data-parallel 4")
    assert page.text_content("#bottleneck") == "accelerator"
    # a token corpus: no frames, no bill per hour of data, no video controls, no cores curve
    seen = page.inner_text("body")
    assert "frames/s" not in seen and "hour of data" not in seen and "hour of video" not in seen
    assert page.is_hidden("#video-controls") and page.is_hidden("#plot-figure")
    assert page.locator("#memory-chart rect[data-part]").count() == 5  # weights .. buffers and headroom
    assert page.locator("#plot polyline").count() == 0
    assert page.text_content("#accelerator option:checked") == "custom accelerator (from the file)"

    # move only the device count: 8 devices -> 15,625 s x (1 + 14 / 3,600) = 4.36 h, the same $104.57 a run
    page.eval_on_selector("#count", "el => { el.value = 3; el.dispatchEvent(new Event('input', {bubbles: true})); }")
    _settle(page)
    assert page.text_content("#count-value") == "8"
    assert page.text_content("#wall-time") == "4.36 h"
    assert _line(page, "Cost").startswith("$313.72: $104.57 a run")
    page.screenshot(path=str(tmp_path / "tokens.png"), full_page=True)
    assert errors == []
    page.close()


def test_an_image_corpus_is_planned_as_images(browser, served_url: str) -> None:
    """examples/imagenet-vit.toml: 1.28 M images x 90 epochs x (224 / 16)^2 = 22.6 B tokens; no cameras or
    frame rate to move; the bill counted per 3,600 images."""
    page, errors = _open(browser, served_url)
    page.select_option("#base", "imagenet-vit.toml")
    _settle(page)
    assert page.is_hidden("#error")
    assert page.text_content("#headline").startswith("86 M parameters, 22.6 B tokens")
    assert page.text_content("#frames-legend") == "Images"
    assert page.is_hidden("#cameras") and page.is_hidden("#fps") and page.is_visible("#resolution")
    assert page.is_hidden("#nvdec")  # a video engine decodes no JPEG
    assert "An image corpus" in page.text_content("#kind-note")
    assert page.text_content("#bill-label") == "Data bill per 3,600 images"
    assert page.is_visible("#plot-figure")  # the cores curve of a decoded corpus
    # moving the cores is planned on the images (busy stays 1: 1.1 cores needed, 8 present)
    page.eval_on_selector("#cores", "el => { el.value = 1; el.dispatchEvent(new Event('input', {bubbles: true})); }")
    _settle(page)
    assert page.is_hidden("#error") and page.text_content("#headline").startswith("86 M parameters, 22.6 B tokens")
    assert errors == []
    page.close()


def test_a_workload_naming_a_config_json_is_planned(browser, served_url: str) -> None:
    page, errors = _open(browser, served_url)
    page.select_option("#base", "llama2-7b-pretrain.toml")
    _settle(page)
    assert page.is_hidden("#error")
    assert page.text_content("#headline").startswith("6.74 B parameters")  # 6,738,415,616
    assert page.is_disabled("#params") and "config.json" in page.text_content("#params-locked")
    assert page.text_content("#count-value") == "256"
    assert _line(page, "Fits?").startswith("yes:")
    assert "frames/s" not in page.inner_text("body")
    # another accelerator: only that key is sent, the config.json still names the model
    page.select_option("#accelerator", "h200")
    _settle(page)
    assert page.is_hidden("#error") and "H200" in _line(page, "Time")
    assert errors == []
    page.close()


def test_an_upload_is_planned_and_an_error_leaves_no_stale_figures(browser, served_url: str,
                                                                    tmp_path: Path) -> None:
    upload = tmp_path / "mine.toml"
    upload.write_text(FINETUNE.read_text().replace("mfu = 0.30", "mfu = 0.50"))
    page, errors = _open(browser, served_url)
    before = int(page.get_attribute("body", "data-changes"))
    page.set_input_files("#upload", str(upload))  # the page reads the file, then asks: wait for that ask
    page.wait_for_function(f"() => Number(document.body.dataset.changes) > {before}", timeout=60_000)
    _settle(page)
    assert page.text_content("#wall-time") == "5.23 h"  # 18,822.9 s
    assert _line(page, "Cost") == "$188.23: $62.74 a run x 3 attempts at $3.00/h per accelerator."
    # "Start from" names the upload, not the file chosen before it
    assert page.eval_on_selector("#base", "el => el.options[el.selectedIndex].text") == "uploaded: mine.toml"

    page.eval_on_selector("#accelerator", "el => { el.append(new Option('h99', 'h99')); }")
    page.select_option("#accelerator", "h99")
    _settle(page)
    assert page.text_content("#error").startswith("cluster.accelerator: unknown accelerator 'h99'")
    assert page.is_hidden("#answer") and page.is_hidden("#training-cost")  # nothing of the last plan stays
    page.select_option("#accelerator", "l40s")  # a new catalogue entry
    _settle(page)
    assert page.is_hidden("#error") and page.is_visible("#training-cost")
    assert "NVIDIA L40S" in _line(page, "Time")
    assert errors == []
    page.close()


def test_the_video_reference_still_draws_its_curve(browser, served_url: str) -> None:
    page, errors = _open(browser, served_url)
    page.select_option("#base", "")
    _settle(page)
    assert page.is_visible("#video-controls") and page.locator("#plot polyline").count() >= 1
    assert page.text_content("#bottleneck") == "decode" and page.text_content("#busy") == "34.6 %"
    assert page.input_value("#cores") == "8"
    assert errors == []
    page.close()


def test_serving_shows_only_when_the_workload_describes_it(browser, served_url: str, tmp_path: Path) -> None:
    page, errors = _open(browser, served_url)
    assert page.is_hidden("#serving")  # a training plan: no serving figures
    upload = tmp_path / "serve.toml"
    upload.write_text('[serving]\nrequests_per_day = "10M"\n')
    before = int(page.get_attribute("body", "data-changes"))
    page.set_input_files("#upload", str(upload))
    page.wait_for_function(f"() => Number(document.body.dataset.changes) > {before}", timeout=60_000)
    _settle(page)
    assert page.is_visible("#serving")
    from trainplan.interfaces.web import plan_response

    rps = plan_response({}, '[serving]\nrequests_per_day = "10M"\n')["serving"]["requests_per_second"]
    # replicas = ceil(requests a day / 86,400 s / requests per second of one replica)
    assert page.text_content("#serving-replicas") == str(math.ceil(10e6 / 86_400 / rps))
    assert errors == []
    page.close()


def test_an_uploaded_data_inspect_output_is_planned_as_the_command_plans_it(browser, served_url: str,
                                                                              tmp_path: Path) -> None:
    # a file `data inspect --output` writes ([data] beside its [measured] and [measured_interval] tables):
    # the page read its tables as unknown keys before; now it plans it, with the plan's own busy figure
    import json
    import subprocess
    import sys

    upload = tmp_path / "measured.toml"
    upload.write_text('[data]\nkind = "video"\nhours = 120.0\nbitrate = 6000000.0\nwidth = 1280\nheight = 720\n'
                      'fps = 30.0\ngop = 30.0\n\n[measured]\n"data.hours" = "measured by `trainplan data inspect`"\n'
                      '"data.bitrate" = "measured by `trainplan data inspect`"\n\n'
                      '[measured_interval]\n"data.bitrate" = [5500000.0, 6500000.0]\n')
    plan = json.loads(subprocess.run([sys.executable, "-m", "trainplan", "plan", str(upload), "--format", "json"],
                                     capture_output=True, text=True, check=True).stdout)
    page, errors = _open(browser, served_url)
    before = int(page.get_attribute("body", "data-changes"))
    page.set_input_files("#upload", str(upload))
    page.wait_for_function(f"() => Number(document.body.dataset.changes) > {before}", timeout=60_000)
    _settle(page)
    assert page.is_hidden("#error"), page.text_content("#error")
    assert page.text_content("#busy") == f"{plan['pipeline']['busy'] * 100:.1f} %"
    assert page.eval_on_selector("#base", "el => el.options[el.selectedIndex].text") == "uploaded: measured.toml"
    assert errors == []
    page.close()
