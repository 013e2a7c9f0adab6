"""`trainplan solve KEY --for "FIGURE>=VALUE"`: the smallest (or largest) value of a key meeting a target.

How the search goes:
- a whole-numbered key (cores, micro-batch, accelerator count, ...) evaluated as arrays by the sweep:
  every integer, in blocks that double in size (1,024 first), so the answer is exact even when the
  figure is not monotone in the key; the smallest is the first integer that meets the target, the
  largest the last one before a whole block misses it;
- a real-valued key: a geometric grid over the range (4,097 points) through the sweep, then
  bisection between the two grid points either side of the boundary, to a relative 1e-9;
- a key the sweep has to loop over (one workload per value): bisection, which assumes the
  figure is monotone in the key over the range;
- `cluster.accelerator`: every catalogue entry is planned and those meeting the targets are
  ranked by the training cost, `compute.wall_seconds / 3600 x cluster.count x price per
  accelerator-hour` (--price KIND=DOLLARS, else prices.accelerator_hour for the workload's own
  accelerator, else the dated price table catalogue/accelerator_prices.toml).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainplan.planning import sweep
from trainplan.errors import UserError, did_you_mean
from trainplan.units import SECONDS_PER_HOUR
from trainplan.workload.load import load_workload
from trainplan.workload.schema import SECTIONS, Workload

# Integers evaluated in the first block; each further block doubles.
FIRST_BLOCK = 1024
# Whole-numbered keys are searched up to this value unless --range says otherwise.
INTEGER_CEILING = 2**24
# Real-valued keys without an upper bound are searched over [current / SPAN, current x SPAN].
SPAN = 1e6
GRID_POINTS = 4097
RELATIVE_TOLERANCE = 1e-9
# Keys whose values are whole in practice though the schema allows a fraction (a CPU core).
COUNTED_KEYS = frozenset({"cluster.cores"})
COST_FIGURE = "training_cost"
COST_FORMULA = "compute.wall_seconds / 3600 x cluster.count x price per accelerator-hour"

_TARGET = re.compile(r"^\s*(?P<figure>[A-Za-z_][\w.]*)\s*(?:(?P<op><=|>=|<|>|==)\s*(?P<value>.+?))?\s*$")


@dataclass(frozen=True)
class Target:
    figure: str
    op: str
    value: float
    text: str
    bare: bool = False  # a figure alone, without a comparison: only a yes/no figure may

    def met(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        with np.errstate(invalid="ignore"):
            return {"<=": x <= self.value, ">=": x >= self.value, "<": x < self.value, ">": x > self.value,
                    "==": x == self.value}[self.op] & ~np.isnan(x)


def parse_target(text: str) -> Target:
    """FIGURE>=VALUE, FIGURE<=VALUE (units allowed: "compute.seconds<=4 h", "pipeline.busy>=95 %"),
    or a yes/no figure alone ("memory.fits")."""
    m = _TARGET.match(text or "")
    if not m:
        raise UserError("--for", f"expected FIGURE>=VALUE or FIGURE<=VALUE such as pipeline.busy>=0.95, got {text!r}")
    figure, op, raw = m["figure"], m["op"], m["value"]
    from trainplan.planning.figures import FIGURES

    if figure in FIGURES and FIGURES[figure].dimension == "text":  # issue 29: a name compared as a number
        raise UserError("--for", f"{figure} is a text figure (a name, not a number); expected a target on a "
                        f"numeric or yes/no figure such as pipeline.busy>=0.95, got {text!r}")
    if op is None:
        return Target(figure, ">=", 1.0, text, bare=True)
    value = _figure_value(figure, raw)
    if not math.isfinite(value):
        raise UserError("--for", f"{figure}: expected a finite number, got {raw.strip()!r}")
    return Target(figure, op, value, text)


def _figure_value(figure: str, raw: str) -> float:
    from trainplan import units
    from trainplan.planning.figures import units_dimension

    raw = raw.strip().strip("\"'")
    if raw.lower() in ("true", "yes"):
        return 1.0
    if raw.lower() in ("false", "no"):
        return 0.0
    dim, factor = ("dollars", 1.0) if figure == COST_FIGURE else units_dimension(figure)
    try:
        if dim is None or dim == "frequency":
            return float(raw.replace("_", ""))
        return float(units.parse(raw, dim, figure)) * factor  # type: ignore[arg-type]
    except (UserError, ValueError):
        try:
            return float(raw)
        except ValueError:
            raise UserError("--for", f"{figure}: expected a number (units allowed), got {raw!r}") from None


def _bounds(key: str) -> tuple[float | None, bool, float | None]:
    """(lower bound, whether it is excluded, upper bound) from the schema's constraints."""
    section, name = key.split(".")[0], key.split(".")[1]
    lo, open_lo, hi = None, False, None
    for c in SECTIONS[section].model_fields[name].metadata:
        if hasattr(c, "gt"):
            lo, open_lo = float(c.gt), True
        elif hasattr(c, "ge"):
            lo = float(c.ge)
        elif hasattr(c, "le"):
            hi = float(c.le)
    return lo, open_lo, hi


