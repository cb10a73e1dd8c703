"""Every registered protocol through the same checks (the protocol interface, ``core/protocols/base.py``).

- the registry and the ``Protocol`` type name the same protocols;
- ``validate`` names each array a protocol needs when it is missing;
- a protocol reads only through its ``ChunkReader``: plain in-memory arrays give the Truth a Zarr dataset gives;
- options that apply to some protocols only are refused, naming those that take them;
- adding a protocol is one module: a leave-one-out protocol registered here is evaluated end to end and
  equals a brute-force reference.
"""
from __future__ import annotations

from typing import get_args

import numpy as np
import pytest
from reference import cosine_scores, evaluate_all

from evalcore.core import protocols
from evalcore.core.protocols import ChunkReader, Protocol, Truth, TruthOptions, label_index, truth_from_pairs
from evalcore.core.protocols.labels import LABEL_SIDE, label_candidates
from evalcore.engine.evaluate import Options, evaluate
from evalcore.errors import InputError
from evalcore.io import dataset as ds
from evalcore.io import truth as truth_io
from evalcore.io.validate import validate
from evalcore.types import Protocol as ProtocolName

N_QUERY, N_GALLERY = 7, 23


def arrays_for(protocol: str, seed: int = 0) -> dict[str, np.ndarray]:
    """A small dataset holding what ``protocol`` needs (and gallery/junk)."""
    rng = np.random.default_rng(seed)
    out = {"query/emb": rng.normal(size=(N_QUERY, 8)).astype(np.float32),
           "gallery/emb": rng.normal(size=(N_GALLERY, 8)).astype(np.float32),
           "gallery/junk": rng.random(N_GALLERY) < 0.1}
    if protocol in ("reid", "class"):
        out["query/label"] = rng.integers(0, 4, N_QUERY)
        out["gallery/label"] = rng.integers(0, 4, N_GALLERY)
    if protocol == "reid":
        out["query/cam"] = rng.integers(0, 3, N_QUERY)
        out["gallery/cam"] = rng.integers(0, 3, N_GALLERY)
    if protocol == "qrels":
        out["qrels/query"] = rng.integers(0, N_QUERY, 30)
        out["qrels/item"] = rng.integers(0, N_GALLERY, 30)
        out["qrels/rel"] = rng.integers(-1, 2, 30)
        # one judgement per pair: repeats with other grades would be a (tested elsewhere) conflict
        _, first = np.unique(out["qrels/query"] * N_GALLERY + out["qrels/item"], return_index=True)
        for name in ("qrels/query", "qrels/item", "qrels/rel"):
            out[name] = out[name][np.sort(first)]
    if protocol == "geo":
        out.update({"query/lat": rng.uniform(-60, 60, N_QUERY), "query/lon": rng.uniform(-170, 170, N_QUERY),
                    "gallery/lat": rng.uniform(-60, 60, N_GALLERY), "gallery/lon": rng.uniform(-170, 170, N_GALLERY)})
    if protocol == "xy":
        out.update({"query/x": rng.normal(size=N_QUERY), "query/y": rng.normal(size=N_QUERY),
                    "gallery/x": rng.normal(size=N_GALLERY), "gallery/y": rng.normal(size=N_GALLERY)})
    return out


