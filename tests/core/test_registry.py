"""The metric registry (core.registry): names, the columns of a run and their order, labels and direction."""
import pytest

from evalcore.core import registry
from evalcore.errors import InputError, OptionError

#: the per-query metric columns (and order) of the default set before the registry, with --ks 1,3,5,10 --map-at 50
LEGACY = ["first_rank", "last_rank", "ap", "ap_trapz", "inp", "rr",
          *[f"{m}_at_{k}" for k in (1, 3, 5, 10) for m in ("hit", "recall", "precision")], "ap_at_50"]
#: their summary columns before the registry (core/metrics.py's SUMMARY_MEANS and prefixes)
LEGACY_SUMMARY = {"ap": "map", "ap_trapz": "map_trapz", "inp": "minp", "rr": "mrr", "ap_at_50": "map_at_50",
                  **{c: c for c in LEGACY if c.startswith(("hit", "recall", "precision"))}}


def names(columns):
    return [c.name for c in columns]


def test_the_default_set_is_the_columns_and_order_of_before():
    columns = registry.run_columns(None, (1, 3, 5, 10), 50)
    assert names(columns) == LEGACY
    assert {c.name: c.summary for c in columns if c.summary} == LEGACY_SUMMARY
    assert names(registry.run_columns(None, (1, 3, 5, 10), None)) == LEGACY[:-1]


def test_a_selection_keeps_report_order_whatever_order_it_is_given_in():
    got = registry.run_columns(["ndcg@10", "recall@5", "rprec", "mrr", "map", "hit@1"], (1, 3), None)
    assert names(got) == ["ap", "rr", "rprec", "hit_at_1", "recall_at_5", "ndcg_at_10"]


def test_a_name_with_a_cut_off_adds_it_and_a_name_without_one_takes_every_ks():
    assert names(registry.run_columns(["recall@7"], (1, 3), None)) == ["recall_at_7"]
    assert names(registry.run_columns(["recall", "hit@3"], (1, 3), None)) == ["recall_at_1", "hit_at_3", "recall_at_3"]


def test_map_at_adds_map_at_k_to_a_selection_too():
    assert names(registry.run_columns(["map"], (1,), 100)) == ["ap", "ap_at_100"]
    assert names(registry.run_columns(["map@10", "map_at_20"], (1,), None)) == ["ap_at_10", "ap_at_20"]


def test_first_rank_is_added_once_for_the_engine():
    assert names(registry.run_columns(["map"], (1,), None, first_rank=True)) == ["first_rank", "ap"]
    assert names(registry.run_columns(["first_rank"], (1,), None, first_rank=True)) == ["first_rank"]


@pytest.mark.parametrize("given, want", [
    ("map", "map"), ("ap", "map"), ("MAP", "map"), ("rr", "mrr"), ("inp", "minp"), ("ap_trapz", "map_trapz"),
    ("recall@5", "recall@5"), ("recall_at_5", "recall@5"), ("nDCG@10", "ndcg@10"), ("ap_at_100", "map@100"),
    ("map_at_100", "map@100"), ("map@100", "map@100"), ("hit", "hit"), (" precision@3 ", "precision@3"),
    ("first_rank", "first_rank"), ("rprec", "rprec"),
    ("infAP", "infap"), ("binG", "bing"), ("G", "g"), ("Rndcg", "rndcg"), ("ndcg_rel", "ndcg_rel"),
])
def test_every_spelling_of_a_name_resolves(given, want):
    assert registry.select([given]) == (want,)


def test_select_splits_a_string_and_drops_repeats():
    assert registry.select("map, ap,recall@5,recall_at_5") == ("map", "recall@5")


@pytest.mark.parametrize("given, message", [
    (["mAPP"], r"--metrics: unknown metric 'mAPP' \(did you mean 'map'\?\); known: first_rank, last_rank, map, "
               r".*ndcg@k"),
    (["minp@10"], r"--metrics: 'minp@10': minp takes no cut-off"),
    (["recall@0"], r"--metrics: 'recall@0': the cut-off must be a positive integer"),
    (["map@k"], r"unknown metric 'map@k'"),
    ([], r"--metrics: give at least one metric name"),
    ("", r"--metrics: give at least one metric name"),
    ([1], r"--metrics: give metric names as a list of strings"),
    (None, r"--metrics: give metric names as a list of strings"),
])
def test_a_bad_name_is_an_input_error_naming_the_option_and_the_known_names(given, message):
    with pytest.raises(InputError, match=message) as info:
        registry.select(given)
    assert isinstance(info.value, OptionError) and info.value.option == "--metrics"


