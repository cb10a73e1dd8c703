"""``class`` (landmark, category retrieval; README Protocols): relevant = same label; no per-query junk."""
import numpy as np
from truthlists import junk_lists, relevant_lists

from evalcore.core.protocols import class_truth

#             gallery index:   0  1   2  3  4  5
GALLERY_LABEL = np.array([3, 1, -1, 3, 1, 3])
GALLERY_JUNK = np.array([False, False, False, False, False, True])


def test_class_relevant_items_share_the_label_whatever_the_camera():
    t = class_truth(np.array([3, 1]), GALLERY_LABEL)
    assert relevant_lists(t) == [[0, 3, 5], [1, 4]]
    assert junk_lists(t) == [[], []] and t.n_junk.tolist() == [0, 0]


def test_class_gallery_junk_leaves_the_relevant_items_and_counts_as_junk_for_every_query():
    t = class_truth(np.array([3, 1, 8]), GALLERY_LABEL, GALLERY_JUNK)
    assert relevant_lists(t) == [[0, 3], [1, 4], []]
    assert t.n_junk.tolist() == [1, 1, 1]


def test_class_negative_labels_are_never_relevant():
    t = class_truth(np.array([-1]), GALLERY_LABEL)
    assert relevant_lists(t) == [[]] and t.n_relevant.tolist() == [0]


def test_class_query_with_a_label_the_gallery_lacks_is_unknown():
    assert class_truth(np.array([2]), GALLERY_LABEL).n_relevant.tolist() == [0]


def test_class_matches_brute_force_on_random_labels():
    rng = np.random.default_rng(5)
    gl, ql = rng.integers(-2, 30, 500), rng.integers(-2, 35, 80)
    gjunk = rng.random(500) < 0.05
    t = class_truth(ql, gl, gjunk)
    want = [[g for g in range(len(gl)) if q >= 0 and gl[g] == q and not gjunk[g]] for q in ql]
    assert relevant_lists(t) == want
