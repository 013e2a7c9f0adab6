"""A seeded random sample of a corpus, and every corpus figure with a confidence interval (issue 26).

`data inspect URL --sample N` inspects N of the corpus's M units (files, or members of
shards) drawn uniformly without replacement with a seeded generator, and states each corpus
figure with an interval at `DEFAULT_CONFIDENCE` (docs/data-where-it-lives.md):

- a total (hours, frames, bytes, tokens, documents, effective unique tokens) is M times the
  sample mean of the per-unit values y_i, with standard error M s_y / sqrt(n);
- a ratio (bit rate = bits / seconds, bits per pixel, pixels per frame weighted by duration,
  bytes per token, the duplicate share = duplicate documents / documents) is the ratio of the
  sample's sums R = sum y / sum x, with the linearised standard error
  sqrt(sum (y_i - R x_i)^2 / (n - 1) / n) / mean(x);
- a quantile of values pooled over units (the keyframe interval's median) by a percentile
  bootstrap over units (`BOOTSTRAP_RESAMPLES` resamples, seeded).

Drawn by shard (`data inspect --sample N --by-shard`), the units are whole shards: m of the corpus's M
shards drawn uniformly, every member of each inspected, until N members are in hand. Each figure is
then the same estimator over shards (one-stage cluster sampling): a shard's value is the sum of its
members' (`clusters` names each member's shard), n = m and the population M, so a total is M times the
mean shard total and a ratio the ratio of the shards' sums. The shards not drawn are never read.

Two stages (`--by-shard --shard-fraction F`): inside each drawn shard only a seeded random share F of its
M_i members is inspected (m_i = ceil(F M_i), at least one), each weighted by M_i / m_i, the inverse of
its chance of being drawn inside its shard. A shard's value is then its weighted sum, the unbiased
estimate of its total, and the same estimators run over those estimates: the ultimate-cluster
estimator, whose with-replacement variance between the shards' estimated totals holds the
within-shard sampling's variance as well (it is conservative as the one-stage one is). The keyframe
median is the weighted median of the pooled intervals (numpy's inverted-cdf quantile with weights).

Intervals are estimate +- t s.e. with Student's t at n - 1 degrees of freedom. The standard
errors are those of sampling with replacement, without the finite-population factor
(1 - n/M): larger by 1/sqrt(1 - n/M), so the interval is conservative (it covers at least its
confidence) whatever share of the corpus is sampled; a full pass (n = M) is exact, width 0.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

from trainplan.errors import UserError

# The confidence every interval is stated at (a fraction): the usual 95 %.
DEFAULT_CONFIDENCE = 0.95
# Resamples of the percentile bootstrap for pooled quantiles: 400 puts the Monte Carlo error of a
# 2.5 % tail quantile at about sqrt(0.025 * 0.975 / 400) = 0.8 % of the resamples.
BOOTSTRAP_RESAMPLES = 400

T = TypeVar("T")


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    confidence: float
    method: str
    # Cochran's rule for the normal approximation of a mean of skewed values: n > 25 g1^2, g1 the
    # sample skewness of the per-unit values (of the residuals y - R x for a ratio); None for the
    # bootstrap and for a full pass. A sample smaller than this may cover less than its confidence.
    units_needed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def draw(units: Sequence[T], n: int | None, seed: int = 0) -> list[T]:
    """A uniform random sample of `n` units without replacement (all when n is None or >= their
    number), kept in the corpus's order so a deduplication sees documents in corpus order."""
    if n is None or n >= len(units):
        return list(units)
    if n < 1:
        raise UserError("--sample", f"expected at least 1 unit, got {n}")
    keep = sorted(random.Random(seed).sample(range(len(units)), n))
    return [units[i] for i in keep]


def _t(n: int, confidence: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.5 + confidence / 2, max(n - 1, 1)))


def by_cluster(values: Sequence[float], clusters: Sequence[int] | None,
               weights: Sequence[float] | None = None) -> np.ndarray:
    """The values summed by cluster (a shard's members into the shard), in the clusters' first-seen order,
    each times its weight (a member's M_i / m_i of a two-stage draw); the values themselves without
    clusters."""
    y = np.asarray(values, dtype=float)
    if weights is not None:
        y = y * np.asarray(weights, dtype=float)
    if clusters is None:
        return y
    _, first, index = np.unique(np.asarray(clusters), return_index=True, return_inverse=True)
    sums = np.bincount(index, weights=y, minlength=len(first))
    return sums[np.argsort(first)]


