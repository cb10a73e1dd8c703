"""evaluate takes identities as users hold them: strings or mixed hashable values, coded once (issue 37
item 4); the per-query table keeps the user's values; errors give a Python user Python's advice."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import zarr

import evalcore
from evalcore.io import dataset as ds


def reid_ap(distances, q_pids, g_pids, q_cams, g_cams) -> list[float | None]:
    """Market-1501's AP from its definition: rank by ascending distance, drop the gallery items of the query's
    identity and camera, AP = (1/R) sum_i i / r_i over the matches' ranks r_i; None where R = 0."""
    out = []
    for row, (pid, cam) in enumerate(zip(q_pids, q_cams)):
        kept = [j for j in np.argsort(distances[row], kind="stable") if not (g_pids[j] == pid and g_cams[j] == cam)]
        ranks = [place + 1 for place, j in enumerate(kept) if g_pids[j] == pid]
        out.append(sum((i + 1) / r for i, r in enumerate(ranks)) / len(ranks) if ranks else None)
    return out


def quiet(**kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evalcore.evaluate(**kwargs)


def test_string_person_ids_and_cameras_give_the_brute_force_reid_ap_and_keep_their_values():
    rng = np.random.default_rng(7)
    people = ["0002", "0007", "0010", "ann", "bob"]
    q_pids = [people[i] for i in rng.integers(0, 5, 12)] + ["nobody"]
    g_pids = [people[i] for i in rng.integers(0, 5, 40)]
    q_cams = [f"c{i}" for i in rng.integers(1, 4, 13)]
    g_cams = [f"c{i}" for i in rng.integers(1, 4, 40)]
    distances = rng.random((13, 40))  # continuous: no ties
    result = quiet(distances=distances, query_labels=q_pids, gallery_labels=g_pids, query_cams=q_cams,
                   gallery_cams=g_cams, protocol="reid", max_rank=40)
    per_query = result.per_query.sort_by("query")
    got, want = per_query.column("ap").to_pylist(), reid_ap(distances, q_pids, g_pids, q_cams, g_cams)
    # null where the reference has None (pytest 9.2's approx refuses None), equal to 1e-12 elsewhere
    assert [g is None for g in got] == [w is None for w in want] and want[-1] is None
    assert [g for g in got if g is not None] == pytest.approx([w for w in want if w is not None], rel=1e-12)
    assert per_query.column("label").to_pylist() == q_pids   # the user's ids, not codes
    assert per_query.column("cam").to_pylist() == q_cams


def test_mixed_identities_match_by_python_equality():
    gallery = np.eye(4, dtype=np.float32)
    query = gallery[[0, 2, 3]] + 0.1
    # ("p", 1) is a tuple identity; 2.0 == 2 is one identity; None matches nothing
    result = quiet(query=query, gallery=gallery, query_labels=[("p", 1), 2, None],
                   gallery_labels=[("p", 1), "x", 2.0, None], max_rank=4)
    per_query = result.per_query.sort_by("query")
    assert per_query.column("n_relevant").to_pylist() == [1, 1, 0]
    assert per_query.column("first_rank").to_pylist() == [1, 1, None]
    # 1 and "1" are two identities, as Python's == has them (numpy would read the list as the strings "1", "1")
    result = quiet(query=query[:2], gallery=gallery[:2], query_labels=[1, "a"], gallery_labels=["1", "a"],
                   max_rank=2)
    assert result.per_query.sort_by("query").column("n_relevant").to_pylist() == [0, 1]


def test_dataset_problems_advise_evalcore_validate_not_the_command(tmp_path):
    path = tmp_path / "ds.zarr"
    emb = np.eye(3, dtype=np.float32)
    ds.write_dataset(path, {"query/emb": emb, "gallery/emb": emb, "query/label": np.arange(3),
                            "gallery/label": np.arange(3)})
    group = zarr.open_group(path, mode="r+")
    for side in ("query", "gallery"):  # two problems, past write_dataset's own checks
        group.create_array(f"{side}/label", data=np.array([0.5, 1.5, 2.5]), overwrite=True)
    with pytest.raises(evalcore.InputError) as caught:
        evalcore.evaluate(path)
    message = str(caught.value)
    assert message.startswith("query/label: dtype float64 is not integer")
    assert "evalcore.validate(source)" in message and "`evalcore validate`" not in message
