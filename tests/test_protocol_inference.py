"""Issue 35, finding 3: arrays only one protocol reads choose it when none is given, a given array the chosen
protocol ignores is an input error, and a malformed ``evalcore`` attribute is an input error (not the defaults).

References are independent of evalcore: the brute-force evaluator of ``tests/reference.py`` (Market-1501's
rule, written from its definition) and a haversine nearest-neighbour computed here with numpy.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import random_reid
from reference import cosine_scores, evaluate_all, relevance_reid

import evalcore
from evalcore.io import dataset as ds

CLI = [str(Path(sys.executable).with_name("evalcore"))]
ENV = {**os.environ, "EVALCORE_DEBUG": ""}


def run(*args, timeout=120):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=ENV)


def refused(p, *words):
    """Exit 2, one line on stderr holding every word, no traceback."""
    assert p.returncode == 2, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


@pytest.fixture(scope="module")
def reid_data():
    # well separated clusters: scores have no exact ties, so the float64 reference ranks as evalcore does
    return random_reid(np.random.default_rng(35), n_query=40, n_gallery=200, n_ids=12)


def reference_reid_ap(d):
    scores = cosine_scores(d["query/emb"], d["gallery/emb"])
    rel, junk = relevance_reid(d["query/label"], d["query/cam"], d["gallery/label"], d["gallery/cam"],
                               d.get("gallery/junk"))
    return [row["ap"] for row in evaluate_all(scores, rel, junk, ks=(1,))]


def api_arrays(d, cams=True):
    kwargs = dict(query=d["query/emb"], gallery=d["gallery/emb"], query_labels=d["query/label"],
                  gallery_labels=d["gallery/label"])
    if cams:
        kwargs.update(query_cams=d["query/cam"], gallery_cams=d["gallery/cam"])
    return kwargs


def assert_aps(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert (g is None and w is None) or g == pytest.approx(w, abs=1e-6)


# --------------------------------------------------------------------------- the API's arrays


def test_cameras_given_to_the_api_choose_reid(reid_data):
    d = {k: v for k, v in reid_data.items() if k != "gallery/junk"}
    result = evalcore.evaluate(**api_arrays(d))
    assert result.run["options"]["protocol"] == "reid"
    assert_aps(result.per_query.column("ap").to_pylist(), reference_reid_ap(d))


def test_cameras_given_with_protocol_class_are_an_input_error_naming_them(reid_data):
    with pytest.raises(evalcore.InputError, match=r"^query_cams, gallery_cams: not used by protocol 'class'"):
        evalcore.evaluate(**api_arrays(reid_data), protocol="class")
    # and only the cameras: labels alone under class still evaluate
    assert evalcore.evaluate(**api_arrays(reid_data, cams=False), protocol="class").run["options"]["protocol"] == \
        "class"


def test_one_side_of_the_cameras_still_chooses_reid_and_names_the_missing_side(reid_data):
    kwargs = {k: v for k, v in api_arrays(reid_data).items() if k != "query_cams"}
    with pytest.raises(evalcore.InputError, match=r"^query_cams: missing \(needed by protocol 'reid'\)"):
        evalcore.evaluate(**kwargs)


# --------------------------------------------------------------------------- datasets


def test_a_dataset_without_attribute_is_evaluated_with_the_protocol_its_cameras_choose(tmp_path, reid_data):
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, reid_data)  # no evalcore attribute
    result = evalcore.evaluate(str(path))
    assert result.run["options"]["protocol"] == "reid"
    assert_aps(result.per_query.column("ap").to_pylist(), reference_reid_ap(reid_data))
    p = run("validate", path)
    assert p.returncode == 0 and "valid for protocol reid" in p.stdout, p.stderr


def haversine(lat1, lon1, lat2, lon2):
    lat1, lon1, lat2, lon2 = map(np.radians, (lat1, lon1, lat2, lon2))
    a = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin((lon2 - lon1) / 2) ** 2
    return 2 * 6_371_008.8 * np.arcsin(np.sqrt(a))


def test_coordinates_choose_geo_even_beside_labels(tmp_path):
    rng = np.random.default_rng(3)
    q, g = 12, 30
    arrays = {"query/emb": rng.normal(size=(q, 8)).astype(np.float32),
              "gallery/emb": rng.normal(size=(g, 8)).astype(np.float32),
              "query/label": rng.integers(0, 3, q), "gallery/label": rng.integers(0, 3, g),
              "query/lat": rng.uniform(-60, 60, q), "query/lon": rng.uniform(-170, 170, q),
              "gallery/lat": rng.uniform(-60, 60, g), "gallery/lon": rng.uniform(-170, 170, g)}
    path = tmp_path / "geo.zarr"
    ds.write_dataset(path, arrays)
    result = evalcore.evaluate(str(path))
    assert result.run["options"]["protocol"] == "geo"
    # geo's default: the nearest gallery item is the one relevant item, so AP = 1 / its rank
    scores = cosine_scores(arrays["query/emb"], arrays["gallery/emb"])
    dist = haversine(arrays["query/lat"][:, None], arrays["query/lon"][:, None],
                     arrays["gallery/lat"][None, :], arrays["gallery/lon"][None, :])
    nearest = dist.argmin(axis=1)
    rank = 1 + (scores > scores[np.arange(q), nearest][:, None]).sum(axis=1)
    assert result.per_query.column("ap").to_pylist() == pytest.approx((1 / rank).tolist(), abs=1e-6)


def test_arrays_choosing_two_protocols_without_a_protocol_are_refused(tmp_path, reid_data):
    arrays = dict(reid_data)
    arrays.update({f"{side}/{c}": np.zeros(len(reid_data[f"{side}/label"])) for side in ("query", "gallery")
                   for c in ("x", "y")})
    path = tmp_path / "both.zarr"
    ds.write_dataset(path, arrays)
    with pytest.raises(evalcore.InputError, match=r"^protocol: the arrays disagree on the protocol .*'reid'.*'xy'"):
        evalcore.evaluate(str(path))
    refused(run("validate", path), "--protocol", "query/cam", "query/x")
    # a given protocol decides; the other protocol's arrays stay in the dataset and are named in a warning
    result = evalcore.evaluate(str(path), protocol="reid")
    assert_aps(result.per_query.column("ap").to_pylist(), reference_reid_ap(reid_data))
    assert any(w.startswith("query/x, query/y, gallery/x, gallery/y: not used by protocol 'reid'")
               for w in result.warnings), result.warnings


def test_a_dataset_evaluated_with_a_protocol_that_ignores_its_cameras_says_so(tmp_path, reid_data):
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, reid_data, {"protocol": "class"})
    result = evalcore.evaluate(str(path))
    assert result.run["options"]["protocol"] == "class"
    assert any("query/cam, gallery/cam: not used by protocol 'class'" in w for w in result.warnings), \
        result.warnings
    out = tmp_path / "report"
    p = run("evaluate", path, "--out", out, "--quiet")
    assert p.returncode == 0, p.stderr
    assert "warning: query/cam, gallery/cam: not used by protocol 'class'" in p.stderr


# --------------------------------------------------------------------------- the evalcore attribute


MALFORMED = [
    ("reid", "attribute evalcore: is a string"),
    (["reid"], "attribute evalcore: is a list"),
    ({"version": 2, "protocol": "reid"}, "attribute evalcore.version: 2 is not 1"),
    ({"version": "1"}, "attribute evalcore.version"),
    ({"protocol": ["reid"]}, "attribute evalcore.protocol: [\"reid\"] is not one of"),
    ({"protocol": "market"}, "attribute evalcore.protocol: \"market\" is not one of"),
    ({"protocol": 1}, "attribute evalcore.protocol"),
    ({"similarity": {"name": "cosine"}}, "attribute evalcore.similarity"),
    ({"protocol": "reid", "notes": [[[[[[[[[["deep"]]]]]]]]]]}, "attribute evalcore: values nested more than"),
]


def write_with_attribute(path: Path, data, value) -> None:
    ds.write_dataset(path, data)
    meta = path / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"] = {"evalcore": value}
    meta.write_text(json.dumps(doc))


@pytest.mark.parametrize("value, words", MALFORMED)
def test_a_malformed_evalcore_attribute_is_an_input_error_naming_it(tmp_path, reid_data, value, words):
    path = tmp_path / "ds.zarr"
    write_with_attribute(path, reid_data, value)
    with pytest.raises(evalcore.InputError, match="^" + words.replace("[", r"\[").replace("]", r"\]")):
        evalcore.evaluate(str(path))
    with pytest.raises(evalcore.InputError, match="^attribute evalcore"):
        evalcore.validate(str(path))
    # a protocol given does not make the attribute valid
    with pytest.raises(evalcore.InputError, match="^attribute evalcore"):
        evalcore.evaluate(str(path), protocol="reid")


@pytest.mark.parametrize("command", ["validate", "evaluate"])
def test_the_command_line_refuses_a_string_attribute_in_one_line(tmp_path, reid_data, command):
    path = tmp_path / "ds.zarr"
    write_with_attribute(path, reid_data, "reid")
    out = tmp_path / "report"
    p = run(command, path, *(["--out", out] if command == "evaluate" else []))
    refused(p, "attribute evalcore", "string")
    assert not out.exists()