def total(values: Sequence[float], population: int, confidence: float = DEFAULT_CONFIDENCE,
          clusters: Sequence[int] | None = None, weights: Sequence[float] | None = None) -> Interval | None:
    """The corpus total of a per-unit figure from a sample of `len(values)` of `population` units (None
    from a sample of one unit of several: it has no spread to measure). With `clusters`, the units are the
    clusters (population: the clusters in the corpus) and a cluster's value the sum of its members' (each
    times its `weights`, a two-stage draw)."""
    y = by_cluster(values, clusters, weights)
    n = len(y)
    if n == 0:
        raise UserError("--sample", "expected at least one unit inspected")
    estimate = population * float(y.mean())
    if n >= population or n < 2:
        half = 0.0 if n >= population else math.inf
    else:
        s2 = float(y.var(ddof=1))
        half = _t(n, confidence) * population * math.sqrt(s2 / n)
        # Johnson's (1978) skewness correction: the interval's centre moves by mu3 / (6 s^2 n) (the
        # estimate itself stays M x mean, unbiased)
        shift = population * float(((y - y.mean()) ** 3).mean()) / (6 * s2 * n) if s2 > 0 else 0.0
        return _interval(estimate, half, confidence, n, population,
                         "total: M x sample mean, Johnson's skew-corrected t", _units_needed(y), shift)
    return _interval(estimate, half, confidence, n, population, "total: M x sample mean")


def ratio(numerators: Sequence[float], denominators: Sequence[float], population: int,
          confidence: float = DEFAULT_CONFIDENCE, clusters: Sequence[int] | None = None,
          weights: Sequence[float] | None = None) -> Interval | None:
    """sum(y) / sum(x) over the sample, with its linearised interval; None where sum(x) is 0. With
    `clusters` (and `weights`), over the clusters' (weighted) sums, as `total`."""
    y = by_cluster(numerators, clusters, weights)
    x = by_cluster(denominators, clusters, weights)
    n = len(y)
    if n == 0 or x.sum() <= 0:
        return None
    r = float(y.sum() / x.sum())
    if n >= population or n < 2:
        half = 0.0 if n >= population else math.inf
    else:
        left_out = (y.sum() - y) / (x.sum() - x)  # the ratio with each unit left out
        se = math.sqrt((n - 1) / n * float(((left_out - left_out.mean()) ** 2).sum()))
        half = _t(n, confidence) * se
        return _interval(r, half, confidence, n, population, "ratio of sums, jackknife s.e.", _units_needed(y - r * x))
    return _interval(r, half, confidence, n, population, "ratio of sums, jackknife s.e.")


def pooled_quantile(groups: Sequence[Sequence[float]], q: float, population: int, seed: int = 0,
                    confidence: float = DEFAULT_CONFIDENCE,
                    statistic: Callable[[np.ndarray], float] | None = None,
                    clusters: Sequence[int] | None = None,
                    weights: Sequence[float] | None = None) -> Interval | None:
    """A quantile of the values of all units pooled (units resampled by a percentile bootstrap; with
    `clusters`, the clusters are resampled, each holding its members' values). With `weights` (one a
    group, a two-stage draw's) the weighted inverted-cdf quantile at q, each value its group's weight."""
    arrays = [np.asarray(g, dtype=float) for g in groups]
    if weights is not None and len(set(weights)) > 1:
        value_weights = [np.full(len(a), w) for a, w in zip(arrays, weights)]
        tagged = [np.stack([a, w]) for a, w in zip(arrays, value_weights)]  # row 0 values, row 1 weights

        def stat_of(v: np.ndarray) -> float:
            return float(np.quantile(v[0], q, weights=v[1], method="inverted_cdf"))
        arrays, stat = tagged, stat_of
    else:
        arrays = [a[np.newaxis, :] for a in arrays]
        plain = statistic or (lambda v: float(np.quantile(v, q, method="inverted_cdf")))

        def stat(v: np.ndarray) -> float:
            return plain(v[0])
    if clusters is not None:
        merged: dict[int, list[np.ndarray]] = {}
        for c, a in zip(clusters, arrays):
            merged.setdefault(c, []).append(a)
        arrays = [np.concatenate(v, axis=1) for v in merged.values()]
    pooled = np.concatenate(arrays, axis=1) if arrays else np.zeros((1, 0))
    if pooled.shape[1] == 0:
        return None
    estimate = stat(pooled)
    n = len(arrays)
    if n >= population:
        return _interval(estimate, 0.0, confidence, n, population, "pooled quantile (full pass)")
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        pick = [arrays[i] for i in rng.integers(0, n, n)]
        v = np.concatenate(pick, axis=1)
        if v.shape[1]:
            values.append(stat(v))
    if not values:
        return None
    low, high = np.quantile(values, [0.5 - confidence / 2, 0.5 + confidence / 2])
    return Interval(estimate, min(float(low), estimate), max(float(high), estimate), confidence,
                    f"pooled quantile, percentile bootstrap over units ({BOOTSTRAP_RESAMPLES} resamples)")


