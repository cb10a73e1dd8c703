"""Validation at the door: every problem of a dataset for a protocol, each naming the array and rows."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import numpy as np
import zarr

from evalcore.core import protocols
from evalcore.core.ranking import dot_overflow_rows, item_range_problems, list_problems, row_norms
from evalcore.errors import ArrayError, InputError, OptionError, first_problem, input_error, mention
from evalcore.io import kinds, truth
from evalcore.io.dataset import (
    ACCEPTED_KINDS,
    SCORE_DTYPES,
    SCORES,
    SIDES,
    _leaf,
    array,
    bad_rows,
    chunk_problems,
    dataset_attributes,
    dot_overflow_error,
    embedding_problems,
    has,
    higher_is_better,
    nonfinite_score_error,
    read,
    read_array,
)
from evalcore.types import Protocol as ProtocolName

#: the command line's advice when a dataset has more than one problem: a mention, as the Python API words it
#: its own way
VALIDATE_ADVICE = mention("; run `evalcore validate`")


@dataclass
class Problems:
    """Collects every problem found; ``raise_first`` turns them into one InputError."""

    items: list[InputError] = field(default_factory=list)

    def add(self, problem: InputError) -> None:
        self.items.append(problem)

    def __bool__(self) -> bool:
        return bool(self.items)

    def messages(self) -> list[str]:
        """Each problem as one line in the command line's words (what ``evalcore validate`` prints)."""
        return [str(problem) for problem in self.items]

    def raise_if_any(self) -> None:
        if self.items:
            raise first_problem(self.items, VALIDATE_ADVICE)


def _check_kind(group, name, problems) -> bool:
    arr = group[name]
    kinds = ACCEPTED_KINDS.get(_leaf(name))
    if kinds and arr.dtype.kind not in kinds:
        what = {"f": "floating-point", "iu": "integer", "b": "boolean", "UOT": "string"}[kinds]
        problems.add(input_error(name, f"dtype {arr.dtype} is not {what}"))
        return False
    if _leaf(name) == "emb" and np.dtype(str(arr.dtype)) not in (np.float16, np.float32, np.float64):
        problems.add(input_error(name, f"dtype {arr.dtype} is not float16, float32 or float64"))
        return False
    return True


#: every array a run may read, for the chunk-presence check
KNOWN_ARRAYS = tuple(f"{side}/{leaf}" for side in SIDES
                     for leaf in ("emb", "label", "cam", "key", "group", "split", "junk", "lat", "lon", "x", "y")) \
    + ("qrels/query", "qrels/item", "qrels/rel", *kinds.LISTS.arrays, *kinds.LISTS.optional, SCORES)


