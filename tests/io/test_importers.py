"""Importers: each format's files written with its own library, imported, read back from Zarr."""
from __future__ import annotations

import argparse
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.io
import zarr

from evalcore.cli import import_cmd
from evalcore.errors import InputError
from evalcore.io.importers import FORMATS_HELP, import_to, read_format

RNG = np.random.default_rng(7)


def _read(path) -> dict[str, np.ndarray]:
    root = zarr.open_group(str(path), mode="r")
    out = {}
    for side in ("query", "gallery", "qrels", "ranking"):
        if side in root:
            for name, arr in root[side].arrays():
                out[f"{side}/{name}"] = np.asarray(arr[...])
    return out


def _attrs(path) -> dict:
    return dict(zarr.open_group(str(path), mode="r").attrs["evalcore"])


def _valid(path, protocol):
    """The written dataset passes the project's own validation for its protocol."""
    from evalcore.io.dataset import open_dataset
    from evalcore.io.validate import validate

    assert validate(open_dataset(path), protocol).items == []
    assert _attrs(path)["protocol"] == protocol


def _keys(values) -> list[str]:
    return [str(v) for v in np.asarray(values).tolist()]


def _fails(out, match, *args, **kwargs):
    """import_to raises InputError matching ``match`` and leaves nothing at ``out``."""
    with pytest.raises(InputError, match=match):
        import_to(*args, out=out, **kwargs)
    assert not os.path.exists(out)


# --------------------------------------------------------------------------- mat


def _mat_inputs(q=4, g=6, d=5):
    return {
        "query_f": RNG.standard_normal((q, d)).astype(np.float32),
        "query_label": [3, 5, 3, 7][:q],
        "query_cam": [1, 2, 3, 1][:q],
        "gallery_f": RNG.standard_normal((g, d)).astype(np.float32),
        "gallery_label": [3, -1, 0, 5, -2, -1][:g],
        "gallery_cam": [2, 1, 4, 1, 2, 3][:g],
    }


def test_mat_round_trip_marks_minus_one_as_junk(tmp_path):
    src = _mat_inputs()
    scipy.io.savemat(tmp_path / "pytorch_result.mat", src)
    out = tmp_path / "ds.zarr"
    summary = import_to("mat", [tmp_path / "pytorch_result.mat"], out)
    got = _read(out)
    np.testing.assert_array_equal(got["query/emb"], src["query_f"])
    np.testing.assert_array_equal(got["gallery/emb"], src["gallery_f"])
    assert got["query/emb"].dtype == np.float32
    assert got["query/label"].tolist() == [3, 5, 3, 7]
    assert got["gallery/label"].tolist() == [3, -1, 0, 5, -2, -1]  # -1 stays negative, 0 stays 0
    # only -1 is junk: 0 (distractor) and other negatives (no identity) are ordinary items
    assert got["gallery/label"].dtype == np.int64
    assert got["query/cam"].tolist() == [1, 2, 3, 1]
    assert got["gallery/cam"].tolist() == [2, 1, 4, 1, 2, 3]
    assert got["gallery/junk"].tolist() == [False, True, False, False, False, True]
    _valid(out, "reid")
    assert summary["queries"] == 4 and summary["gallery"] == 6 and summary["junk"] == 2


@pytest.mark.parametrize("change, match", [
    (lambda m: m.update(gallery_label=[3, 5, 7]), r"bad\.mat: key gallery_label: 3 entries, but gallery_f has 6"),
    (lambda m: m.pop("query_cam"), r"bad\.mat: key query_cam missing"),
    (lambda m: m["query_f"].__setitem__((2, 1), np.nan), r"bad\.mat: key query_f: row 2 contain"),
    (lambda m: m.update(gallery_f=np.ones((6, 3), np.float32)), r"bad\.mat: key gallery_f: 3 dimensions"),
    (lambda m: m.update(query_label=[1.5, 2, 3, 4]), r"bad\.mat: key query_label: row 0 are not whole"),
])
def test_mat_malformed(tmp_path, change, match):
    src = _mat_inputs()
    change(src)
    scipy.io.savemat(tmp_path / "bad.mat", src)
    _fails(tmp_path / "out.zarr", match, "mat", [tmp_path / "bad.mat"])


