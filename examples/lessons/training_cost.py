"""Lesson figures: what training costs (6ND FLOP over peak x MFU, priced per accelerator-hour).

Run: PYTHONPATH=src python examples/lessons/training_cost.py
Held by tests/test_lessons.py::test_training_costs and ::test_one_b_on_four_accelerators.
The lessons quote one clean run (prices.attempts = 1 here); a plan budgets 3 (see pretrain-7b.toml).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainplan.accounts import compute as compute_mod
from trainplan.accounts import training_cost as cost_mod

H100_PEAK = 989e12  # the lessons round the H100-SXM's dense bf16 989.5 TFLOPS to 989
SECONDS_PER_YEAR = 365 * 86400.0


@dataclass(frozen=True)
class Run:
    name: str
    params: float
    tokens: float
    devices: int


RUNS = (
    Run("7 B LoRA fine-tune", 7e9, 5e7, 1),
    Run("7 B full fine-tune", 7e9, 1e9, 1),
    Run("7 B from scratch", 7e9, 1.4e12, 64),
    Run("400 B from scratch", 400e9, 15e12, 64),
)


def run_costs(peak: float = H100_PEAK, mfu: float = 0.40, price: float = 5.0) -> list[dict]:
    rows = []
    for r in RUNS:
        flops = compute_mod.training_flops(r.params, r.tokens, "none")
        hours = cost_mod.accelerator_hours(flops, peak, mfu, 1.0)
        bill = cost_mod.training_bill(hours, price, attempts=1)
        wall = hours * cost_mod.SECONDS_PER_HOUR / r.devices
        rows.append({"name": r.name, "flops": flops, "accelerator_hours": hours, "dollars": bill.dollars_per_attempt,
                     "devices": r.devices, "wall_hours": wall / 3600, "wall_days": wall / 86400,
                     "wall_years": wall / SECONDS_PER_YEAR})
    return rows


# A 1 B model on 2e11 tokens on four kinds of hardware: (name, peak FLOP/s, MFU, $ per hour, devices in it)
HARDWARE = (
    ("consumer GPU", 80e12, 0.35, 0.40),
    ("A100", 312e12, 0.45, 2.50),
    ("H100", 989e12, 0.45, 5.00),
    ("8 x H100 node", 7912e12, 0.40, 40.00),
)


def one_b_costs() -> list[dict]:
    flops = compute_mod.training_flops(1e9, 2e11, "none")
    rows = []
    for name, peak, mfu, price in HARDWARE:
        hours = cost_mod.accelerator_hours(flops, peak, mfu, 1.0)  # hours of the whole box
        rows.append({"name": name, "hours": hours, "days": hours / 24,
                     "dollars": cost_mod.training_bill(hours, price, 1).dollars_per_attempt})
    return rows


def three_figures(x: float) -> float:
    """x to three significant figures, as the lessons print dollars ($206,437 -> $206,000)."""
    return float(f"{x:.3g}")


def main() -> None:
    print("H100 at 989 TFLOPS x 0.40, $5 an hour, one clean run:")
    for r in run_costs():
        if r["wall_days"] > 3 * 365:
            when = f"{r['wall_years']:,.0f} years on {r['devices']}"
        elif r["wall_hours"] > 48:
            when = f"{r['wall_days']:,.0f} days on {r['devices']}"
        else:
            when = f"{r['wall_hours']:,.1f} hours on {r['devices']}"
        money = f"${r['dollars'] / 1e6:,.0f} M" if r["dollars"] >= 1e6 else f"${three_figures(r['dollars']):,.0f}"
        print(f"  {r['name']:<20} {r['flops']:.2e} FLOP  {money:>12}  {when}")
    print("1 B model on 2e11 tokens:")
    for r in one_b_costs():
        print(f"  {r['name']:<14} {r['hours']:>8,.0f} hours ({r['days']:>5,.1f} days)  ${r['dollars']:>7,.0f}")
    print("  the node costs about what one H100 does (same $5 per GPU-hour; MFU 0.40 against 0.45) "
          "and finishes about 7x sooner")


if __name__ == "__main__":
    main()
