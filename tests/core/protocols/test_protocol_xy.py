"""``xy`` (README Protocols): the geo rules with Euclidean distance on x, y."""
import math

import numpy as np
from truthlists import relevant_lists

from evalcore.core.protocols.spatial import spatial_truth, xy_space


def xy_truth(query, gallery, radius=None, gallery_junk=None):
    q, g = np.array(query, dtype=np.float64), np.array(gallery, dtype=np.float64)
    return spatial_truth(xy_space(q[:, 0], q[:, 1], g[:, 0], g[:, 1]), radius,
                         None if gallery_junk is None else np.array(gallery_junk))


# three items at exactly 5 from the origin (3-4-5 triangles), one at 6
GALLERY = [(6.0, 0.0), (3.0, 4.0), (0.0, -5.0), (-4.0, -3.0)]


def test_xy_nearest_item_is_the_one_relevant_item_and_gt_distance_its_distance():
    t = xy_truth([(5.5, 0.1)], GALLERY)
    assert relevant_lists(t) == [[0]]
    assert t.columns["gt_distance"][0] == math.hypot(0.5, 0.1)


def test_xy_equally_near_items_go_to_the_lowest_index():
    t = xy_truth([(0.0, 0.0)], GALLERY)
    assert relevant_lists(t) == [[1]] and t.columns["gt_distance"].tolist() == [5.0]


def test_xy_radius_is_inclusive():
    assert relevant_lists(xy_truth([(0.0, 0.0)], GALLERY, radius=5.0)) == [[1, 2, 3]]


def test_xy_radius_just_below_the_distance_keeps_nothing():
    t = xy_truth([(0.0, 0.0)], GALLERY, radius=math.nextafter(5.0, 0.0))
    assert relevant_lists(t) == [[]] and t.n_relevant.tolist() == [0]


def test_xy_gallery_junk_is_never_relevant_and_counts_as_junk():
    t = xy_truth([(0.0, 0.0)], GALLERY, gallery_junk=[False, True, False, False])
    assert relevant_lists(t) == [[2]] and t.n_junk.tolist() == [1]


def test_xy_matches_brute_force_on_a_grid_with_many_ties():
    rng = np.random.default_rng(6)
    gallery = rng.integers(0, 8, (300, 2)).astype(np.float64)    # integer grid: many equal distances
    query = rng.integers(0, 8, (40, 2)).astype(np.float64) + 0.5
    junk = rng.random(300) < 0.1
    dist = np.sqrt(((query[:, None, :] - gallery[None, :, :]) ** 2).sum(-1))
    dist[:, junk] = np.inf
    nearest = [[int(np.flatnonzero(row == row.min())[0])] for row in dist]
    assert relevant_lists(xy_truth(query, gallery, gallery_junk=junk)) == nearest
    within = [np.flatnonzero(row <= 2.5).tolist() for row in dist]
    assert relevant_lists(xy_truth(query, gallery, radius=2.5, gallery_junk=junk)) == within
