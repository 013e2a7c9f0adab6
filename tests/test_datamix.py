"""Data: epochs per source of a mixture and person-hours of demonstrations, by hand."""

from __future__ import annotations

import pytest

from trainplan.accounts import datamix
from trainplan.errors import UserError


def test_mixture_epochs_by_hand() -> None:
    sources = [datamix.Source("web", 10e12, 0.8), datamix.Source("code", 0.5e12, 0.15),
               datamix.Source("books", 0.05e12, 0.05)]
    mix = datamix.mixture_epochs(sources, 15e12)
    web, code, books = mix.sources
    assert web.tokens_read == pytest.approx(0.8 * 15e12) and web.epochs == pytest.approx(12e12 / 10e12)
    assert code.epochs == pytest.approx(0.15 * 15e12 / 0.5e12)  # 4.5
    assert books.epochs == pytest.approx(0.05 * 15e12 / 0.05e12)  # 15
    assert mix.max_epochs == pytest.approx(15) and mix.most_repeated == "books"
    assert [s.repeated_beyond_useful for s in mix.sources] == [False, True, True]
    assert mix.unique_tokens_read == pytest.approx(10e12 + 0.5e12 + 0.05e12)


def test_weights_are_normalised() -> None:
    a = datamix.mixture_epochs([datamix.Source("a", 1e9, 3), datamix.Source("b", 1e9, 1)], 4e9)
    assert [s.share for s in a.sources] == [0.75, 0.25]
    assert [s.epochs for s in a.sources] == [3.0, 1.0]


def test_mixture_bad_input() -> None:
    with pytest.raises(UserError, match="sources"):
        datamix.mixture_epochs([], 1e9)
    with pytest.raises(UserError, match="sources.a.tokens"):
        datamix.mixture_epochs([datamix.Source("a", 0, 1)], 1e9)
    with pytest.raises(UserError, match="sources.a"):
        datamix.mixture_epochs([datamix.Source("a", 1, 1), datamix.Source("a", 1, 1)], 1e9)
    with pytest.raises(UserError, match="positive weight"):
        datamix.mixture_epochs([datamix.Source("a", 1, 0)], 1e9)


def test_demonstration_hours_by_hand() -> None:
    t = datamix.demonstration_hours(1000, seconds_per_task=60, seconds_per_reset=30)
    assert t.person_hours == pytest.approx(1000 * 90 / 3600)  # 25 h
    failing = datamix.demonstration_hours(1000, 60, 30, success_rate=0.8, operators=5)
    assert failing.attempts == pytest.approx(1250)
    assert failing.person_hours == pytest.approx(1250 * 90 / 3600)
    assert failing.wall_hours == pytest.approx(failing.person_hours / 5)
    with pytest.raises(UserError, match="success_rate"):
        datamix.demonstration_hours(10, 1, 1, success_rate=0)