def test_mat_not_a_mat_file(tmp_path):
    (tmp_path / "bad.mat").write_bytes(b"not a mat file at all")
    _fails(tmp_path / "out.zarr", r"bad\.mat: not a readable \.mat file", "mat", [tmp_path / "bad.mat"])


# --------------------------------------------------------------------------- npy


def test_npy_explicit_files_with_cams_is_reid(tmp_path):
    qf = RNG.standard_normal((3, 4))  # float64 on disk -> float32 in the dataset
    gf = RNG.standard_normal((5, 4)).astype(np.float32)
    files = {"qf": qf, "gf": gf, "qid": np.array([1, 2, 3]), "gid": np.array([[1], [1], [2], [9], [3]]),
             "qc": np.array([0, 1, 2], np.int32), "gc": np.array([1, 0, 2, 2, 1], np.int32)}
    for name, arr in files.items():
        np.save(tmp_path / f"{name}.npy", arr)
    out = tmp_path / "ds.zarr"
    import_to("npy", [], out, query_features=tmp_path / "qf.npy", gallery_features=tmp_path / "gf.npy",
              query_ids=tmp_path / "qid.npy", gallery_ids=tmp_path / "gid.npy",
              query_cams=tmp_path / "qc.npy", gallery_cams=tmp_path / "gc.npy", junk_label=9)
    got = _read(out)
    np.testing.assert_array_equal(got["query/emb"], qf.astype(np.float32))
    np.testing.assert_array_equal(got["gallery/emb"], gf)
    assert got["gallery/label"].tolist() == [1, 1, 2, 9, 3]
    assert got["query/cam"].tolist() == [0, 1, 2] and got["gallery/cam"].dtype == np.int64
    assert got["gallery/junk"].tolist() == [False, False, False, True, False]
    _valid(out, "reid")


@pytest.mark.parametrize("style", ["long", "short"])
def test_npy_npz_both_naming_styles_without_cams_is_class(tmp_path, style):
    qf, gf = RNG.standard_normal((2, 3)).astype(np.float32), RNG.standard_normal((4, 3)).astype(np.float32)
    names = (["query_features", "gallery_features", "query_pids", "gallery_pids"] if style == "long"
             else ["qf", "gf", "q_pids", "g_pids"])
    np.savez(tmp_path / "feats.npz", **dict(zip(names, [qf, gf, np.array([4, 5]), np.array([5, 4, 4, 6])])))
    out = tmp_path / "ds.zarr"
    import_to("npy", [tmp_path / "feats.npz"], out)
    got = _read(out)
    np.testing.assert_array_equal(got["query/emb"], qf)
    np.testing.assert_array_equal(got["gallery/emb"], gf)
    assert got["query/label"].tolist() == [4, 5] and got["gallery/label"].tolist() == [5, 4, 4, 6]
    assert "query/cam" not in got and "gallery/junk" not in got
    assert _attrs(out)["protocol"] == "class"


def test_npy_folder_of_named_files(tmp_path):
    folder = tmp_path / "feats"
    folder.mkdir()
    np.save(folder / "qf.npy", np.eye(2, 3, dtype=np.float32))
    np.save(folder / "gallery_features.npy", np.ones((3, 3), np.float32))
    np.save(folder / "q_pids.npy", np.array([1, 2]))
    np.save(folder / "gallery_pids.npy", np.array([2, 1, 1]))
    np.save(folder / "q_camids.npy", np.array([0, 0]))
    np.save(folder / "g_camids.npy", np.array([1, 1, 0]))
    out = tmp_path / "ds.zarr"
    import_to("npy", [folder], out)
    got = _read(out)
    np.testing.assert_array_equal(got["query/emb"], np.eye(2, 3))
    assert got["gallery/cam"].tolist() == [1, 1, 0]


