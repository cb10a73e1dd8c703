"""Input kinds as a registry (issue 36 item 2): the arrays choose the kind in one place, code above asks the kind,
and a kind added here (a test, as a plug-in would) runs end to end with no edit outside the registries."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import zarr

import evalcore
from evalcore.core.ranking import rank_by_lists
from evalcore.engine import tasks
from evalcore.io import dataset as ds
from evalcore.io import kinds


def group_with(**arrays):
    group = zarr.open_group(zarr.storage.MemoryStore(), mode="w")
    for name, values in arrays.items():
        group.create_array(name.replace("__", "/"), data=np.asarray(values))
    return group


def test_the_arrays_choose_the_kind_in_the_registry_s_order():
    emb = np.eye(3, dtype=np.float32)
    assert kinds.kind_of(group_with(query__emb=emb, gallery__emb=emb)) is kinds.EMBEDDINGS
    assert kinds.kind_of(group_with(query__emb=emb, gallery__emb=emb, ranking__item=np.zeros((3, 2), np.int64))) \
        is kinds.LISTS
    assert kinds.kind_of(group_with(ranking__item=np.zeros((3, 2), np.int64), scores__value=emb)) is kinds.SCORES
    assert kinds.kind_of(group_with(query__emb=emb)) is None  # half of the embeddings choose nothing
    assert [kinds.get(n).name for n in kinds.PRECEDENCE][:3] == ["scores/value", "ranking/item", "embeddings"]


def test_what_a_kind_supports_is_asked_of_the_kind():
    gallery = np.eye(4, dtype=np.float32)
    lists = {"query/label": np.arange(4), "gallery/label": np.arange(4),
             "ranking/item": np.tile(np.arange(4), (4, 1))}
    with pytest.raises(evalcore.OptionError) as caught:
        evalcore.evaluate(group_with(**{k.replace("/", "__"): v for k, v in lists.items()}, gallery__emb=gallery),
                          rerank=(2, 1, 0.3))
    assert caught.value.option == "rerank" and "ranked by ranking/item" in str(caught.value)


def reference_ap(order: np.ndarray, q_labels, g_labels) -> list[float]:
    out = []
    for row, label in zip(order, q_labels):
        ranks = [i + 1 for i, g in enumerate(row) if g_labels[g] == label]
        out.append(sum((n + 1) / r for n, r in enumerate(ranks)) / len(ranks))
    return out


@pytest.fixture
def reversed_lists_kind():
    """A kind no module knows: lists stored worst first under their own array name."""
    kind = kinds.register(kinds.InputKind("ranking/worst_first", "ranking/worst_first", ("ranking/worst_first",),
                                          backend=None, features=False,
                                          description="top-K lists stored worst first"), before="ranking/item")

    @tasks.ranker_of(kind)
    def rank_worst_first(group, options, ctx, truth, q0, q1, threads, map_fn, gallery_junk):
        items = ds.read(group, kind.query_array, slice(q0, q1)).astype(np.int64)[:, ::-1]
        return rank_by_lists(np.ascontiguousarray(items), None, truth, gallery_junk, ties=options.ties, q0=q0,
                             n_gallery=ctx.shape.n_gallery)

    yield kind
    kinds.unregister(kind.name)
    tasks.RANKERS.pop(kind.name, None)


def test_a_new_kind_registered_here_runs_end_to_end(reversed_lists_kind):
    rng = np.random.default_rng(5)
    n_q, n_g = 40, 60
    q_labels, g_labels = rng.integers(0, 6, n_q), rng.integers(0, 6, n_g)
    q_labels[:] = g_labels[rng.integers(0, n_g, n_q)]     # every query has a match
    order = np.array([rng.permutation(n_g) for _ in range(n_q)])
    group = group_with(query__label=q_labels, gallery__label=g_labels)
    group.create_array("ranking/worst_first", data=np.ascontiguousarray(order[:, ::-1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = evalcore.evaluate(group, protocol="class", max_rank=n_g)
    assert result.info["ranked_by"] == "ranking/worst_first"
    per_query = result.per_query.sort_by("query")
    assert per_query.column("ap").to_pylist() == pytest.approx(reference_ap(order, q_labels, g_labels), rel=1e-12)
