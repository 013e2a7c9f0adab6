"""The cache what-if (issue 14): with a fraction f of the dataset's bytes in a page cache or a local
NVMe cache, the read stage's rate is 1 / (f / R_cache + (1 - f) / R_remote). Values by hand from
the reference workload (docs/pipeline-and-bill.md) with pre-decoded frames, where read binds."""

from __future__ import annotations

import pytest

from trainplan.accounts import pipeline
from trainplan.planning.evaluate import build_report
from trainplan.workload.load import load_workload

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
    # uniform draws with replacement: an LRU cache of half the data hits half the reads (h = f)
    w = load_workload(None, ['data.access="decoded"', 'data.dataset_size="10 TB"', 'storage.cache_size="5 TB"',
                             'storage.cache_order="uniform"'])
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
    from trainplan.workload import calibration

    read = {"path": "/data/x", "bytes": 64e6, "block_bytes": 4 * 2**20, "cold_bytes_per_second": 1.2e9,
            "warm_bytes_per_second": 9e9, "cold_method": "posix_fadvise", "created": True}
    cal = tmp_path / "cal.toml"
    calibration.write(cal, "read", settings={}, results=read, values=calibration.read_values(read),
                      machine={"hostname": "h"})
    w = load_workload(None, ['data.access="decoded"', 'data.dataset_size="10 TB"', 'storage.cache_size="5 TB"',
                             'storage.cache_order="uniform"'], calibration=cal)
    assert w.storage.cache_rate == 9e9 and w.provenance["storage.cache_rate"].kind == "measured"
    rate = 1 / (0.5 / 9e9 + 0.5 / 1.2e9)
    assert build_report(w)["pipeline"]["cache"]["read_rate"] == pytest.approx(rate)


# ---------------------------------------------------------------- the loader's access order (issue 25)


def lru_simulation(items: int, cache: int, epochs: int, order: str, shard: int = 1, seed: int = 0) -> float:
    """Hits / reads of an LRU cache of `cache` items over epochs 2..`epochs` (the first fills it), written
    here with an OrderedDict: shuffle (a fresh permutation each epoch), fixed, uniform (draws with
    replacement), sharded (shards of `shard` items read whole, shard order shuffled each epoch)."""
    import random
    from collections import OrderedDict

    rng = random.Random(seed)
    lru: OrderedDict[int, None] = OrderedDict()
    hits = reads = 0
    fixed = list(range(items))
    for epoch in range(epochs):
        if order == "shuffle":
            seq = rng.sample(fixed, items)
        elif order == "fixed":
            seq = fixed
        elif order == "uniform":
            seq = [rng.randrange(items) for _ in range(items)]
        else:
            shards = rng.sample(range(items // shard), items // shard)
            seq = [s * shard + k for s in shards for k in range(shard)]
        for i in seq:
            hit = i in lru
            if hit:
                lru.move_to_end(i)
            else:
                lru[i] = None
                if len(lru) > cache:
                    lru.popitem(last=False)
            if epoch > 0:
                hits += hit
                reads += 1
    return hits / reads


@pytest.mark.parametrize("order", ["shuffle", "fixed", "uniform", "sharded"])
@pytest.mark.parametrize("f", [0.25, 0.5, 0.8])
def test_hit_ratio_against_an_lru_simulation(order, f):
    items = 4000
    simulated = lru_simulation(items, int(f * items), 6, order, shard=20)
    # sampling error of ~20,000 reads, and the finite cache's edge: 0.02 absolute
    assert float(pipeline.lru_hit_ratio(order, f)) == pytest.approx(simulated, abs=0.02), (order, f, simulated)


def test_a_fresh_shuffle_hits_0153_of_a_half_cache_not_half():
    import math

    assert float(pipeline.lru_hit_ratio("shuffle", 0.5)) == pytest.approx(0.5 + 0.5 * math.log(0.5))
    assert lru_simulation(4000, 2000, 6, "shuffle") == pytest.approx(0.153, abs=0.01)
    assert float(pipeline.lru_hit_ratio("shuffle", 1.0)) == 1.0 and float(pipeline.lru_hit_ratio("fixed", 1.0)) == 1.0


def test_plan_reads_through_the_cache_at_the_shuffled_hit_ratio():
    import math

    w = load_workload(None, ['data.access="decoded"', 'data.dataset_size="10 TB"', 'storage.cache_size="5 TB"'])
    p = build_report(w)["pipeline"]
    h = 0.5 + 0.5 * math.log(0.5)  # the default order: a fresh shuffle each epoch
    rate = 1 / (h / 10e9 + (1 - h) / 1.5e9)
    assert p["cache"]["order"] == "shuffle" and p["cache"]["hit_ratio"] == pytest.approx(h)
    assert p["cache"]["read_rate"] == pytest.approx(rate)
    assert p["busy"] == pytest.approx(rate / READ_BYTES_PER_TOKEN / DEMAND_TOKENS, rel=1e-6)
    fixed = build_report(load_workload(None, ['data.access="decoded"', 'data.dataset_size="10 TB"',
                                              'storage.cache_size="5 TB"', 'storage.cache_order="fixed"']))
    assert fixed["pipeline"]["cache"]["read_rate"] == pytest.approx(1.5e9)  # LRU never hits a fixed scan