def test_npy_object_array_is_rejected_without_unpickling(tmp_path):
    np.savez(tmp_path / "feats.npz", qf=np.ones((2, 3)), gf=np.ones((2, 3)),
             q_pids=np.array([1, "x"], dtype=object), g_pids=np.array([1, 2]))
    _fails(tmp_path / "out.zarr", r"feats\.npz: key q_pids: holds a Python object array",
           "npy", [tmp_path / "feats.npz"])
    np.save(tmp_path / "qf.npy", np.array([[1.0], None], dtype=object), allow_pickle=True)
    np.save(tmp_path / "other.npy", np.ones((2, 1)))
    _fails(tmp_path / "out.zarr", r"qf\.npy: holds a Python object array", "npy", [],
           query_features=tmp_path / "qf.npy", gallery_features=tmp_path / "other.npy",
           query_ids=tmp_path / "other.npy", gallery_ids=tmp_path / "other.npy")


def _pickled_npy(path):
    import pickle

    with open(path, "wb") as fh:
        pickle.dump({"x": 1}, fh)


def _object_npy(path):
    np.save(path, np.array([[1.0], None], dtype=object), allow_pickle=True)


@pytest.mark.parametrize("write, words", [
    (_pickled_npy, "is not a .npy array (it does not start with the .npy magic bytes)"),
    (_object_npy, "holds a Python object array (dtype object)"),
])
def test_cli_import_refuses_a_pickled_or_object_npy_from_its_header(tmp_path, capsys, monkeypatch, write, words):
    """Read from the header before numpy loads anything: exit status 2, one line naming the file, nothing written."""
    from evalcore.cli.main import main

    bad = tmp_path / "qf.npy"
    write(bad)
    np.save(tmp_path / "other.npy", np.ones((2, 1)))
    loaded = []
    monkeypatch.setattr(np, "load", lambda *a, **k: loaded.append(a) or pytest.fail("np.load was called"))
    out = tmp_path / "out.zarr"
    code = main(["import", "npy", "--query-features", str(bad), "--gallery-features", str(tmp_path / "other.npy"),
                 "--query-ids", str(tmp_path / "other.npy"), "--gallery-ids", str(tmp_path / "other.npy"),
                 "--out", str(out)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("evalcore: error:"), err
    assert str(bad) in lines[0] and words in lines[0] and "Traceback" not in err
    assert loaded == [] and not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["other.npy", "qf.npy"]


def test_npz_members_and_archives_are_refused_from_their_headers(tmp_path):
    import pickle
    import zipfile

    archive = tmp_path / "feats.npz"
    np.savez(archive, qf=np.ones((2, 3)), gf=np.ones((2, 3)), g_pids=np.array([1, 2]))
    with zipfile.ZipFile(archive, "a") as zf:  # a member that is a pickle, not a .npy
        zf.writestr("q_pids.npy", pickle.dumps([1, 2]))
    _fails(tmp_path / "out.zarr", r"feats\.npz: key q_pids: is not a \.npy array", "npy", [archive])
    pickled = tmp_path / "run.npz"
    pickled.write_bytes(pickle.dumps({"qf": [1.0]}))
    _fails(tmp_path / "out.zarr", r"run\.npz: is not an \.npz archive \(not a zip file\)", "npy", [pickled])
    np.save(tmp_path / "one.npy", np.ones((2, 3)))
    _fails(tmp_path / "out.zarr", r"one\.npy: is a single \.npy array", "npy", [tmp_path / "one.npy"])
    np.save(tmp_path / "cube.npy", np.ones((2, 1, 1)))
    _fails(tmp_path / "out.zarr", r"cube\.npy: the \.npy header's shape \(2, 1, 1\) has 3 dimensions", "npy", [],
           query_features=tmp_path / "cube.npy", gallery_features=tmp_path / "one.npy",
           query_ids=tmp_path / "one.npy", gallery_ids=tmp_path / "one.npy")


@pytest.mark.parametrize("arrays, match", [
    ({"qf": np.ones((2, 3)), "gf": np.ones((3, 3)), "q_pids": [1, 2], "g_pids": [1, 2]},
     r"feats\.npz: key g_pids: 2 entries, but key gf has 3 rows"),
    ({"qf": np.ones((2, 3)), "gf": np.ones((3, 3)), "q_pids": [1, 2]}, r"feats\.npz: gallery ids missing"),
    ({"qf": np.ones((2, 3)), "gf": np.ones((3, 4)), "q_pids": [1, 2], "g_pids": [1, 2, 3]},
     r"feats\.npz: key gf: 4 dimensions, but key qf has 3"),
    ({"qf": np.ones((2, 3)), "gf": np.ones((3, 3)), "q_pids": [1, 2], "g_pids": [1, 2, 3], "q_camids": [0, 1]},
     r"feats\.npz: query cameras given but gallery cameras missing"),
    ({"qf": np.ones((2, 3)), "gf": np.ones((3, 3)), "q_pids": ["a", "b"], "g_pids": [1, 2, 3]},
     r"feats\.npz: key q_pids: dtype <U1 is not integer"),
    ({"qf": np.array([[1, 2, 3], [1, np.inf, 3]]), "gf": np.ones((3, 3)), "q_pids": [1, 2], "g_pids": [1, 2, 3]},
     r"feats\.npz: key qf: row 1 contain NaN or Inf"),
])
def test_npy_malformed(tmp_path, arrays, match):
    np.savez(tmp_path / "feats.npz", **{k: np.asarray(v) for k, v in arrays.items()})
    _fails(tmp_path / "out.zarr", match, "npy", [tmp_path / "feats.npz"])


# --------------------------------------------------------------------------- parquet


def test_parquet_single_file_with_side_column(tmp_path):
    emb = RNG.standard_normal((5, 3)).astype(np.float32)
    table = pa.table({
        "vec": pa.array(emb.tolist(), pa.list_(pa.float32())),
        "side": ["gallery", "query", "gallery", "query", "gallery"],
        "label": pa.array([1, 2, 2, 1, 3], pa.int32()),
        "cam": [0, 1, 1, 0, 2],
        "key": ["g0", "q0", "g1", "q1", "g2"],
        "lat": [10.0, 20.0, 30.0, -40.0, 50.0],
        "lon": [1.0, 2.0, 3.0, -4.0, 179.0],
    })
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=2)  # several chunks
    out = tmp_path / "ds.zarr"
    import_to("parquet", [tmp_path / "t.parquet"], out, emb_column="vec")
    got = _read(out)
    np.testing.assert_array_equal(got["query/emb"], emb[[1, 3]])
    np.testing.assert_array_equal(got["gallery/emb"], emb[[0, 2, 4]])
    assert got["query/label"].tolist() == [2, 1] and got["gallery/label"].tolist() == [1, 2, 3]
    assert got["gallery/cam"].tolist() == [0, 1, 2]
    assert _keys(got["query/key"]) == ["q0", "q1"] and _keys(got["gallery/key"]) == ["g0", "g1", "g2"]
    assert got["query/lat"].tolist() == [20.0, -40.0] and got["gallery/lon"].tolist() == [1.0, 3.0, 179.0]
    _valid(out, "reid")


def test_parquet_two_files_custom_columns_fixed_size_list(tmp_path):
    q = np.arange(6, dtype=np.float64).reshape(2, 3)
    g = np.arange(9, dtype=np.float64).reshape(3, 3) / 2
    for name, emb, ids in (("q", q, [7, 8]), ("g", g, [8, 8, 7])):
        pq.write_table(pa.table({"feature": pa.array(emb.tolist(), pa.list_(pa.float64(), 3)),
                                 "person": ids}), tmp_path / f"{name}.parquet")
    out = tmp_path / "ds.zarr"
    import_to("parquet", [tmp_path / "q.parquet", tmp_path / "g.parquet"], out, emb_column="feature",
              label_column="person")
    got = _read(out)
    np.testing.assert_array_equal(got["query/emb"], q.astype(np.float32))
    np.testing.assert_array_equal(got["gallery/emb"], g.astype(np.float32))
    assert got["gallery/label"].tolist() == [8, 8, 7]
    assert "query/cam" not in got
    assert _attrs(out)["protocol"] == "class"


def _side_table(**overrides):
    cols = {"emb": pa.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]], pa.list_(pa.float32())),
            "side": ["query", "gallery", "gallery", "query"], "label": [1, 1, 2, 2]}
    cols.update(overrides)
    return pa.table(cols)


