"""Every registered metric through the same checks (as scikit-learn's test_common.py does for estimators).

Parametrised over ``core.registry.METRICS`` (a metric with a cut-off at several
k), so a metric added to the registry is checked here without any edit: it
matches its brute-force reference from a full sorted ranking
(``references.py``; a metric without one fails
``test_every_registered_metric_has_a_brute_force_reference``), its values do
not depend on how queries are split into chunks or ordered, an unknown query
(R = 0) gets null (0 under --empty-queries zero, ranks excepted), values stay
in range, moving a relevant item up never makes it worse in its registered
direction, and its names, columns and definition are consistent.
"""
import numpy as np
import pytest
from ranklists import csr
from references import RANGES, REFERENCES

from evalcore.core import registry
from evalcore.core.lists import binary_lists

KS = (1, 2, 5, 20)
#: (lowest, highest) of a float metric; ranks are integers from 1 up
FLOAT_RANGE = (0.0, 1.0)


def metric_columns(metric):
    return [registry.Column(metric)] if metric.parameter is None else [registry.Column(metric, k) for k in KS]


COLUMNS = [pytest.param(c, id=c.spec) for metric in registry.METRICS for c in metric_columns(metric)]
METRICS = [pytest.param(metric, id=metric.name) for metric in registry.METRICS]


def random_queries(seed, n=400):
    """(rank lists, R, full 0/1 rankings): unknown queries (R = 0), queries whose relevant items are partly
    or wholly missing from their list (R > ranks), perfect rankings, and lists of 1 to 40 items."""
    rng = np.random.default_rng(seed)
    lists, n_relevant, rankings = [], [], []
    for _ in range(n):
        length = int(rng.integers(1, 41))
        kind = rng.random()
        if kind < 0.1:
            ranks, r = [], 0
        elif kind < 0.2:
            r = int(rng.integers(1, min(length, 6) + 1))
            ranks = list(range(1, r + 1))
        else:
            count = int(rng.integers(0 if kind < 0.35 else 1, min(length, 8) + 1))
            ranks = sorted(rng.choice(np.arange(1, length + 1), size=count, replace=False).tolist())
            r = count + (int(rng.integers(1, 4)) if kind < 0.35 else 0)
        relevant = np.zeros(length, dtype=bool)
        relevant[np.asarray(ranks, dtype=np.int64) - 1] = True
        lists.append(ranks)
        n_relevant.append(r)
        rankings.append(relevant)
    return lists, np.asarray(n_relevant, dtype=np.int64), rankings


def values(column, lists, n_relevant, lengths=None):
    """The column's values; a metric that reads lists gets binary ones whose retrieved counts are ``lengths``
    (each ranking's length; by default each list's last rank, 0 for an empty one)."""
    indptr, ranks = csr(lists)
    n_relevant = np.asarray(n_relevant, dtype=np.int64)
    if lengths is None:
        lengths = [max(x, default=0) for x in lists]
    return column.compute(indptr, ranks, n_relevant, binary_lists(indptr, ranks, n_relevant, np.asarray(lengths)))


#: metrics defined for a query without relevant items (trec_eval's num_ret, utility): their references say so
DEFINED_WITHOUT_RELEVANT = {name for name, reference in REFERENCES.items()
                            if reference(np.zeros(3, dtype=bool), 0, 5) is not None}


def as_python(column, array):
    """The values as the report holds them: None where null."""
    null = column.metric.null(array)
    return [None if n else (int(v) if column.metric.dtype == "int64" else float(v)) for v, n in zip(array, null)]


# --------------------------------------------------------------------------- the registry and the tests agree


def test_every_registered_metric_has_a_brute_force_reference():
    assert set(REFERENCES) == {metric.name for metric in registry.METRICS}


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("seed", [0, 1])
def test_values_match_the_brute_force_reference_from_a_full_ranking(column, seed):
    lists, n_relevant, rankings = random_queries(seed)
    got = as_python(column, values(column, lists, n_relevant, [len(r) for r in rankings]))
    reference = REFERENCES[column.metric.name]
    want = [reference(rel, int(r), column.k) for rel, r in zip(rankings, n_relevant)]
    assert [g is None for g in got] == [w is None for w in want]
    for g, w in zip(got, want):
        if w is not None:
            assert g == pytest.approx(w, rel=1e-12, abs=1e-15)


# --------------------------------------------------------------------------- invariance


