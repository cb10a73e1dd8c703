"""Bench timings: alternated pairs, medians and paired ratios (evalcore.jobs.timing), against hand-made runs."""
import statistics

from evalcore.jobs.timing import Paired, Samples, alternate


def test_alternate_runs_the_pair_in_turn_and_keeps_each_ones_seconds():
    calls: list[str] = []
    a_seconds, b_seconds = iter([3.0, 5.0, 4.0, 9.0]), iter([1.0, 2.0, 1.0, 3.0])

    def first() -> float:
        calls.append("a")
        return next(a_seconds)

    def second() -> float:
        calls.append("b")
        return next(b_seconds)

    timed = alternate(first, second, 4)
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert timed.first.seconds == (3.0, 5.0, 4.0, 9.0) and timed.second.seconds == (1.0, 2.0, 1.0, 3.0)
    assert timed.ratios == (3.0, 2.5, 4.0, 3.0)
    assert timed.ratio == statistics.median([3.0, 2.5, 4.0, 3.0]) == 3.0
    assert timed.first.median == 4.5


def test_the_median_of_paired_ratios_is_not_the_ratio_of_medians():
    # a load that doubles both runs of one pair moves the medians' ratio, not the paired one
    timed = Paired(Samples((1.0, 2.0, 1.1)), Samples((0.5, 1.0, 0.55)))
    assert timed.ratio == 2.0 and timed.ratio_text() == "2.00 (2.00-2.00)"
    assert Samples((2.0, 1.0, 3.0)).text() == "  2.00 s (1.00-3.00, n=3)"