@pytest.mark.parametrize("overrides, options, match", [
    ({"emb": pa.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0]], pa.list_(pa.float32()))}, {},
     r"bad\.parquet: row 3, column emb: 1 values, but earlier rows have 2"),
    ({"emb": pa.array([[1.0, 2.0], None, [5.0, 6.0], [7.0, 8.0]], pa.list_(pa.float32()))}, {},
     r"bad\.parquet: row 1, column emb: null embedding"),
    ({"emb": pa.array([[1.0, 2.0], [3.0, None], [5.0, 6.0], [7.0, 8.0]], pa.list_(pa.float32()))}, {},
     r"bad\.parquet: row 1, column emb: NaN, Inf or null"),
    ({"side": ["query", "gallery", "galery", "query"]}, {},
     r"bad\.parquet: row 2, column side: 'galery' is neither"),
    ({"label": pa.array([1, None, 2, 2], pa.int64())}, {}, r"bad\.parquet: row 1, column label: null value"),
    ({}, {"cam_column": "camera"}, r"bad\.parquet: column camera \(cam\) missing"),
    ({"key": ["a", "b", "a", "a"]}, {}, r"bad\.parquet: column key: duplicate id 'a' \(rows 0 and 3\)"),
    ({"lat": [1.0, 95.0, 0.0, 0.0], "lon": [0.0, 0.0, 0.0, 0.0]}, {},
     r"bad\.parquet: column lat: row 1 lies outside \[-90, 90\] degrees \(first: 95\.0\)"),
    ({"emb": pa.array(["a", "b", "c", "d"])}, {}, r"bad\.parquet: column emb: type string is not a list"),
])
def test_parquet_malformed(tmp_path, overrides, options, match):
    pq.write_table(_side_table(**overrides), tmp_path / "bad.parquet")
    _fails(tmp_path / "out.zarr", match, "parquet", [tmp_path / "bad.parquet"], **options)


