"""``reid`` (Market-1501 rule, README Protocols): relevant = same label, other camera; junk = same label,
same camera; negative labels are no identity; ``gallery/junk`` items are junk for every query."""
import numpy as np
from truthlists import junk_lists, relevant_lists

from evalcore.core.protocols import label_index, reid_truth

#             gallery index:   0  1  2  3   4  5  6
GALLERY_LABEL = np.array([1, 1, 1, 2, -1, 1, 2])
GALLERY_CAM = np.array([0, 1, 2, 0, 0, 0, 1])
GALLERY_JUNK = np.array([False, False, False, False, False, True, False])
QUERY_LABEL = np.array([1, 1, -1, 7, 2])
QUERY_CAM = np.array([0, 1, 0, 0, 0])


def truth(gallery_junk=GALLERY_JUNK, index=None):
    return reid_truth(QUERY_LABEL, QUERY_CAM, GALLERY_LABEL, GALLERY_CAM, gallery_junk, index)


def reference_masks(ql, qc, gl, gc, gjunk):
    """Brute force over every (query, gallery) pair: (relevant, junk-not-global) lists per query."""
    rel, junk = [], []
    for label, cam in zip(ql, qc):
        same = [g for g in range(len(gl)) if label >= 0 and gl[g] == label and not gjunk[g]]
        rel.append([g for g in same if gc[g] != cam])
        junk.append([g for g in same if gc[g] == cam])
    return rel, junk


def test_reid_relevant_items_share_the_label_and_come_from_another_camera():
    assert relevant_lists(truth())[:2] == [[1, 2], [0, 2]]


def test_reid_same_label_same_camera_items_are_junk():
    assert junk_lists(truth())[:2] == [[0], [1]]


def test_reid_gallery_junk_is_neither_relevant_nor_per_query_junk_but_counts_in_n_junk():
    t = truth()
    assert all(5 not in r for r in relevant_lists(t)) and all(5 not in j for j in junk_lists(t))
    # query 0: item 0 (same camera) and item 5 (gallery/junk); query 4: item 3 and item 5
    assert t.n_junk.tolist() == [2, 2, 1, 1, 2]


def test_reid_negative_query_label_matches_nothing_even_a_negative_gallery_label():
    t = truth()
    assert relevant_lists(t)[2] == [] and junk_lists(t)[2] == []


def test_reid_query_whose_label_the_gallery_lacks_is_unknown():
    assert truth().n_relevant.tolist()[3] == 0


def test_reid_same_label_only_on_the_same_camera_leaves_other_camera_items_relevant():
    # query 4: label 2 camera 0 -> item 3 (camera 0) junk, item 6 (camera 1) relevant
    t = truth()
    assert relevant_lists(t)[4] == [6] and junk_lists(t)[4] == [3]


def test_reid_without_gallery_junk_item_5_becomes_junk_of_the_camera_0_query():
    t = truth(gallery_junk=None)
    assert junk_lists(t)[0] == [0, 5] and t.n_junk.tolist() == [2, 1, 0, 0, 1]


def test_reid_with_a_reused_label_index_gives_the_same_truth():
    a, b = truth(), truth(index=label_index(GALLERY_LABEL))
    assert relevant_lists(a) == relevant_lists(b) and junk_lists(a) == junk_lists(b)


def test_reid_matches_brute_force_on_random_labels_and_cameras():
    rng = np.random.default_rng(4)
    gl, gc = rng.integers(-1, 12, 400), rng.integers(0, 3, 400)
    ql, qc = rng.integers(-1, 14, 60), rng.integers(0, 3, 60)
    gjunk = rng.random(400) < 0.05
    t = reid_truth(ql, qc, gl, gc, gjunk)
    rel, junk = reference_masks(ql, qc, gl, gc, gjunk)
    assert relevant_lists(t) == rel and junk_lists(t) == junk
    assert t.n_junk.tolist() == [len(j) + int(gjunk.sum()) for j in junk]
