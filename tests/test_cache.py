"""The cache what-if (issue 14): with a fraction f of the dataset's bytes in a page cache or a local
NVMe cache, the read stage's rate is 1 / (f / R_cache + (1 - f) / R_remote). Values by hand from
the reference workload (docs/pipeline-and-bill.md) with pre-decoded frames, where read binds."""

from __future__ import annotations

import pytest

from trainplan.accounts import pipeline
from trainplan.planning.evaluate import build_report
from trainplan.workload.schema import load_workload

# reference workload (docs/pipeline-and-bill.md): demand 709,319 tokens/s (93 M parameters, MFU 0.4, one H100-SXM, 256
# tokens a frame). Decoded frames are read at 1.5 W H bytes: 1.5 x 1920 x 1080 / 256 = 12,150 B/token.
DEMAND_TOKENS = 0.4 * 989.5e12 / (6 * 93e6)
READ_BYTES_PER_TOKEN = 1.5 * 1920 * 1080 / 256


def test_mixed_rate_by_hand():
    assert pipeline.cached_read_rate(1.5e9, 10e9, 0.0) == pytest.approx(1.5e9)
    assert pipeline.cached_read_rate(1.5e9, 10e9, 1.0) == pytest.approx(10e9)
    assert pipeline.cached_read_rate(1.5e9, 10e9, 0.5) == pytest.approx(1 / (0.5 / 10e9 + 0.5 / 1.5e9))
    assert pipeline.cached_fraction(5e12, 10e12) == 0.5
    assert pipeline.cached_fraction(20e12, 10e12) == 1.0


def test_plan_reads_through_the_cache():
    w = load_workload(None, ['data.access="decoded"', 'data.dataset_size="10 TB"', 'storage.cache_size="5 TB"'])
    r = build_report(w)
    p = r["pipeline"]
    rate = 1 / (0.5 / 10e9 + 0.5 / 1.5e9)
    assert p["cache"]["cached_fraction"] == 0.5
    assert p["cache"]["read_rate"] == pytest.approx(rate)
    assert p["bottleneck"] == "read"
    assert p["busy"] == pytest.approx(rate / READ_BYTES_PER_TOKEN / DEMAND_TOKENS, rel=1e-6)
    rows = p["cache"]["by_cached_fraction"]
    assert [row["cached_fraction"] for row in rows] == pytest.approx([i / 10 for i in range(11)])
    for row in rows:
        f = row["cached_fraction"]
        mixed = 1 / (f / 10e9 + (1 - f) / 1.5e9)
        assert row["busy"] == pytest.approx(min(1.0, mixed / READ_BYTES_PER_TOKEN / DEMAND_TOKENS), rel=1e-6)
    assert rows[0]["bottleneck"] == "read" and rows[-1]["bottleneck"] == "accelerator"


def test_no_cache_leaves_the_plan_as_it_was():
    r = build_report(load_workload(None, ['data.access="decoded"']))
    assert r["pipeline"]["busy"] == pytest.approx(1.5e9 / READ_BYTES_PER_TOKEN / DEMAND_TOKENS, rel=1e-6)
    assert r["pipeline"]["cache"]["cached_fraction"] == 0.0
    # derived dataset size: 1000 h x 3 cameras x 30 fps x 1.5 x 1920 x 1080 bytes
    assert r["pipeline"]["cache"]["dataset_size"] == pytest.approx(1000 * 3600 * 3 * 30 * 1.5 * 1920 * 1080)


def test_bad_cache_size_refused(cli):
    res = cli("plan", "--set", "storage.cache_size=-1")
    assert res.returncode == 2 and "storage.cache_size" in res.stderr and res.stderr.count("\n") == 1


def test_read_probe_records_the_warm_rate_as_the_cache_rate(tmp_path):
    from trainplan.measure import calibration

    read = {"path": "/data/x", "bytes": 64e6, "block_bytes": 4 * 2**20, "cold_bytes_per_second": 1.2e9,
            "warm_bytes_per_second": 9e9, "cold_method": "posix_fadvise", "created": True}
    cal = tmp_path / "cal.toml"
    calibration.write(cal, "read", settings={}, results=read, values=calibration.read_values(read),
                      machine={"hostname": "h"})
    w = load_workload(None, ['data.access="decoded"', 'data.dataset_size="10 TB"', 'storage.cache_size="5 TB"'],
                      calibration=cal)
    assert w.storage.cache_rate == 9e9 and w.provenance["storage.cache_rate"].kind == "measured"
    rate = 1 / (0.5 / 9e9 + 0.5 / 1.2e9)
    assert build_report(w)["pipeline"]["cache"]["read_rate"] == pytest.approx(rate)