class _Evaluator:
    """One figure of the report as a function of one key's values (arrays where the sweep allows)."""

    def __init__(self, file: Any, sets: list[str], calibration: Any, key: str, targets: list[Target]) -> None:
        self.file, self.sets, self.calibration, self.key, self.targets = file, list(sets), calibration, key, targets
        self.base = load_workload(file, self.sets, calibration)
        sample = sweep.evaluate(self.base, {})
        for t in targets:
            if t.figure not in sample:
                numeric = [k for k, v in sample.items() if v.dtype != object]
                raise UserError("--for", f"unknown figure {t.figure!r}; expected one of {', '.join(numeric)}")
            if sample[t.figure].dtype == object:
                raise UserError("--for", f"{t.figure} is not a number")
            if t.bare and sample[t.figure].dtype != bool:  # issue 16: "--for pipeline.busy" meant nothing
                raise UserError("--for", f"expected a comparison such as {t.figure}>=VALUE; only a yes/no "
                                f"figure (memory.fits) stands alone, got {t.text!r}")
        self.evaluations = 0

    def vectorized(self, sample_value: float) -> bool:
        axis = sweep.Axis(self.key, (sample_value,), True)
        return sweep._vectorizable(self.base, axis, self._load)

    def _load(self, extra: str) -> Workload:
        return load_workload(self.file, self.sets + [extra], self.calibration)

    def _point(self, value: float) -> dict[str, np.ndarray]:
        """The figures at one value; a value the workload's rules refuse (a pipeline degree that does not
        divide the layers, say) meets no target."""
        try:
            return sweep.evaluate(self._load(f"{self.key}={sweep._override(value)}"), {})
        except UserError:
            return {t.figure: np.array([np.nan]) for t in self.targets}

    def met(self, values: np.ndarray, vectorized: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        values = np.asarray(values, dtype=float)
        self.evaluations += len(values)
        if vectorized:
            figs = sweep.evaluate(self.base, {self.key: values}, [t.figure for t in self.targets])
        else:
            per = [self._point(float(v)) for v in values]
            figs = {t.figure: np.concatenate([p[t.figure] for p in per]) for t in self.targets}
        ok = np.ones(len(values), bool)
        for t in self.targets:
            ok &= t.met(figs[t.figure])
        return ok, {t.figure: np.asarray(figs[t.figure], float) for t in self.targets}


def solve(file: Any, sets: list[str], key: str, targets: list[str], largest: bool = False,
          calibration: Any = None, search_range: str | None = None) -> dict[str, Any]:
    """The smallest (or largest) value of `key` at which every target holds."""
    if not targets:
        raise UserError("--for", 'expected a target such as --for "pipeline.busy>=0.95"')
    parsed = [parse_target(t) for t in targets]
    if key == "cluster.accelerator":
        raise UserError("cluster.accelerator", "use cheapest_accelerator (trainplan solve cluster.accelerator)")
    if not sweep._is_numeric_key(key):
        raise UserError(key, "expected a numeric workload key (or cluster.accelerator, ranked by training cost)")
    ev = _Evaluator(file, sets, calibration, key, parsed)
    integer = sweep._is_whole(key) or key in COUNTED_KEYS
    lo, hi = _range(ev.base, key, integer, search_range)
    vectorized = ev.vectorized(lo)
    if key in LAYOUT_KEYS and not search_range:
        value = _scan_layout(ev, ev.base, key, largest)
    elif integer and vectorized:
        value = _scan_integers(ev, lo, hi, largest)
    elif integer:
        value = _bisect(ev, lo, hi, largest, integer=True)
    else:
        value = _grid_then_bisect(ev, lo, hi, largest, vectorized)
    if value is None:
        where = f"{_show(lo, integer)}..{_show(hi, integer)}"
        raise UserError("--for", f"{' and '.join(t.text for t in parsed)} is not met for any {key} in {where}")
    ok, figs = ev.met(np.asarray([value]), vectorized)
    out: dict[str, Any] = {"key": key, "value": int(value) if integer else float(value)}
    out["for"] = [t.text for t in parsed]
    out["figures"] = {f: _plain(v[0]) for f, v in figs.items()}
    out["searched"] = [_plain(lo), _plain(hi)]
    out["largest"] = largest
    return out


def _plain(x: Any) -> Any:
    x = float(x)
    if not math.isfinite(x):
        return None
    return int(x) if x.is_integer() and abs(x) < 2**53 else x


def _show(x: float, integer: bool) -> str:
    return f"{int(x)}" if integer else f"{x:g}"


def _range(w: Workload, key: str, integer: bool, search_range: str | None) -> tuple[float, float]:
    lo_bound, open_lo, hi_bound = _bounds(key)
    if search_range:
        parts = search_range.split(":")
        if len(parts) != 2:
            raise UserError("--range", f"expected START:STOP, got {search_range!r}")
        try:
            lo, hi = (float(sweep.parse_value(key, p.strip())) for p in parts)
        except UserError as err:  # parse_value names --vary; here the user typed --range (issue 16)
            raise UserError("--range", f"{key}: {err.expected}") from None
        if hi < lo:
            raise UserError("--range", f"expected STOP no smaller than START, got {search_range!r}")
        return lo, hi
    from trainplan.workload.schema import leaf_value

    if integer:
        lo = 0.0 if lo_bound is not None and not open_lo else 1.0
        return lo, float(hi_bound) if hi_bound is not None else float(INTEGER_CEILING)
    current = leaf_value(w, key)
    scale = float(current) if isinstance(current, (int, float)) and current and current > 0 else 1.0
    hi = hi_bound if hi_bound is not None else scale * SPAN
    lo = (hi if hi_bound is not None else scale) / SPAN
    if lo_bound is not None and not open_lo and lo_bound > 0:
        lo = lo_bound
    return lo, hi


#: layout degrees: a rule about what they divide makes most integers invalid and the targets not
#: monotone in them, so they are scanned over the degrees the layout allows (docs/sweep-and-solve.md)
LAYOUT_KEYS = frozenset({"parallel.tensor", "parallel.pipeline", "parallel.context", "parallel.expert",
                         "parallel.interleave", "parallel.data"})


def _scan_layout(ev: _Evaluator, w: Workload, key: str, largest: bool) -> float | None:
    """Every degree from 1 to cluster.count (each planned; those the rules refuse meet nothing)."""
    values = np.arange(1, int(w.cluster.count) + 1, dtype=float)
    ok, _ = ev.met(values, False)
    if not ok.any():
        return None
    return float(values[len(ok) - 1 - np.argmax(ok[::-1])] if largest else values[np.argmax(ok)])


def _scan_integers(ev: _Evaluator, lo: float, hi: float, largest: bool) -> float | None:
    start, size, best = int(lo), FIRST_BLOCK, None
    while start <= hi:
        values = np.arange(start, min(int(hi), start + size - 1) + 1, dtype=float)
        ok, _ = ev.met(values, True)
        if ok.any():
            if not largest:
                return float(values[np.argmax(ok)])
            best = float(values[len(ok) - 1 - np.argmax(ok[::-1])])
            if not ok[-1]:
                # lost within this block; look one more block ahead before calling it the largest
                ahead = np.arange(values[-1] + 1, min(hi, values[-1] + size) + 1)
                if len(ahead) == 0 or not ev.met(ahead, True)[0].any():
                    return best
        elif best is not None:
            return best
        start += size
        size *= 2
    if largest and best is not None and best >= hi:
        raise UserError("--for", f"still met at the top of the search ({int(hi)}); give --range START:STOP")
    return best


def _bisect(ev: _Evaluator, lo: float, hi: float, largest: bool, integer: bool,
            vectorized: bool = False) -> float | None:
    """Boundary of a monotone target over [lo, hi]."""
    def ok(x: float) -> bool:
        return bool(ev.met(np.asarray([x]), vectorized)[0][0])

    if not largest:
        if ok(lo):
            return lo
        if not ok(hi):
            return None
        bad, good = lo, hi  # invariant: bad misses, good meets
    else:
        if ok(hi):
            if hi >= INTEGER_CEILING or not integer:
                pass
            return hi
        if not ok(lo):
            return None
        good, bad = lo, hi
    while True:
        if integer:
            if abs(good - bad) <= 1:
                return good
            mid = math.floor((good + bad) / 2)
        else:
            if abs(good - bad) <= RELATIVE_TOLERANCE * max(abs(good), abs(bad)):
                return good
            mid = (good + bad) / 2
        if ok(mid):
            good = mid
        else:
            bad = mid


def _grid_then_bisect(ev: _Evaluator, lo: float, hi: float, largest: bool, vectorized: bool) -> float | None:
    points = GRID_POINTS if vectorized else 65
    grid = np.geomspace(lo, hi, points) if lo > 0 else np.linspace(lo, hi, points)
    ok, _ = ev.met(grid, vectorized)
    if not ok.any():
        return None
    if not largest:
        i = int(np.argmax(ok))
        if i == 0:
            return float(grid[0])
        return _bisect(ev, float(grid[i - 1]), float(grid[i]), False, False, vectorized)
    i = len(ok) - 1 - int(np.argmax(ok[::-1]))
    if i == len(grid) - 1:
        return float(grid[-1])
    return _bisect(ev, float(grid[i]), float(grid[i + 1]), True, False, vectorized)


# ---------------------------------------------------------------- the cheapest accelerator


def parse_prices(items: list[str]) -> dict[str, float]:
    from trainplan import units

    out = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise UserError("--price", f"expected KIND=DOLLARS per accelerator-hour, got {item!r}")
        value = units.parse(raw.strip(), "dollars", f"--price {name.strip()}")
        if not 0 <= value <= MAX_PRICE_HOUR:  # a negative price would rank first (issue 16)
            raise UserError(f"--price {name.strip()}", f"expected dollars per accelerator-hour from 0 to "
                            f"{MAX_PRICE_HOUR:g}, got {raw.strip()!r}")
        if name.strip().lower() in out:  # the first price would be dropped without a word (issue 29)
            raise UserError(f"--price {name.strip()}", "expected one price for each kind, got it twice")
        out[name.strip().lower()] = value  # any case
    return out


#: The highest --price accepted: prices.accelerator_hour's plausible cap (workload/schema.py).
MAX_PRICE_HOUR = 1e7


def _price_of(name: str, given: dict[str, float], own_accelerator: Any, own_price: float) -> tuple[float, str]:
    """Price per accelerator-hour of a catalogue kind: --price first; the workload's
    prices.accelerator_hour for the accelerator it names; the dated price table
    (catalogue/accelerator_prices.toml); else prices.accelerator_hour, said so."""
    from trainplan.catalogue.accelerators import price_table

    if name in given:
        return given[name], "--price"
    if own_accelerator == name:
        return own_price, "prices.accelerator_hour of the workload"
    table = price_table()
    if name in table:
        return table[name].dollars_per_hour, table[name].source
    return own_price, "no catalogue price: prices.accelerator_hour of the workload"


def cheapest_accelerator(file: Any, sets: list[str], targets: list[str] = (), calibration: Any = None,
                         prices: dict[str, float] | None = None, among: list[str] | None = None) -> dict[str, Any]:
    """Plan the workload on every catalogue entry (or `among`); rank those meeting the targets by
    training cost = compute.wall_seconds / 3600 x cluster.count x price per accelerator-hour."""
    from trainplan.catalogue.accelerators import accelerators

    prices = prices or {}
    catalogue = accelerators()
    names = [n.strip().lower() for n in among] if among else list(catalogue)  # catalogue names in any case
    for n in list(names) + list(prices):
        if n not in catalogue:
            raise UserError("cluster.accelerator", f"unknown catalogue entry {n!r}{did_you_mean(n, catalogue)}; "
                            f"expected one of {', '.join(catalogue)}")
    parsed = [parse_target(t) for t in targets]
    own_accelerator = load_workload(file, list(sets), calibration).cluster.accelerator
    own_accelerator = own_accelerator.strip().lower() if isinstance(own_accelerator, str) else own_accelerator
    rows = []
    for name in names:
        row: dict[str, Any] = {"accelerator": name}
        try:
            w = load_workload(file, list(sets) + [f"cluster.accelerator={name}"], calibration)
            figs = sweep.evaluate(w, {})
        except UserError as err:
            row.update(meets=False, reason=str(err))
            rows.append(row)
            continue
        price, price_source = _price_of(name, prices, own_accelerator, w.prices.accelerator_hour)
        wall = float(figs["compute.wall_seconds"][0])
        cost = wall / SECONDS_PER_HOUR * w.cluster.count * price
        figs[COST_FIGURE] = np.asarray([cost])
        row.update(price_hour=price, price_source=price_source, wall_seconds=_plain(wall),
                   training_cost=_plain(cost))
        meets = True
        for t in parsed:
            if t.figure not in figs:
                raise UserError("--for", f"unknown figure {t.figure!r}")
            if t.bare and np.asarray(figs[t.figure]).dtype != bool:
                raise UserError("--for", f"expected a comparison such as {t.figure}>=VALUE; only a yes/no "
                                f"figure (memory.fits) stands alone, got {t.text!r}")
            value = figs[t.figure][0]
            row[t.figure] = value.item() if isinstance(value, np.generic) else value
            meets &= bool(t.met(np.asarray([float(value)]))[0])
        row["meets"] = meets and math.isfinite(cost)
        rows.append(row)
    ranked = sorted((r for r in rows if r["meets"]), key=lambda r: r["training_cost"])
    if not ranked:
        what = " and ".join(t.text for t in parsed) or "a finite training cost"
        raise UserError("--for", f"{what} is not met on any accelerator of {', '.join(names)}")
    for rank, r in enumerate(ranked, 1):
        r["rank"] = rank
    rest = [r for r in rows if not r["meets"]]
    return {"key": "cluster.accelerator", "value": ranked[0]["accelerator"], "ranked_by": COST_FIGURE,
            "cost_formula": COST_FORMULA, "for": [t.text for t in parsed], "candidates": ranked + rest}
