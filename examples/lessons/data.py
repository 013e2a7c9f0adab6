"""Lesson figures: what data costs in people's time.

Run: PYTHONPATH=src python examples/lessons/data.py  (or `trainplan data demos 10000 --task 25s --reset 12s`)
Held by tests/test_lessons.py::test_demonstrations and ::test_examples_per_person_hour.
"""

from __future__ import annotations

from trainplan.accounts import datamix

TASK_SECONDS = 25.0
RESET_SECONDS = 12.0

# examples one person-hour yields, by source (the lessons' figures; teleoperation is derived)
SOURCE_RATES = {
    "cross-embodiment data": 1250.0,
    "model-generated": 500.0,
    "human video": 2000.0,
    "simulation": 5000.0,
}


def figures() -> dict:
    teleop = datamix.demonstrations_per_person_hour(TASK_SECONDS, RESET_SECONDS)
    rates = {"teleoperation": teleop, **SOURCE_RATES}
    return {
        "per_person_hour": teleop,
        "person_hours": {n: datamix.demonstration_hours(n, TASK_SECONDS, RESET_SECONDS).person_hours
                         for n in (10_000, 100_000, 1_000_000)},
        "rates": rates,
        "hours_for_1e5": {k: datamix.person_hours_for(1e5, r) for k, r in rates.items()},
    }


def main() -> None:
    f = figures()
    print(f"{TASK_SECONDS:g} s a task and {RESET_SECONDS:g} s to reset: {f['per_person_hour']:.0f} demonstrations "
          f"per person-hour")
    for n, h in f["person_hours"].items():
        print(f"  {n:>9,} demonstrations: {h:,.0f} person-hours")
    print("examples per person-hour, and person-hours for 1e5 examples:")
    for k, r in f["rates"].items():
        print(f"  {k:<22} {r:>6,.0f}  {f['hours_for_1e5'][k]:>6,.0f} h")


if __name__ == "__main__":
    main()