def scan_embeddings(group, name: str, cosine: bool, problems: Problems) -> np.ndarray:
    """Check every row of an embedding array, a few whole Zarr chunks (~64 MiB) at a time; the rows' norms.

    The float64 norms (8 bytes a row) serve the dot-product overflow check.
    """
    arr = group[name]
    chunk = max(arr.chunks[0], 1)
    step = max(1, (1 << 24) // max(1, arr.shape[1] * chunk)) * chunk
    nonfinite, zero, norms = [], [], []
    for start in range(0, arr.shape[0], step):
        block_norms = row_norms(read_array(arr, name, slice(start, start + step)))
        bad, empty = bad_rows(None, block_norms)
        nonfinite.append(bad + start)
        zero.append(empty + start)
        norms.append(block_norms)
    join = lambda parts: np.concatenate(parts) if parts else np.empty(0, np.int64)  # noqa: E731
    for message in embedding_problems(name, join(nonfinite), join(zero), cosine):
        problems.add(message)
    return np.concatenate(norms) if norms else np.empty(0, np.float64)


def scan_scores(group, problems: Problems) -> None:
    """Check every value of ``scores/value`` (finite), whole Zarr chunks at a time (about 64 MiB): the rows
    holding NaN or infinite values, as one problem. A corrupt chunk is reported like any other problem."""
    arr = group[SCORES]
    rows_per, cols_per = max(1, arr.chunks[0]), max(1, arr.chunks[1])
    width = max(1, (1 << 26) // max(1, rows_per * cols_per * arr.dtype.itemsize)) * cols_per
    bad = []
    try:
        for r0 in range(0, arr.shape[0], rows_per):
            rows = np.zeros(min(rows_per, arr.shape[0] - r0), dtype=bool)
            for c0 in range(0, arr.shape[1], width):
                block = read_array(arr, SCORES, (slice(r0, r0 + rows_per), slice(c0, c0 + width)))
                rows |= ~np.isfinite(block).all(axis=1)
            bad.append(np.flatnonzero(rows) + r0)
    except InputError as exc:
        problems.add(exc)
        return
    found = np.concatenate(bad) if bad else np.empty(0, np.int64)
    if found.size:
        problems.add(nonfinite_score_error(found))


def check_scores(group, n: dict, problems: Problems) -> None:
    """The structure of ``scores/value``: float16/32/64, (Q, G) matching the other arrays, its attribute, and
    not alongside embeddings or precomputed rankings. Records Q and G in ``n`` where no other array did."""
    arr = group[SCORES]
    others = [name for kind in reversed(kinds.PRECEDENCE) if kind != kinds.SCORES.name
              for name in kinds.get(kind).arrays if has(group, name)]
    if others:
        problems.add(input_error(SCORES, f"give the score matrix or {' and '.join(others)} to rank by, not both"))
    if np.dtype(str(arr.dtype)).name not in SCORE_DTYPES:
        problems.add(input_error(SCORES, f"dtype {arr.dtype} is not float16, float32 or float64"))
    try:
        higher_is_better(group)
    except InputError as exc:
        problems.add(exc)
    if len(arr.shape) != 2:
        problems.add(input_error(SCORES, f"shape {arr.shape} is not (queries, gallery items)"))
        return
    for axis, side, what in ((0, "query", "rows"), (1, "gallery", "columns")):
        if side in n and n[side][1] != arr.shape[axis]:
            problems.add(input_error(SCORES, f"{arr.shape[axis]} {what} (one per {side}), but {n[side][0]} has {n[side][1]}"))
        n.setdefault(side, (SCORES, arr.shape[axis]))


def scan_decodable(group, name: str, problems: Problems, decoded: dict[str, np.ndarray] | None = None) -> None:
    """Decode every chunk of a (non-embedding) array once: a corrupt chunk is named here, not mid-run.

    An array decoded in one read is kept in ``decoded`` (as ``dataset.read`` returns it), so the checks
    that read it whole next do not decode it a second time."""
    arr = group[name]
    step = max(1, (1 << 24) // max(1, arr.chunks[0] * int(np.prod(arr.shape[1:], dtype=np.int64)))) * arr.chunks[0]
    try:
        for start in range(0, arr.shape[0] if arr.ndim else 1, step):
            data = read_array(arr, name, slice(start, start + step) if arr.ndim else None)
            if decoded is not None and arr.ndim and step >= arr.shape[0]:
                decoded[name] = data.astype(object) if data.dtype.kind in "UOT" else data
    except InputError as exc:
        problems.add(exc)


def dot_overflow(query_norms: np.ndarray, gallery_norms: np.ndarray, dims: int) -> list[InputError]:
    """Under dot: the rows whose products can overflow float32 (see ``ranking.dot_limit``)."""
    finite = lambda x: np.where(np.isfinite(x), x, 0).astype(np.float64)  # noqa: E731 - NaN rows are reported already
    qn, gn = finite(query_norms), finite(gallery_norms)
    q_rows, g_rows = dot_overflow_rows(qn, gn, dims)
    if not g_rows.size:
        return []
    return [dot_overflow_error(q_rows, qn[q_rows].max(), g_rows, gn[g_rows].max())]


def keys_ascend(keys: np.ndarray) -> bool:
    """Whether the keys (as stored, or ``dataset.read``'s object array of str) strictly ascend: a linear check
    that rules out repeats without a sort."""
    if len(keys) < 2:
        return True
    try:
        return bool((keys[1:] > keys[:-1]).all())
    except TypeError:  # not all str: the sort decides
        return False


def protocol_arrays_present(group) -> list[str]:
    """The arrays the dataset holds that some protocol reads (labels, cameras, coordinates, qrels)."""
    every = dict.fromkeys(name for p in protocols.PROTOCOLS.values() for name in p.arrays)
    return [name for name in every if has(group, name)]


def chosen_protocol(group, protocol: str | None) -> ProtocolName:
    """The protocol of a run: the one given, else the dataset's ``evalcore`` attribute's, else the one its
    arrays choose (arrays only one protocol reads: cameras ``reid``, lat/lon ``geo``, x/y ``xy``, qrels
    ``qrels``), else ``class``. A malformed attribute, or arrays choosing two protocols, is an InputError."""
    attribute = dataset_attributes(group).get("protocol")  # checked even when a protocol is given
    chosen = protocol or attribute or protocols.inferred_protocol(protocol_arrays_present(group)) or "class"
    return cast(ProtocolName, chosen)  # a given word is checked with the other options (Options.checked)


def unused_arrays(group, protocol: str) -> list[str]:
    """The arrays of the dataset that another protocol reads and ``protocol`` does not (cameras under class)."""
    return protocols.unused_arrays(protocol_arrays_present(group), protocol)


#: gallery keys the checks read whole are handed on (``validate``'s ``keep``) up to this many rows: ~16 bytes
#: a short key, and a run names each query's rank-1 item by them at the end
KEPT_KEY_ROWS = 1 << 23


def validate(group: zarr.Group, protocol: str, *, similarity: str = "cosine", judged_only: bool = False,
             scan_values: bool = True, keep: dict[str, np.ndarray] | None = None) -> Problems:
    """Every problem of the dataset for this protocol, each naming the array and rows.

    ``keep``: where ``gallery/key``, read whole for its uniqueness check, is left for the caller (up to
    KEPT_KEY_ROWS rows, as stored: no ``str`` objects are made), so that a run reads it once.
    """
    problems = Problems()
    kind = kinds.kind_of(group)
    rankings, scores = kinds.LISTS.present(group), kinds.SCORES.present(group)
    if protocol not in protocols.PROTOCOLS:
        known = protocols.names()
        problems.add(OptionError("--protocol", f"unknown protocol {protocol!r} (choose {', '.join(known[:-1])} or {known[-1]})"))
        return problems
    if kind is None:  # no kind's arrays are all there: the embeddings are what is missing
        others = " or ".join(sorted(k for k in kinds.PRECEDENCE if k != kinds.EMBEDDINGS.name))
        for name in kinds.EMBEDDINGS.arrays:
            if not has(group, name):
                problems.add(input_error(name, f"missing (needed to rank; or give {others})"))
    for name in protocols.get(protocol).arrays:
        if not has(group, name):
            problems.add(input_error(name, f"missing (needed by protocol {protocol!r})"))
    if problems:
        return problems

    n: dict[str, tuple[str, int]] = {}
    for side in SIDES:
        for leaf in ("emb", "label", "cam", "key", "group", "split", "junk", "lat", "lon", "x", "y"):
            name = f"{side}/{leaf}"
            if not has(group, name):
                continue
            if not _check_kind(group, name, problems):
                continue
            shape = array(group, name).shape
            if leaf == "emb":
                if len(shape) != 2:
                    problems.add(input_error(name, f"shape {shape} is not (rows, dims)"))
                    continue
            elif len(shape) != 1:
                problems.add(input_error(name, f"shape {shape} is not one-dimensional"))
                continue
            if side in n and n[side][1] != shape[0]:
                problems.add(input_error(name, f"{shape[0]} rows, but {n[side][0]} has {n[side][1]}"))
            else:
                n.setdefault(side, (name, shape[0]))
    if has(group, "query/emb") and has(group, "gallery/emb"):
        dq, dg = array(group, "query/emb").shape[-1], array(group, "gallery/emb").shape[-1]
        if dq != dg:
            problems.add(ArrayError("gallery/emb", f"{dg} dimensions, but " + mention("query/emb") + f" has {dq}"))
    if rankings:
        lists, scored = kinds.LISTS.query_array, kinds.LISTS.optional[0]
        item = array(group, lists)
        if len(item.shape) != 2:
            problems.add(ArrayError(lists, f"shape {item.shape} is not (queries, K)"))
        elif "query" in n and item.shape[0] != n["query"][1]:
            problems.add(ArrayError(lists, f"{item.shape[0]} rows, but {n['query'][0]} has {n['query'][1]}"))
        if has(group, scored) and array(group, scored).shape != item.shape:
            problems.add(ArrayError(scored, f"shape {array(group, scored).shape} differs from {lists} {item.shape}"))
        _check_kind(group, lists, problems)
    if scores:
        check_scores(group, n, problems)
    if has(group, "qrels/query"):
        lengths = {name: array(group, name).shape for name in ("qrels/query", "qrels/item", "qrels/rel") if has(group, name)}
        if len(set(lengths.values())) > 1:
            problems.add(OptionError("qrels", f"arrays differ in length ({', '.join(f'{k} {v}' for k, v in lengths.items())})"))
        for name in lengths:
            _check_kind(group, name, problems)
    if problems:
        return problems
    # a chunk the store lacks reads as the fill value: silently wrong numbers, so it is an error
    for name in KNOWN_ARRAYS:
        if has(group, name):
            for message in chunk_problems(group, name):
                problems.add(message)
    if problems:
        return problems

    if scan_values and (not rankings or has(group, "query/emb")):
        norms = {}
        for name in ("query/emb", "gallery/emb"):
            if has(group, name):
                try:
                    norms[name] = scan_embeddings(group, name, similarity == "cosine", problems)
                except InputError as exc:  # a corrupt chunk: reported like any other problem
                    problems.add(exc)
        if similarity == "dot" and len(norms) == 2:
            for message in dot_overflow(norms["query/emb"], norms["gallery/emb"], array(group, "query/emb").shape[1]):
                problems.add(message)
    if scan_values and scores:
        scan_scores(group, problems)
    decoded: dict[str, np.ndarray] = {}

    def whole(name: str, as_stored: bool = False) -> np.ndarray:
        """The array read whole (once: what the decode scan read is taken over); ``as_stored``: strings in the
        store's own dtype, no ``str`` objects."""
        if name in decoded:
            return decoded.pop(name)
        return read_array(array(group, name), name) if as_stored else read(group, name)

    if scan_values:
        before = len(problems.items)
        for name in KNOWN_ARRAYS:
            if not name.endswith("/emb") and name != SCORES and has(group, name):
                scan_decodable(group, name, problems, decoded)
        if len(problems.items) > before:  # the checks below would only fail on the same chunks
            return problems
    for name in ("query/key", "gallery/key"):
        if has(group, name):
            keys = whole(name, as_stored=True)
            if keep is not None and name == "gallery/key" and len(keys) <= KEPT_KEY_ROWS:
                keep[name] = keys
            if keys_ascend(keys):
                continue  # strictly ascending keys (as the importers write them) cannot repeat
            uniq, counts = np.unique(keys if keys.dtype.kind == "T" else keys.astype(str), return_counts=True)
            dup = uniq[counts > 1]
            if dup.size:
                problems.add(input_error(name, f"duplicate keys {', '.join(map(repr, dup[:5].tolist()))}"
                                         + (f" ({dup.size} in all)" if dup.size > 5 else "")))
    n_gallery = n["gallery"][1] if "gallery" in n else None
    n_query = array(group, kind.query_array).shape[0] if kind is not None and kind.backend is None \
        else n.get("query", ("", None))[1]
    for message in protocols.get(protocol).validate(truth.DatasetReader(group, preloaded=decoded),
                                                     n_query, n_gallery):
        problems.add(message)
    # the lists' values: here when scanning values (``evalcore validate``); an evaluation's tasks check their
    # own rows with the same functions as they read them (``ranking.rank_by_lists``), as for embeddings
    if scan_values and rankings and "gallery" in n:
        items = whole(kinds.LISTS.query_array)
        scored = kinds.LISTS.optional[0]
        ranking_scores = whole(scored) if has(group, scored) else None
        for message in item_range_problems(items, n["gallery"][1]) + list_problems(items, ranking_scores):
            problems.add(message)
    return problems