def _units_needed(values: np.ndarray) -> int | None:
    """25 g1^2 (Cochran's rule), g1 the sample skewness; None when the values do not vary."""
    if len(values) < 3:
        return None
    s = float(values.std())
    if s <= 0:
        return None
    g1 = float(((values - values.mean()) ** 3).mean()) / s ** 3
    return int(math.ceil(25 * g1 * g1))


def _interval(estimate: float, half: float, confidence: float, n: int, population: int, method: str,
              units_needed: int | None = None, shift: float = 0.0) -> Interval | None:
    if n >= population:
        return Interval(estimate, estimate, estimate, confidence, f"{method} (every unit inspected: exact)")
    if not math.isfinite(half):  # one unit: no spread to measure, no interval
        return None
    # every corpus figure here is >= 0 (a count, a duration, a rate, a share): the interval stops at 0
    return Interval(estimate, max(0.0, estimate + shift - half), estimate + shift + half, confidence,
                    f"{method}, Student t at {n - 1} d.o.f., with-replacement s.e. (conservative)", units_needed)


# ---------------------------------------------------------------- the corpus figures


def video_intervals(records: Sequence[Any], population: int, seed: int = 0,
                    confidence: float = DEFAULT_CONFIDENCE, clusters: Sequence[int] | None = None,
                    weights: Sequence[float] | None = None) -> dict[str, dict[str, Any]]:
    """Intervals of a video corpus's figures from per-file records (inspect.VideoFile or dicts with
    seconds, frames, bytes, bitrate, width, height, fps and gop_intervals); `clusters` and `weights` as
    in `total`."""
    c, w = clusters, weights
    get = (lambda r, k: r[k]) if records and isinstance(records[0], dict) else getattr
    secs = [get(r, "seconds") for r in records]
    bits = [get(r, "bitrate") * get(r, "seconds") for r in records]
    pixel_seconds = [get(r, "width") * get(r, "height") * get(r, "seconds") for r in records]
    pixel_rate_seconds = [p * get(r, "fps") for p, r in zip(pixel_seconds, records)]
    out: dict[str, Interval | None] = {
        "hours": total([s / 3600.0 for s in secs], population, confidence, c, w),
        "seconds": total(secs, population, confidence, c, w),
        "frames": total([get(r, "frames") for r in records], population, confidence, c, w),
        "bytes": total([get(r, "bytes") for r in records], population, confidence, c, w),
        "bitrate": ratio(bits, secs, population, confidence, c, w),
        "bits_per_pixel": ratio(bits, pixel_rate_seconds, population, confidence, c, w),
        "pixels_per_frame": ratio(pixel_seconds, secs, population, confidence, c, w),
        "gop_median": pooled_quantile([get(r, "gop_intervals") for r in records], 0.5, population, seed,
                                      confidence, statistic=lambda v: float(np.median(v)), clusters=c, weights=w),
    }
    return {k: v.to_dict() for k, v in out.items() if v is not None}


def token_intervals(per_file: Sequence[dict[str, Any]], population: int,
                    confidence: float = DEFAULT_CONFIDENCE, clusters: Sequence[int] | None = None,
                    weights: Sequence[float] | None = None) -> dict[str, dict[str, Any]]:
    """Intervals of a token corpus's figures from per-file records (tokens, documents, bytes and the
    duplicate documents and tokens found in each file); `clusters` and `weights` as in `total`."""
    c, w = clusters, weights
    tokens = [f["tokens"] for f in per_file]
    docs = [f["documents"] for f in per_file]
    dup_docs = [f.get("duplicate_documents", 0) for f in per_file]
    dup_tokens = [f.get("duplicate_tokens", 0) for f in per_file]
    out: dict[str, Interval | None] = {
        "tokens": total(tokens, population, confidence, c, w),
        "documents": total(docs, population, confidence, c, w),
        "stored_bytes": total([f["bytes"] for f in per_file], population, confidence, c, w),
        "effective_unique_tokens": total([t - d for t, d in zip(tokens, dup_tokens)], population, confidence, c, w),
        "bytes_per_token": ratio([f["bytes"] for f in per_file], tokens, population, confidence, c, w),
        "duplicate_share": ratio(dup_docs, docs, population, confidence, c, w),
        "duplicate_token_share": ratio(dup_tokens, tokens, population, confidence, c, w),
    }
    return {k: v.to_dict() for k, v in out.items() if v is not None}