def test_parquet_dimension_mismatch_between_files(tmp_path):
    pq.write_table(pa.table({"emb": [[1.0, 2.0]], "label": [1]}), tmp_path / "q.parquet")
    pq.write_table(pa.table({"emb": [[1.0, 2.0, 3.0]], "label": [1]}), tmp_path / "g.parquet")
    _fails(tmp_path / "out.zarr",
           r"g\.parquet: column emb: gallery rows have 3 values, but query rows in .*q\.parquet have 2",
           "parquet", [tmp_path / "q.parquet", tmp_path / "g.parquet"])


# --------------------------------------------------------------------------- faiss-json


def _faiss_folder(tmp_path, queries=None, refs=None, results=None):
    folder = tmp_path / "faiss"
    (folder / "results").mkdir(parents=True)
    queries = queries if queries is not None else [
        {"id": "q1", "lat": 48.85, "lon": 2.35}, {"id": "q2", "lat": -33.9, "lon": 151.2},
        {"id": "q3", "lat": 0.0, "lon": -180.0}]
    refs = refs if refs is not None else {"references": [
        {"id": "r0", "lat": 48.86, "lon": 2.34}, {"id": "r1", "lat": -33.8, "lon": 151.1},
        {"id": "r2", "lat": 90.0, "lon": 0.0}]}
    results = results if results is not None else {
        "q1": {"query": "q1", "results": [{"id": "r0", "score": 0.9}, {"id": "r2", "score": 0.5},
                                          {"id": "r1", "score": 0.1}]},
        "q2": {"query": "q2", "neighbors": [1, 0, -1], "distances": [0.25, 1.5, 3.4e38]},
        "q3": {"results": []},
    }
    (folder / "query_index.json").write_text(json.dumps(queries))
    (folder / "reference_index.json").write_text(json.dumps(refs))
    for qid, body in results.items():
        (folder / "results" / f"{qid}.json").write_text(json.dumps(body))
    return folder


