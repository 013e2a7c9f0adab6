"""The sample's intervals (issue 26, measure/sampling.py): the formulas by hand on a few numbers, and
their coverage on corpora built here where the full-pass figure is known.

Coverage: per-file records (no files: the records are what an inspection returns, drawn from skewed
distributions like a real corpus's) of M units; for each of many seeds a sample of n is drawn, and
the 95 % interval must hold the full-pass figure (computed here with numpy from all M records) in at
least 95 % of the seeds. The samples meet Cochran's rule (n > 25 g1^2) for these corpora."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from trainplan.measure import sampling


def test_total_by_hand():
    y = [1.0, 2.0, 4.0, 9.0]
    iv = sampling.total(y, population=40)
    mean, s = np.mean(y), np.std(y, ddof=1)
    assert iv.estimate == pytest.approx(40 * mean)
    half = stats.t.ppf(0.975, 3) * 40 * s / math.sqrt(4)
    mu3 = np.mean((np.array(y) - mean) ** 3)
    centre = 40 * mean + 40 * mu3 / (6 * s * s * 4)  # Johnson's shift
    assert (iv.low, iv.high) == pytest.approx((max(0, centre - half), centre + half))
    g1 = mu3 / np.std(y) ** 3
    assert iv.units_needed == math.ceil(25 * g1 * g1)


def test_ratio_by_hand_jackknife():
    y, x = np.array([3.0, 5.0, 4.0, 10.0, 7.0]), np.array([1.0, 2.0, 1.5, 3.0, 2.0])
    iv = sampling.ratio(y, x, population=100)
    r = y.sum() / x.sum()
    loo = np.array([(y.sum() - y[i]) / (x.sum() - x[i]) for i in range(5)])
    se = math.sqrt(4 / 5 * ((loo - loo.mean()) ** 2).sum())
    assert iv.estimate == pytest.approx(r)
    assert (iv.low, iv.high) == pytest.approx((r - stats.t.ppf(0.975, 4) * se, r + stats.t.ppf(0.975, 4) * se))


def test_full_pass_is_exact_and_draw_is_seeded():
    iv = sampling.total([1.0, 2.0, 3.0], population=3)
    assert iv.low == iv.high == iv.estimate == 6.0
    units = list(range(100))
    a, b = sampling.draw(units, 10, seed=5), sampling.draw(units, 10, seed=5)
    assert a == b and a == sorted(a) and len(set(a)) == 10
    assert sampling.draw(units, 10, seed=6) != a


def _video_corpus(m: int, rng: np.random.Generator) -> tuple[list[dict], dict[str, float]]:
    secs = rng.lognormal(np.log(8.0), 0.5, m)  # clip lengths: median 8 s
    fps = rng.choice([24.0, 25.0, 30.0], m)
    which = rng.choice(3, m, p=[0.5, 0.4, 0.1])
    w, h = np.array([640, 1280, 1920])[which], np.array([360, 720, 1080])[which]
    rate = rng.lognormal(np.log(2e6), 0.3, m) * w * h / (1280 * 720)  # bit rate scales with pixels
    frames = np.round(secs * fps)
    size = rate * secs / 8
    recs = [dict(seconds=float(secs[i]), frames=int(frames[i]), bytes=int(size[i]), bitrate=float(rate[i]),
                 width=int(w[i]), height=int(h[i]), fps=float(fps[i]), gop_intervals=[]) for i in range(m)]
    by_hand = {"hours": secs.sum() / 3600, "frames": frames.sum(), "bytes": sum(r["bytes"] for r in recs),
               "bitrate": (rate * secs).sum() / secs.sum(),
               "bits_per_pixel": (rate * secs).sum() / (w * h * fps * secs).sum(),
               "pixels_per_frame": (w * h * secs).sum() / secs.sum()}
    return recs, by_hand


def test_video_intervals_cover_the_full_pass_in_95_percent_of_seeds():
    m, n, seeds = 2000, 200, 1000
    recs, truth = _video_corpus(m, np.random.default_rng(7))
    hits = dict.fromkeys(truth, 0)
    for seed in range(seeds):
        iv = sampling.video_intervals(sampling.draw(recs, n, seed), m, seed)
        for k, v in truth.items():
            hits[k] += iv[k]["low"] <= v <= iv[k]["high"]
    coverage = {k: h / seeds for k, h in hits.items()}
    assert min(coverage.values()) >= 0.95, coverage


def test_token_intervals_cover_the_full_pass_in_95_percent_of_seeds():
    rng = np.random.default_rng(11)
    m, n, seeds = 1500, 150, 1000
    docs = rng.poisson(40, m) + 1
    tokens = np.array([rng.lognormal(np.log(800), 0.4, d).astype(int).sum() for d in docs])
    dup_docs = rng.binomial(docs, 0.08)  # 8 % of documents are copies
    dup_tokens = np.round(tokens * dup_docs / docs).astype(int)
    size = np.round(tokens * rng.normal(3.9, 0.2, m)).astype(int)
    recs = [dict(tokens=int(tokens[i]), documents=int(docs[i]), bytes=int(size[i]),
                 duplicate_documents=int(dup_docs[i]), duplicate_tokens=int(dup_tokens[i])) for i in range(m)]
    truth = {"tokens": tokens.sum(), "documents": docs.sum(), "effective_unique_tokens": (tokens - dup_tokens).sum(),
             "bytes_per_token": size.sum() / tokens.sum(), "duplicate_share": dup_docs.sum() / docs.sum()}
    hits = dict.fromkeys(truth, 0)
    for seed in range(seeds):
        iv = sampling.token_intervals(sampling.draw(recs, n, seed), m)
        for k, v in truth.items():
            hits[k] += iv[k]["low"] <= v <= iv[k]["high"]
    coverage = {k: h / seeds for k, h in hits.items()}
    assert min(coverage.values()) >= 0.95, coverage


def test_gop_median_bootstrap_covers():
    rng = np.random.default_rng(3)
    m, n, seeds = 400, 60, 100
    groups = [list(rng.choice([12, 24, 30, 48, 60], rng.integers(2, 8), p=[.2, .3, .2, .2, .1])) for _ in range(m)]
    truth = float(np.median(np.concatenate(groups)))
    hits = 0
    for seed in range(seeds):
        pick = sampling.draw(groups, n, seed)
        iv = sampling.pooled_quantile(pick, 0.5, m, seed, statistic=lambda v: float(np.median(v)))
        hits += iv.low <= truth <= iv.high
    assert hits / seeds >= 0.95


def test_by_cluster_sums_members_in_first_seen_order():
    assert sampling.by_cluster([1.0, 2.0, 3.0, 4.0], [7, 3, 7, 5]).tolist() == [4.0, 2.0, 4.0]
    assert sampling.by_cluster([1.0, 2.0], None).tolist() == [1.0, 2.0]
    # a total over clusters is the plain total of the clusters' sums
    iv = sampling.total([1.0, 2.0, 3.0, 4.0], 20, clusters=[0, 0, 1, 2])
    plain = sampling.total([3.0, 3.0, 4.0], 20)
    assert (iv.estimate, iv.low, iv.high) == (plain.estimate, plain.low, plain.high)


def test_shard_draw_intervals_cover_the_full_pass_in_95_percent_of_seeds():
    """Whole shards drawn (one-stage cluster sampling): 300 shards of 10 clips, the clips grouped by
    resolution so shards differ from one another as a real corpus's do; 60 shards drawn a seed."""
    recs, truth = _video_corpus(3000, np.random.default_rng(5))
    recs.sort(key=lambda r: r["width"])  # a shard holds one resolution (as a writer fed by source would)
    shard_of = [i // 10 for i in range(len(recs))]
    m_shards, drawn, seeds = 300, 60, 1000
    hits = dict.fromkeys(truth, 0)
    import random

    for seed in range(seeds):
        pick = set(random.Random(seed).sample(range(m_shards), m_shards)[:drawn])
        chosen = [(r, c) for r, c in zip(recs, shard_of) if c in pick]
        iv = sampling.video_intervals([r for r, _ in chosen], m_shards, seed, clusters=[c for _, c in chosen])
        for k, v in truth.items():
            hits[k] += iv[k]["low"] <= v <= iv[k]["high"]
    coverage = {k: h / seeds for k, h in hits.items()}
    assert min(coverage.values()) >= 0.95, coverage


def test_two_stage_weights_scale_each_member_to_its_shard():
    # shard 0: 2 of its 6 members drawn (weight 3); shard 1: 1 of 4 (weight 4); shard 2 whole (weight 1)
    values, clusters, weights = [1.0, 2.0, 5.0, 3.0, 4.0], [0, 0, 1, 2, 2], [3.0, 3.0, 4.0, 1.0, 1.0]
    assert sampling.by_cluster(values, clusters, weights).tolist() == [9.0, 20.0, 7.0]
    iv = sampling.total(values, 30, clusters=clusters, weights=weights)
    plain = sampling.total([9.0, 20.0, 7.0], 30)  # the ultimate clusters: the shards' estimated totals
    assert (iv.estimate, iv.low, iv.high) == (plain.estimate, plain.low, plain.high)
    r = sampling.ratio(values, [1.0] * 5, 30, clusters=clusters, weights=weights)
    assert r.estimate == pytest.approx(36.0 / (6 + 4 + 2))  # weighted sum over weighted count
    # the weighted median of pooled values: 10 of weight 1 and 20 of weight 3 -> 20
    q = sampling.pooled_quantile([[10.0], [20.0]], 0.5, 10, clusters=[0, 1], weights=[1.0, 3.0])
    assert q.estimate == 20.0


def test_two_stage_draw_intervals_cover_the_full_pass_in_95_percent_of_seeds():
    """Two stages: 300 shards of 4 to 16 clips (one resolution a shard), 120 shards drawn, and in each a
    seeded 40 % of its clips (ceil), each weighted by its shard's clips / clips drawn there. 120 meets
    Cochran's rule for the shards' byte totals (skewness 2.17: 25 g1^2 = 118 shards); 60 shards, below
    it, covered 94.7-95.8 %."""
    import random

    rng = np.random.default_rng(13)
    sizes = rng.integers(4, 17, 300)
    recs, truth = _video_corpus(int(sizes.sum()), rng)
    recs.sort(key=lambda r: r["width"])
    shard_of = np.repeat(np.arange(300), sizes).tolist()
    members: dict[int, list[int]] = {}
    for i, c in enumerate(shard_of):
        members.setdefault(c, []).append(i)
    hits = dict.fromkeys(truth, 0)
    seeds = 1000
    for seed in range(seeds):
        pick = random.Random(seed).sample(range(300), 300)[:120]
        chosen, clusters, weights = [], [], []
        for c in pick:
            take = math.ceil(0.4 * len(members[c]))
            for i in sorted(random.Random(f"{seed}:{c}").sample(members[c], take)):
                chosen.append(recs[i])
                clusters.append(c)
                weights.append(len(members[c]) / take)
        iv = sampling.video_intervals(chosen, 300, seed, clusters=clusters, weights=weights)
        for k, v in truth.items():
            hits[k] += iv[k]["low"] <= v <= iv[k]["high"]
    coverage = {k: h / seeds for k, h in hits.items()}
    assert min(coverage.values()) >= 0.95, coverage
