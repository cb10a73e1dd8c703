import json
import pathlib

import numpy as np
import pytest

from evalcore.io import dataset as ds

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
VECTOR_DTYPES = {"emb": "float32", "label": "int64", "cam": "int64", "lat": "float64", "lon": "float64",
                 "x": "float64", "y": "float64", "junk": "bool", "query": "int64", "item": "int64",
                 "rel": "int8", "score": "float32"}


def load_vector(name: str) -> dict:
    return json.loads((FIXTURES / "vectors" / f"{name}.json").read_text())


def vector_arrays(case: dict) -> dict:
    return {k: np.asarray(v, dtype=VECTOR_DTYPES[k.rsplit("/", 1)[-1]]) for k, v in case["dataset"].items()}


def random_reid(rng, n_query=300, n_gallery=2000, dims=16, n_ids=60, n_cams=4, unknown=0.1,
                distractors=0.1, global_junk=0.02, dtype=np.float32, spread=0.6):
    """Clustered embeddings with identities, cameras, distractors, junk and unknown queries."""
    centers = rng.standard_normal((n_ids, dims))
    gl = rng.integers(0, n_ids, n_gallery)
    gl[rng.random(n_gallery) < distractors] = -1
    ql = rng.integers(0, n_ids, n_query)
    unknown_rows = rng.random(n_query) < unknown
    ql[unknown_rows] = n_ids + rng.integers(0, 5, unknown_rows.sum())  # labels no gallery item has
    gemb = np.where(gl[:, None] >= 0, centers[np.maximum(gl, 0)], 0) + spread * rng.standard_normal((n_gallery, dims))
    qemb = centers[ql % n_ids] + spread * rng.standard_normal((n_query, dims))
    return {
        "query/emb": qemb.astype(dtype), "gallery/emb": gemb.astype(dtype),
        "query/label": ql.astype(np.int64), "gallery/label": gl.astype(np.int64),
        "query/cam": rng.integers(0, n_cams, n_query).astype(np.int64),
        "gallery/cam": rng.integers(0, n_cams, n_gallery).astype(np.int64),
        "gallery/junk": rng.random(n_gallery) < global_junk,
        "query/group": np.array([f"g{i % 3}" for i in range(n_query)], dtype=object),
    }


@pytest.fixture
def write(tmp_path):
    """write(arrays, name=..., chunk_rows=..., attrs=...) -> dataset path."""
    def _write(arrays, name="ds.zarr", chunk_rows=None, attrs=None):
        path = tmp_path / name
        ds.write_dataset(path, arrays, attrs, chunk_rows=chunk_rows)
        return path
    return _write


@pytest.fixture
def import_trec(tmp_path):
    """import_trec(qrels, run) -> a dataset of the run's lists, imported by score (equal scores: ties) with its
    qrels, from TREC files written as trec_eval reads them (``{qid: {docid: grade}}``, ``{qid: {docid: score}}``)."""
    from evalcore.io import importers

    def _import(qrels: dict, run: dict, name: str = "ds.zarr"):
        (tmp_path / "qrels").write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items()
                                                for d, g in docs.items()))
        lines = []
        for q, docs in run.items():
            ordered = sorted(docs.items(), key=lambda x: -x[1])
            lines += [f"{q} Q0 {d} {i + 1} {s!r} r\n" for i, (d, s) in enumerate(ordered)]
        (tmp_path / "run").write_text("".join(lines))
        out = tmp_path / name
        importers.import_to("trec-run", [tmp_path / "run"], out, qrels=str(tmp_path / "qrels"), order="score")
        return out
    return _import