def test_faiss_json_round_trip(tmp_path):
    folder = _faiss_folder(tmp_path)
    out = tmp_path / "ds.zarr"
    summary = import_to("faiss-json", [folder], out)
    got = _read(out)
    assert _keys(got["query/key"]) == ["q1", "q2", "q3"]
    assert _keys(got["gallery/key"]) == ["r0", "r1", "r2"]
    assert got["query/lat"].tolist() == [48.85, -33.9, 0.0] and got["query/lon"].dtype == np.float64
    assert got["gallery/lat"].tolist() == [48.86, -33.8, 90.0]
    assert got["gallery/lon"].tolist() == [2.34, 151.1, 0.0]
    assert got["ranking/item"].tolist() == [[0, 2, 1], [1, 0, -1], [-1, -1, -1]]
    expected_score = np.array([[0.9, 0.5, 0.1], [-0.25, -1.5, np.nan], [np.nan] * 3], np.float32)
    np.testing.assert_array_equal(got["ranking/score"], expected_score)
    _valid(out, "geo")
    assert summary["ranking_k"] == 3


def test_faiss_json_explicit_paths_and_wrapped_queries(tmp_path):
    folder = _faiss_folder(tmp_path, queries={"queries": [{"id": 5, "lat": 1.0, "lon": 2.0}]},
                           results={"5": {"neighbors": ["r1"], "scores": [3.0]}})
    os.rename(folder / "results", tmp_path / "hits")
    out = tmp_path / "ds.zarr"
    import_to("faiss-json", [], out, query_index=folder / "query_index.json",
              reference_index=folder / "reference_index.json", results_dir=tmp_path / "hits")
    got = _read(out)
    assert _keys(got["query/key"]) == ["5"]
    assert got["ranking/item"].tolist() == [[1]] and got["ranking/score"].tolist() == [[3.0]]


@pytest.mark.parametrize("kwargs, match", [
    ({"results": {"q1": {"results": [{"id": "r0", "score": 1}, {"id": "r9", "score": 0.5}]},
                  "q2": {"results": []}, "q3": {"results": []}}},
     r"results/q1\.json: results entry 1, field id: unknown reference 'r9'"),
    ({"queries": [{"id": "q1", "lat": 91.0, "lon": 0.0}]},
     r"query_index\.json: field lat: entry 0 lies outside \[-90, 90\] degrees \(first: 91\.0\)"),
    ({"refs": [{"id": "r0", "lat": 0.0, "lon": 0.0}, {"id": "r1", "lat": 0.0, "lon": -181}]},
     r"reference_index\.json: field lon: entry 1 lies outside \[-180, 180\] degrees \(first: -181\.0\)"),
    ({"refs": [{"id": "r0", "lat": float("nan"), "lon": 0.0}]},
     r"reference_index\.json: field lat: entry 0 is NaN or infinite"),
    ({"results": {"q1": {"results": []}, "q2": {"results": []}}},
     r"results/q3\.json: no results file for query 'q3'"),
    ({"queries": [{"id": "q1", "lat": 1, "lon": 1}, {"id": "q1", "lat": 2, "lon": 2}]},
     r"query_index\.json: entry 1, field id: duplicate id 'q1' \(also entry 0\)"),
    ({"results": {"q1": {"neighbors": [0, 7], "scores": [1.0, 0.5]}, "q2": {"results": []},
                  "q3": {"results": []}}},
     r"results/q1\.json: neighbors entry 1, field neighbors: position 7 outside \[0, 3\)"),
    ({"results": {"q1": {"query": "q2", "results": []}, "q2": {"results": []}, "q3": {"results": []}}},
     r"results/q1\.json: field query: 'q2' differs"),
    ({"results": {"q1": {"results": []}, "q2": {"results": []}, "q3": {"results": []}, "q4": {"results": []}}},
     r"results/q4\.json: no query 'q4'"),
    ({"results": {"q1": {"results": [{"id": "r0"}]}, "q2": {"results": []}, "q3": {"results": []}}},
     r"results/q1\.json: results entry 0, field score: missing"),
])
def test_faiss_json_malformed(tmp_path, kwargs, match):
    folder = _faiss_folder(tmp_path, **kwargs)
    _fails(tmp_path / "out.zarr", match, "faiss-json", [folder])


def test_faiss_json_invalid_json_names_line(tmp_path):
    folder = _faiss_folder(tmp_path)
    (folder / "results" / "q2.json").write_text('{"results": [\n  {"id": "r0", "score": }\n]}')
    _fails(tmp_path / "out.zarr", r"results/q2\.json: line 2, column \d+: invalid JSON", "faiss-json", [folder])


