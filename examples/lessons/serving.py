"""Lesson figures: what serving costs, when it passes the training bill, and the ladder of models.

Priced on the compute roofline (peak x MFU / 2P tokens/s): the lessons' back-of-envelope. A plan
(`trainplan serve`) also counts weight and KV-cache reads, so it finds small batches memory-bound.
Run: PYTHONPATH=src python examples/lessons/serving.py
Held by tests/test_lessons.py::test_serving_7b, ::test_crossover_days, ::test_serving_ladder.
"""

from __future__ import annotations

from trainplan.accounts import serving as serving_mod
from trainplan.planning.decisions import dollars

H100_PEAK = 989e12  # dense bf16, as the lessons round it
MFU = 0.30
PRICE = 5.0  # dollars per H100-hour
TOKENS_PER_REQUEST = 600
TRAINING_BILL = 206_000.0  # the 7 B from-scratch bill of training_cost.py, as the lessons round it
INT8_SPEEDUP = 2.0  # the lessons count int8 tensor cores as twice the bf16 rate

# name, parameters, int8?, tokens per request
LADDER = (
    ("70 B fp16", 70e9, False, TOKENS_PER_REQUEST),
    ("7 B fp16", 7e9, False, TOKENS_PER_REQUEST),
    ("7 B int8", 7e9, True, TOKENS_PER_REQUEST),
    ("1 B distilled int8", 1e9, True, TOKENS_PER_REQUEST),
    # one prediction per request: 2 x 1e4 FLOP, no tokens to generate
    ("logistic regression 1e4", 1e4, False, 1),
)


def serve_7b() -> serving_mod.ComputeBoundServing:
    return serving_mod.compute_bound_serving(7e9, H100_PEAK, MFU, PRICE, TOKENS_PER_REQUEST)


def crossover(requests_per_day: float) -> float:
    """Days until requests x cost per request add up to the training bill."""
    return serving_mod.crossover_days(TRAINING_BILL, requests_per_day * serve_7b().cost_per_request)


def ladder() -> list[dict]:
    rows = []
    for name, params, int8, tokens in LADDER:
        e = serving_mod.compute_bound_serving(params, H100_PEAK, MFU, PRICE, tokens, INT8_SPEEDUP if int8 else 1.0)
        rows.append({"name": name, "cost_per_million_requests": e.cost_per_million_requests})
    top = rows[0]["cost_per_million_requests"]
    for r in rows:
        r["times_cheaper"] = top / r["cost_per_million_requests"]
    return rows


def money(x: float) -> str:
    """Three significant figures, never an exponent: $393, $2.81, $0.0000000936."""
    return f"${x:,.3g}" if x >= 1 else dollars(x)


def main() -> None:
    e = serve_7b()
    print(f"7 B on an H100 at {MFU}: {e.tokens_per_second:,.0f} tokens/s; at {TOKENS_PER_REQUEST} tokens a request "
          f"${e.cost_per_request:.7f} a request, ${e.cost_per_thousand_requests:.4f} per 1,000")
    for rate in (1e4, 1e6, 1e8, 1e9):
        print(f"  {rate:>8.0e} requests a day: serving passes the ${TRAINING_BILL:,.0f} training bill on day "
              f"{crossover(rate):,.0f}")
    print(f"ladder at ${PRICE:g}/h and {MFU}, int8 counted as {INT8_SPEEDUP:g}x speed:")
    for r in ladder():
        print(f"  {r['name']:<24} {money(r['cost_per_million_requests']):>14} per million requests  "
              f"{r['times_cheaper']:>14,.0f}x cheaper")


if __name__ == "__main__":
    main()