class ArraysReader:
    """A ChunkReader over plain arrays: no Zarr, no engine."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        self.arrays = arrays

    def has(self, name: str) -> bool:
        return name in self.arrays

    def read(self, name: str, rows=None) -> np.ndarray:
        return self.arrays[name] if rows is None else self.arrays[name][rows]

    def length(self, name: str) -> int:
        return len(self.arrays[name])

    @property
    def n_queries(self) -> int:
        return len(self.arrays["query/emb"])

    def gallery(self, names: tuple[str, ...]) -> dict[str, np.ndarray]:
        out = {n: self.arrays[f"gallery/{n}"].astype(bool if n == "junk" else np.int64)
               for n in names if f"gallery/{n}" in self.arrays}
        if "label" in out:
            out["label_index"] = label_index(out["label"])
        return out


def same_truth(a: Truth, b: Truth) -> bool:
    fields = ("rel_indptr", "rel_items", "junk_indptr", "junk_items", "n_junk")
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in fields) and a.columns.keys() == b.columns.keys()


def test_the_registry_and_the_protocol_type_name_the_same_protocols():
    assert set(protocols.names()) == set(get_args(ProtocolName))
    assert all(protocols.get(name).name == name for name in protocols.names())
    with pytest.raises(InputError, match="--protocol: 'nope' is not one of reid, class, qrels, geo, xy"):
        protocols.get("nope")


@pytest.mark.parametrize("name", protocols.names())
def test_validate_names_every_array_the_protocol_needs(write, name):
    arrays = arrays_for(name)
    assert not validate(ds.open_dataset(write(arrays, name="whole.zarr")), name)
    for i, needed in enumerate(protocols.get(name).arrays):
        group = ds.open_dataset(write({k: v for k, v in arrays.items() if k != needed}, name=f"no{i}.zarr"))
        assert f"{needed}: missing (needed by protocol {name!r})" in validate(group, name).messages()


@pytest.mark.parametrize("name", protocols.names())
@pytest.mark.parametrize("q0, q1", [(0, N_QUERY), (2, 5)])
def test_a_protocol_reads_only_through_its_reader(write, name, q0, q1):
    arrays = arrays_for(name, seed=3)
    protocol = protocols.get(name)
    options = Options(protocol=name)
    from_zarr = protocol.load(truth_io.DatasetReader(ds.open_dataset(write(arrays))), options, q0, q1, N_GALLERY)
    from_arrays = protocol.load(ArraysReader(arrays), options, q0, q1, N_GALLERY)
    assert from_zarr.n_queries == q1 - q0 and same_truth(from_zarr, from_arrays)
    assert protocol.validate(ArraysReader(arrays), N_QUERY, N_GALLERY) == []


@pytest.mark.parametrize("option, flag", [({"radius": 5.0}, "takes_radius"), ({"judged_only": True}, "takes_judged_only"),
                                          ({"empty_queries": "zero"}, "takes_empty_zero")])
def test_protocol_options_are_refused_where_they_do_not_apply(option, flag):
    takers = [p.name for p in protocols.PROTOCOLS.values() if getattr(p, flag)]
    assert takers  # every such option applies somewhere
    for name in protocols.names():
        options = Options(protocol=name, **option)
        if name in takers:
            assert options.checked()
            continue
        with pytest.raises(InputError) as caught:
            options.checked()
        message = str(caught.value)
        assert message.startswith(f"--{next(iter(option)).replace('_', '-')}:") and f"not {name!r}" in message
        assert all(t in message for t in takers)


# --------------------------------------------------------------------------- adding a protocol


class LeaveOneOut(Protocol):
    """Query set = gallery set (metric learning: CUB, SOP): query i is gallery item i, which is junk for it;
    relevant = the other items of its label."""

    name = "leave_one_out"
    arrays = ("query/label", "gallery/label")

    def load(self, reader: ChunkReader, options: TruthOptions, q0: int, q1: int, n_gallery: int) -> Truth:
        g = reader.gallery(LABEL_SIDE)
        rows, items = label_candidates(reader.read("query/label", slice(q0, q1)).astype(np.int64), g["label"],
                                       g["label_index"])
        self_match = items == rows + q0
        return truth_from_pairs(q1 - q0, rows[~self_match], items[~self_match], rows[self_match],
                                items[self_match], g.get("junk"))


@pytest.fixture
def leave_one_out():
    protocol = protocols.register(LeaveOneOut())
    yield protocol
    del protocols.PROTOCOLS[protocol.name]


def test_a_protocol_added_in_one_module_runs_end_to_end(write, leave_one_out):
    rng = np.random.default_rng(11)
    emb = rng.normal(size=(60, 16)).astype(np.float32)
    label = rng.integers(0, 9, 60)
    path = write({"query/emb": emb, "gallery/emb": emb, "query/label": label, "gallery/label": label})
    result = evaluate(path, Options(protocol="leave_one_out", ks=(1, 5)))  # type: ignore[arg-type]
    scores = cosine_scores(emb, emb)
    rel = (label[:, None] == label[None, :]) & ~np.eye(60, dtype=bool)
    want = evaluate_all(scores, rel, np.eye(60, dtype=bool), (1, 5))
    got = result.per_query.to_pylist()
    for column in ("n_relevant", "n_junk", "first_rank", "last_rank", "top1", "hit_at_5", "recall_at_5"):
        assert [row[column] for row in got] == [w[column] for w in want], column
    assert np.allclose([row["ap"] for row in got if row["ap"] is not None],
                       [w["ap"] for w in want if w["ap"] is not None], rtol=0, atol=1e-12)