@pytest.mark.parametrize("column", COLUMNS)
def test_splitting_queries_into_chunks_does_not_change_a_value(column):
    lists, n_relevant, _ = random_queries(2)
    whole = values(column, lists, n_relevant)
    rng = np.random.default_rng(3)
    for _ in range(5):
        cuts = sorted(set(rng.integers(1, len(lists), size=int(rng.integers(1, 12))).tolist()))
        bounds = [0, *cuts, len(lists)]
        parts = [values(column, lists[a:b], n_relevant[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
        assert np.array_equal(np.concatenate(parts), whole, equal_nan=True)


@pytest.mark.parametrize("column", COLUMNS)
def test_the_order_of_queries_does_not_change_a_value(column):
    lists, n_relevant, _ = random_queries(4)
    order = np.random.default_rng(5).permutation(len(lists))
    shuffled = values(column, [lists[i] for i in order], n_relevant[order])
    assert np.array_equal(shuffled, values(column, lists, n_relevant)[order], equal_nan=True)


@pytest.mark.parametrize("column", COLUMNS)
def test_the_value_of_an_unknown_query_is_null(column):
    lists, n_relevant = [[], [2], [], [1, 3]], np.array([0, 1, 0, 2])
    got = values(column, lists, n_relevant)
    assert got.dtype == np.dtype(column.metric.dtype)
    if column.metric.name in DEFINED_WITHOUT_RELEVANT:  # the reference's value, from an empty ranking
        reference = REFERENCES[column.metric.name]
        assert as_python(column, got)[0::2] == [reference(np.zeros(0, dtype=bool), 0, column.k)] * 2
        return
    assert column.metric.null(got).tolist()[0::2] == [True, True]
    assert as_python(column, got)[0::2] == [None, None]


@pytest.mark.parametrize("column", COLUMNS)
def test_an_unknown_query_scores_zero_under_empty_queries_zero_except_ranks(column):
    lists, n_relevant = [[], [2], []], np.array([0, 1, 0])
    indptr, ranks = csr(lists)
    got = registry.compute([column], indptr, ranks, n_relevant, zero_empty=np.array([True, True, False]),
                           lists=binary_lists(indptr, ranks, n_relevant, np.array([0, 2, 0])))[column.name]
    plain = values(column, lists, n_relevant)
    assert np.array_equal(got[1:2], plain[1:2], equal_nan=True)  # a known query is not touched
    if column.metric.name in DEFINED_WITHOUT_RELEVANT:  # defined there: an empty ranking's value, zero or not
        assert got[0] == got[2] == REFERENCES[column.metric.name](np.zeros(0, dtype=bool), 0, column.k)
        return
    assert column.metric.null(got)[2]
    if column.metric.dtype == "int64":
        assert column.metric.null(got)[0]   # there is no rank to give
    else:
        assert got[0] == 0.0


# --------------------------------------------------------------------------- range and direction


@pytest.mark.parametrize("column", COLUMNS)
def test_values_lie_in_the_metric_range(column):
    lists, n_relevant, rankings = random_queries(6)
    got = values(column, lists, n_relevant, [len(r) for r in rankings])
    known = got[~column.metric.null(got)]
    if column.metric.dtype == "int64":
        assert known.min() >= 1 and known.max() <= max(len(r) for r in rankings)
    else:
        lowest, highest = RANGES.get(column.metric.name, FLOAT_RANGE)
        assert known.min() >= lowest and known.max() <= highest + 1e-15


@pytest.mark.parametrize("column", COLUMNS)
def test_moving_a_relevant_item_up_never_makes_the_value_worse(column):
    """Swap a relevant item with the non-relevant one just above it: better or equal, in the registered direction."""
    lists, n_relevant, rankings = random_queries(7)
    before, after, rows, lengths = [], [], [], []
    rng = np.random.default_rng(8)
    for ranks, r, ranking in zip(lists, n_relevant, rankings):
        movable = [i for i, x in enumerate(ranks) if x > 1 and (i == 0 or ranks[i - 1] < x - 1)]
        if not movable:
            continue
        i = movable[int(rng.integers(len(movable)))]
        before.append(ranks)
        after.append(ranks[:i] + [ranks[i] - 1] + ranks[i + 1:])
        rows.append(r)
        lengths.append(len(ranking))   # the same ranking, reordered: as many items retrieved
    old = as_python(column, values(column, before, rows, lengths))
    new = as_python(column, values(column, after, rows, lengths))
    assert len(rows) > 100
    for a, b in zip(old, new):
        if a is None or b is None:
            assert a is None and b is None
        elif column.metric.direction == "higher":
            assert b >= a - 1e-15
        else:
            assert b <= a


# --------------------------------------------------------------------------- names and definitions


@pytest.mark.parametrize("column", COLUMNS)
def test_names_columns_and_labels_lead_back_to_the_metric(column):
    assert registry.lookup(column.name) == column
    if column.summary is not None:
        assert registry.lookup(column.summary) == column
        assert registry.direction(column.summary) == column.metric.direction
    assert registry.parse(column.spec) == (column.metric, column.k)
    assert registry.select([column.spec, column.name]) == (column.spec,)
    assert registry.label(column.name) and "{k}" not in registry.label(column.name)


@pytest.mark.parametrize("metric", METRICS)
def test_the_definition_is_the_first_line_of_the_function_docstring(metric):
    name, _, formula = metric.definition.partition(" = ")
    assert name.lower() == metric.column.replace("{k}", "k") and formula
    assert metric.definition in registry.describe()[registry.METRICS.index(metric)].__str__()
