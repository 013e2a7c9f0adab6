"""Lesson figures: the planning questions, one at a time.

Run: PYTHONPATH=src python examples/lessons/decisions.py
The same questions on a whole plan: trainplan plan examples/lessons/finetune-and-serve-7b.toml
Held by tests/test_lessons.py::test_overlap_* and ::test_sanity_checks, ::test_recurring.
"""

from __future__ import annotations

from trainplan.planning import decisions


def main() -> None:
    for load, compute in ((0.100, 0.100), (0.200, 0.100)):
        o = decisions.overlap(load, compute)
        print(f"load {load * 1e3:.0f} ms, compute {compute * 1e3:.0f} ms: step {o.serial_step_seconds * 1e3:.0f} ms "
              f"without overlap ({o.serial_utilisation:.0%} busy), {o.overlapped_step_seconds * 1e3:.0f} ms with it; "
              f"speed-up {o.speedup:.2g}x, ceiling: {o.ceiling}")
    print("sanity checks:")
    # 7 B on an H100 at 0.30 and $5/h, 600 tokens a request (examples/lessons/serving.py): $0.0000393 a request
    for c in (decisions.revenue_check(3.93e-5, 1e-5), decisions.crossover_check(5.2),
              decisions.small_bill_check(7.37 * 3)):
        print(f"  {c.name}: {c.sentence}")
    r = decisions.recurring(206_000 * 3, 90 * 86400.0, 3932.0)
    print("  " + decisions.recurring_sentence(r))
    print("  " + decisions.attempts_sentence(206_000, 3, 618_000))


if __name__ == "__main__":
    main()