def test_names_and_spellings_are_unique():
    spellings = [s for m in registry.METRICS for s in {m.name, m.column, m.summary} - {None}]
    assert len(spellings) == len(set(spellings))
    assert len({m.function for m in registry.METRICS}) == len(registry.METRICS)


def test_columns_that_are_not_metrics_are_not_mistaken_for_one():
    for name in ("query", "key", "label", "group", "n_relevant", "n_junk", "n_judged", "top1", "top1_key",
                 "top1_score", "relevant_score", "accepted", "outcome", "gt_distance", "top1_distance", "n_queries",
                 "n_evaluated", "n_unknown", "threshold", "tp", "fp", "fn", "tn", "rejection_accuracy", "fpir",
                 "fnir", "target_fpir", "threshold_at_target_fpir", "fnir_at_target_fpir", "hit_at_0", "hit_at_05"):
        assert registry.lookup(name) is None and registry.label(name) is None


@pytest.mark.parametrize("name, label", [("map", "mAP"), ("ap", "AP"), ("map_trapz", "mAP (trapz)"), ("minp", "mINP"),
                                         ("mrr", "MRR"), ("first_rank", "first correct rank"), ("hit_at_5", "hit@5"),
                                         ("recall_at_10", "recall@10"), ("precision_at_1", "precision@1"),
                                         ("map_at_100", "mAP@100"), ("ap_at_100", "AP@100"),
                                         ("ndcg_at_10", "nDCG@10"), ("rprec", "R-precision")])
def test_labels_are_those_the_pages_showed_before(name, label):
    assert registry.label(name) == label


@pytest.mark.parametrize("name, direction", [("map", "higher"), ("hit_at_1", "higher"), ("map_at_100", "higher"),
                                             ("first_rank", "lower"), ("last_rank", "lower"), ("fpir", "lower"),
                                             ("fnir", "lower"), ("fnir_at_target_fpir", "lower"),
                                             ("rejection_accuracy", "higher"), ("n_queries", None)])
def test_direction_of_summary_columns(name, direction):
    assert registry.direction(name) == direction


def test_display_order_puts_metrics_without_a_cut_off_first_then_each_by_k():
    summary = ["group", "n_queries", "map", "map_trapz", "minp", "mrr", "hit_at_1", "recall_at_1", "precision_at_1",
               "hit_at_10", "recall_at_10", "precision_at_10", "hit_at_5", "map_at_100", "fpir"]
    assert registry.display_order(summary, "ranking") == ["map", "map_trapz", "minp", "mrr", "map_at_100", "hit_at_1",
                                                          "hit_at_5", "hit_at_10"]
    assert registry.display_order(summary, "cutoff") == ["recall_at_1", "recall_at_10", "precision_at_1",
                                                         "precision_at_10"]
    assert registry.display_order(summary, terminal=True) == ["map", "minp", "mrr", "map_at_100", "hit_at_1",
                                                              "hit_at_5", "hit_at_10"]


def test_the_listing_has_one_line_per_metric_with_name_columns_direction_and_definition():
    lines = [str(info) for info in registry.describe()]
    assert len(lines) == len(registry.METRICS)
    assert lines[2].split()[:5] == ["map", "ap", "->", "map", "higher"]
    assert "lower is better" in lines[0] and "(per query)" in lines[0]
    assert all("\n" not in line and " = " in line for line in lines)


def test_summary_names_are_the_metric_columns_of_a_runs_summary():
    assert registry.summary_names(None, (1, 5), 100) == ["map", "map_trapz", "minp", "mrr", "hit_at_1", "recall_at_1",
                                                         "precision_at_1", "hit_at_5", "recall_at_5", "precision_at_5",
                                                         "map_at_100"]
    assert registry.summary_names(["first_rank", "ap", "ndcg@3"], (1,), None) == ["map", "ndcg_at_3"]


def test_at_k_names_take_every_ks_and_survive_select():
    """``ndcg`` and ``mrr`` are the uncut measures; ``ndcg@k`` / ``mrr@k`` the cut ones at every --ks, also
    after ``select`` has spelt them (what a nightly job file stores)."""
    for given in ("ndcg@k,mrr@k,recall@k", registry.select("ndcg@k,mrr@k,recall@k")):
        names = registry.select(given)
        columns = {c.name for c in registry.run_columns(names, (1, 5), None)}
        assert columns == {"ndcg_at_1", "recall_at_1", "rr_at_1", "ndcg_at_5", "recall_at_5", "rr_at_5"}, given
    uncut = {c.name for c in registry.run_columns(registry.select("ndcg,mrr"), (1, 5), None)}
    assert uncut == {"rr", "ndcg"}