# --------------------------------------------------------------------------- trec


def _trec_files(tmp_path, qrels: str):
    (tmp_path / "queries.txt").write_text("101\n102\n103\n")
    (tmp_path / "gallery.txt").write_text("docA\ndocB\ndocC\ndocD\n\n")
    (tmp_path / "qrels.txt").write_text(qrels)
    return {"queries": tmp_path / "queries.txt", "gallery": tmp_path / "gallery.txt"}


def test_trec_round_trip(tmp_path):
    ids = _trec_files(tmp_path, "101 0 docB 2\n101 0 docD 0\n\n# comment\n102\t0\tdocA\t-1\n"
                                "103 Q0 docC 1\n101 0 docB 2\n")
    out = tmp_path / "ds.zarr"
    summary = import_to("trec", [tmp_path / "qrels.txt"], out, **ids)
    got = _read(out)
    assert _keys(got["query/key"]) == ["101", "102", "103"]
    assert _keys(got["gallery/key"]) == ["docA", "docB", "docC", "docD"]
    # (101, docB) is repeated with the same grade (2, kept as a grade) and collapsed;
    # a negative grade is in the pool, not judged (trec_eval; contract v4): -2, never junk (it was 0 before)
    assert list(zip(got["qrels/query"].tolist(), got["qrels/item"].tolist(), got["qrels/rel"].tolist())) == [
        (0, 1, 2), (0, 3, 0), (1, 0, -2), (2, 2, 1)]
    assert got["qrels/rel"].dtype == np.int8 and got["qrels/item"].dtype == np.int64
    assert _attrs(out)["protocol"] == "qrels"
    assert summary["qrels"] == 4


@pytest.mark.parametrize("qrels, match", [
    ("101 0 docA 1\n101 0 docZ 1\n", r"qrels\.txt: line 2, field docid: unknown document 'docZ'"),
    ("101 0 docA 1\n101 docB 1\n", r"qrels\.txt: line 2: 3 fields, expected 4"),
    ("101 0 docA 1\n\n101 0 docB yes\n", r"qrels\.txt: line 3, field rel: 'yes' is not an integer"),
    ("101 0 docA 1\n101 0 docA 0\n",
     r"qrels\.txt: line 2, field rel: \(101, docA\) judged 0 here but differently on line 1"),
])
def test_trec_malformed(tmp_path, qrels, match):
    ids = _trec_files(tmp_path, qrels)
    _fails(tmp_path / "out.zarr", match, "trec", [tmp_path / "qrels.txt"], **ids)


def test_trec_bad_id_list(tmp_path):
    ids = _trec_files(tmp_path, "101 0 docA 1\n")
    (tmp_path / "gallery.txt").write_text("docA\ndocB\ndocA\n")
    _fails(tmp_path / "out.zarr", r"gallery\.txt: line 3, field id: duplicate id 'docA' \(also line 1\)",
           "trec", [tmp_path / "qrels.txt"], **ids)
    (tmp_path / "gallery.txt").write_text("docA\n\ndocB\n")
    _fails(tmp_path / "out.zarr", r"gallery\.txt: line 2, field id: empty line",
           "trec", [tmp_path / "qrels.txt"], **ids)


