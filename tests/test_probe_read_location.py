"""`trainplan probe read URL` (issue 26) against a real S3 server (moto's server mode on 127.0.0.1,
tests/s3_server.py): the probe's one-connection rate within 10 % of what a plain s3fs loop measures
on the same object, its calibration entry naming the location, and the plan using it as
cluster.link. Timing on a shared machine: the probe and the reference loop run interleaved, and a
comparison outside 10 % is retried (up to 5 times, each attempt's figures reported on failure)."""

from __future__ import annotations

import json
import statistics
import time

import numpy as np
import pytest

from s3_server import CREDENTIALS, s3_server

OBJECT_BYTES = 8 * 2**20
SMALL_BYTES = 2**20  # the object of the command-line test: 4 connection counts read it many times
REPEATS = 3
ROUNDS = 5
ATTEMPTS = 5  # a comparison outside 10 % is measured again, each attempt reported on failure


@pytest.fixture(scope="module")
def s3_object():
    with s3_server():
        import fsspec

        fs = fsspec.filesystem("s3")
        fs.mkdir("probe-bucket")
        fs.pipe_file("probe-bucket/obj.bin", np.random.default_rng(0).bytes(OBJECT_BYTES))
        fs.pipe_file("probe-bucket/small.bin", np.random.default_rng(1).bytes(SMALL_BYTES))
        yield fs, "s3://probe-bucket/obj.bin"


def _plain_s3fs_loop(fs, path: str) -> float:
    """The reference: whole-object GETs with s3fs, one at a time; bytes / median seconds a read."""
    fs.cat_file(path)
    times = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        data = fs.cat_file(path)
        times.append(time.perf_counter() - t)
        assert len(data) == OBJECT_BYTES
    return OBJECT_BYTES / statistics.median(times)


def test_probe_read_within_10_percent_of_a_plain_s3fs_loop(s3_object):
    """ROUNDS rounds, each the reference loop then the probe; the medians over the rounds compared (a
    burst of load on the shared machine then moves one round, not the comparison)."""
    from trainplan.measure import locations

    fs, url = s3_object
    attempts = []
    for _ in range(ATTEMPTS):
        refs, probes = [], []
        for _ in range(ROUNDS):
            refs.append(_plain_s3fs_loop(fs, url))
            d = locations.read_probe(url, repeats=REPEATS, connections=(1,), request_sizes=(2**16,))
            probes.append(d.per_connection_bytes_per_second)
        ratio = statistics.median(probes) / statistics.median(refs)
        attempts.append((round(ratio, 3), statistics.median(probes), statistics.median(refs)))
        if abs(ratio - 1) <= 0.10:
            break
    else:
        pytest.fail(f"probe / plain s3fs loop outside 10 % in {ATTEMPTS} attempts: {attempts}")
    assert d.object_bytes == OBJECT_BYTES and not d.created
    assert 0 < d.first_byte_seconds < OBJECT_BYTES / d.per_connection_bytes_per_second * 10
    print("probe/reference attempts:", attempts)


def test_probe_read_url_writes_the_link_the_plan_uses(s3_object, cli, tmp_path):
    fs, _ = s3_object
    url = "s3://probe-bucket/small.bin"
    cal = tmp_path / "cal.toml"
    res = cli("probe", "read", url, "--repeats", "2", "--output", str(cal), "--format", "json")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert [r["connections"] for r in d["by_connections"]] == [1, 2, 4, 8]
    assert d["link_bytes_per_second"] == max(r["bytes_per_second"] for r in d["by_connections"])
    for secret in CREDENTIALS.values():
        assert "secret" not in secret or secret not in res.stdout + cal.read_text()
    plan = cli("plan", "--calibration", str(cal), "--format", "json")
    assert plan.returncode == 0, plan.stderr
    link = json.loads(plan.stdout)["assumptions"]["cluster.link"]
    assert link["value"] == pytest.approx(d["link_bytes_per_second"]) and link["provenance"] == "measured"
    assert url in link["source"]


def test_probe_read_prefix_without_objects_writes_and_removes_a_test_object(s3_object, cli):
    fs, _ = s3_object
    res = cli("probe", "read", "s3://probe-bucket/empty/", "--repeats", "1", "--size", "1 MiB", "-f", "json")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["created"] and d["object_bytes"] == 2**20
    assert fs.find("probe-bucket/empty/") == []


def test_probe_read_missing_bucket_is_one_line(s3_object, cli):
    res = cli("probe", "read", "s3://no-such-bucket-here/x")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
