"""``geo`` (README Protocols): haversine on a sphere of radius 6,371,008.8 m; the single nearest gallery item
is relevant (ties: lowest index), or with a radius every item within it (inclusive); gallery/junk never counts."""
import math

import numpy as np
from truthlists import relevant_lists

from evalcore.core.protocols.spatial import geo_space, spatial_truth

R_EARTH = 6_371_008.8
METRE_OF_LATITUDE = 180 / (math.pi * R_EARTH)   # degrees along a meridian per metre


def haversine(lat1, lon1, lat2, lon2):
    """The test's own haversine, one pair at a time in Python floats."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    h = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lon2 - lon1) / 2) ** 2
    return 2 * R_EARTH * math.asin(math.sqrt(min(1.0, h)))


def geo_truth(query, gallery, radius=None, gallery_junk=None):
    q, g = np.array(query, dtype=np.float64), np.array(gallery, dtype=np.float64)
    space = geo_space(q[:, 0], q[:, 1], g[:, 0], g[:, 1])
    return spatial_truth(space, radius, None if gallery_junk is None else np.array(gallery_junk))


def test_geo_nearest_item_is_the_one_relevant_item():
    gallery = [(48.8584, 2.2945), (48.8606, 2.3376), (48.8530, 2.3499)]   # Eiffel tower, Louvre, Notre-Dame
    t = geo_truth([(48.8600, 2.3400), (48.8580, 2.2950)], gallery)
    assert relevant_lists(t) == [[1], [0]]
    want = [min(haversine(*q, *g) for g in gallery) for q in [(48.8600, 2.3400), (48.8580, 2.2950)]]
    assert np.allclose(t.columns["gt_distance"], want, rtol=1e-12)


def test_geo_equally_near_items_go_to_the_lowest_index():
    # items 1 and 2 mirror each other across the query's meridian, item 0 is farther: equal haversine
    gallery = [(0.0, 3.0), (0.0, -1.0), (0.0, 1.0)]
    assert haversine(0, 0, 0, -1) == haversine(0, 0, 0, 1)
    assert relevant_lists(geo_truth([(0.0, 0.0)], [gallery[0], gallery[2], gallery[1]])) == [[1]]
    assert relevant_lists(geo_truth([(0.0, 0.0)], gallery)) == [[1]]


def test_geo_items_at_the_same_place_tie_and_the_lowest_index_wins():
    gallery = [(10.0, 10.0), (45.5, 7.25), (45.5, 7.25), (45.5, 7.25)]
    assert relevant_lists(geo_truth([(45.5001, 7.2501)], gallery)) == [[1]]


def test_geo_nearest_item_may_lie_across_the_antimeridian():
    # 0.0002 degrees of longitude across 180 (about 22 m) beats 0.01 degrees on the same side
    t = geo_truth([(0.0, 179.9999)], [(0.0, 179.9899), (0.0, -179.9999)])
    assert relevant_lists(t) == [[1]]
    assert math.isclose(t.columns["gt_distance"][0], haversine(0, 179.9999, 0, -179.9999), rel_tol=1e-9)


def test_geo_gallery_junk_is_never_the_nearest_item_nor_its_distance():
    gallery = [(0.0, 0.001), (0.0, 0.002)]
    t = geo_truth([(0.0, 0.0)], gallery, gallery_junk=[True, False])
    assert relevant_lists(t) == [[1]] and t.n_junk.tolist() == [1]
    assert math.isclose(t.columns["gt_distance"][0], haversine(0, 0, 0, 0.002), rel_tol=1e-12)


def test_geo_radius_makes_every_item_within_it_relevant():
    # along a meridian from the query: 10 m, 24.9 m, 25.1 m, 100 m
    metres = [10.0, 24.9, 25.1, 100.0]
    gallery = [(45.0 + m * METRE_OF_LATITUDE, 7.0) for m in metres]
    assert [round(haversine(45.0, 7.0, *g), 6) for g in gallery] == metres
    t = geo_truth([(45.0, 7.0)], gallery, radius=25.0)
    assert relevant_lists(t) == [[0, 1]]


def test_geo_radius_is_inclusive():
    # radius 0 keeps the items at the query's own place
    t = geo_truth([(12.5, -70.0)], [(12.5, -70.0), (12.5001, -70.0), (12.5, -70.0)], radius=0.0)
    assert relevant_lists(t) == [[0, 2]]


def test_geo_radius_leaves_out_gallery_junk_and_keeps_the_nearest_distance():
    gallery = [(0.0, 0.0001), (0.0, 0.0002), (0.0, 0.5)]
    t = geo_truth([(0.0, 0.0)], gallery, radius=100.0, gallery_junk=[False, True, False])
    assert relevant_lists(t) == [[0]]
    assert math.isclose(t.columns["gt_distance"][0], haversine(0, 0, 0, 0.0001), rel_tol=1e-12)


def test_geo_query_with_nothing_within_the_radius_is_unknown():
    t = geo_truth([(0.0, 0.0)], [(1.0, 1.0)], radius=1000.0)
    assert t.n_relevant.tolist() == [0] and t.columns["gt_distance"][0] > 1000