def test_trec_merged_into_existing_dataset(tmp_path):
    from evalcore.io.dataset import write_dataset

    qemb = RNG.standard_normal((2, 3)).astype(np.float32)
    gemb = RNG.standard_normal((3, 3)).astype(np.float32)
    base = tmp_path / "base.zarr"
    write_dataset(base, {"query/emb": qemb, "query/key": np.array(["a", "b"], dtype=object),
                         "gallery/emb": gemb, "gallery/key": np.array(["x", "y", "z"], dtype=object),
                         "qrels/query": np.array([0]), "qrels/item": np.array([0]), "qrels/rel": np.array([1])},
                  {"similarity": "dot"})
    (tmp_path / "qrels.txt").write_text("b 0 z 1\na 0 y 0\n")
    out = tmp_path / "merged.zarr"
    import_to("trec", [tmp_path / "qrels.txt"], out, dataset=base)
    got = _read(out)
    np.testing.assert_array_equal(got["query/emb"], qemb)
    np.testing.assert_array_equal(got["gallery/emb"], gemb)
    assert _keys(got["gallery/key"]) == ["x", "y", "z"]
    assert got["qrels/query"].tolist() == [1, 0]  # the base's qrels are replaced
    assert got["qrels/item"].tolist() == [2, 1]
    assert got["qrels/rel"].tolist() == [1, 0]
    assert _attrs(out)["similarity"] == "dot"
    _valid(out, "qrels")
    (tmp_path / "qrels.txt").write_text("b 0 w 1\n")
    _fails(tmp_path / "out2.zarr",
           r"qrels\.txt: line 1, field docid: unknown document 'w' \(not in dataset .*gallery/key\)",
           "trec", [tmp_path / "qrels.txt"], dataset=base)


# --------------------------------------------------------------------------- dispatch and CLI


def test_existing_output_is_kept_on_bad_input_even_with_overwrite(tmp_path):
    src = _mat_inputs()
    scipy.io.savemat(tmp_path / "good.mat", src)
    out = tmp_path / "ds.zarr"
    import_to("mat", [tmp_path / "good.mat"], out)
    with pytest.raises(InputError, match=r"--out .*ds\.zarr: exists and is not empty \(pass --overwrite"):
        import_to("mat", [tmp_path / "good.mat"], out)
    src["gallery_cam"] = [1, 2]
    scipy.io.savemat(tmp_path / "bad.mat", src)
    with pytest.raises(InputError, match=r"bad\.mat: key gallery_cam"):
        import_to("mat", [tmp_path / "bad.mat"], out, overwrite=True)
    assert _read(out)["gallery/cam"].tolist() == [2, 1, 4, 1, 2, 3]  # untouched


def test_dispatch_rejects_unknown_format_option_and_input_count(tmp_path):
    with pytest.raises(InputError, match=r"format 'csv': unknown"):
        read_format("csv", [])
    with pytest.raises(InputError, match=r"--emb-column: not an option of format mat"):
        read_format("mat", [tmp_path / "x.mat"], emb_column="v")
    with pytest.raises(InputError, match=r"format parquet: 3 input path\(s\) given, expected 1 to 2"):
        read_format("parquet", ["a", "b", "c"])
    assert "query_index.json" in FORMATS_HELP and "results/<query id>.json" in FORMATS_HELP


def _parser():
    parser = argparse.ArgumentParser(prog="evalcore")
    import_cmd.register(parser.add_subparsers(dest="command"))
    return parser


def test_cli_import_prints_summary(tmp_path, capsys):
    folder = _faiss_folder(tmp_path)
    out = tmp_path / "ds.zarr"
    args = _parser().parse_args(["import", "faiss-json", str(folder), "--out", str(out)])
    assert args.command == "import"
    assert import_cmd.run(args) == 0
    line = capsys.readouterr().out.strip()
    assert "\n" not in line
    assert "3 queries" in line and "3 gallery" in line and "top-3" in line and "geo" in line
    assert _read(out)["ranking/item"].shape == (3, 3)


def test_cli_per_format_options_reach_the_reader(tmp_path, capsys):
    ids = _trec_files(tmp_path, "101 0 docA 1\n102 0 docB 0\n")
    out = tmp_path / "ds.zarr"
    args = _parser().parse_args(["import", "trec", str(tmp_path / "qrels.txt"), "--queries", str(ids["queries"]),
                                 "--gallery", str(ids["gallery"]), "--out", str(out)])
    assert import_cmd.run(args) == 0
    assert "2 qrels" in capsys.readouterr().out
    assert _read(out)["qrels/rel"].tolist() == [1, 0]
    args = _parser().parse_args(["import", "trec", str(tmp_path / "qrels.txt"), "--out", str(tmp_path / "o"),
                                 "--emb-column", "x", "--queries", str(ids["queries"])])
    with pytest.raises(InputError, match="--emb-column: not an option of format trec"):
        import_cmd.run(args)
    assert not os.path.exists(tmp_path / "o")
