"""The Python API: ``evalcore.evaluate`` on a dataset or on arrays in memory, and its ``Result``.

The command line is a thin layer over this module: ``evalcore evaluate``
parses its flags into the keyword arguments below and calls ``evaluate``,
then ``Result.save``. Errors raised here name the parameter (``query_labels``,
``max_rank``), not the command-line flag or the Zarr array it becomes.

Where the work runs depends on its size (see ``choose_execution``): a job
whose normalised gallery fits comfortably in this process runs here, on
threads sharing one copy of it; a larger one starts a local Dask cluster of
worker processes; ``client=`` runs on a cluster you already have.
"""
from __future__ import annotations

import contextlib
import contextvars
import inspect
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.compute as pc
import zarr

from evalcore import declarations
from evalcore.core import openset, protocols, registry
from evalcore.engine import evaluate as engine
from evalcore.engine import options as engine_options
from evalcore.engine.evaluate import Result as EngineResult
from evalcore.engine.faults import check_stall_timeout
from evalcore.errors import EvalcoreWarning, InputError, OptionError, input_error, is_flag, mention
from evalcore.io import dataset as ds
from evalcore.io import kinds, report
from evalcore.io.files import atomic_write
from evalcore.io.validate import VALIDATE_ADVICE, chosen_protocol, unused_arrays
from evalcore.io.validate import validate as validate_group
from evalcore.types import EmptyQueries, Similarity, Ties

if TYPE_CHECKING:
    from evalcore.core import comparison

# compare's modules (core.comparison, core.intervals, render.compare) and the report page (render.pages) are
# imported where they are used: every `evalcore` command that evaluates imports this module, and those that
# compare nothing or write no page should not pay for them

#: keyword argument -> the dataset array it becomes
ARRAY_PARAMETERS = {
    "query": "query/emb", "gallery": "gallery/emb",
    "query_labels": "query/label", "gallery_labels": "gallery/label",
    "query_cams": "query/cam", "gallery_cams": "gallery/cam",
    "gallery_junk": "gallery/junk", "query_keys": "query/key", "gallery_keys": "gallery/key",
    "query_groups": "query/group", "scores": "scores/value",
}
#: the given score matrix may come as distances (lower is better): stored as scores/value, higher_is_better false
DISTANCES = "distances"
#: the in-process threads never exceed this share of the machine's memory for the normalised gallery
IN_PROCESS_SHARE = 1 / 4
#: a dataset: a local path, a URL (s3://, gs://, ...) or an open zarr.Group; None when arrays are given
Source = str | os.PathLike[str] | zarr.Group | None
#: one array as users hold it: numpy, dask, zarr, a torch tensor, a list (of hashable ids for labels)
ArrayLike = Any
#: re-ranking: None/False for none, True for k1=20, k2=6, lambda=0.3, (k1, k2, lambda), or "K1,K2,LAMBDA"
Rerank = bool | tuple[int, int, float] | str | None
#: query expansion / database augmentation: None, (K, alpha) or "K,ALPHA"
Expansion = tuple[int, float] | str | None
#: judgements given by id beside the embeddings (BEIR's layout): query ids, corpus ids, {qid: {docid: grade}}
QRELS_PARAMETERS = ("query_ids", "gallery_ids", "qrels")



@dataclass(frozen=True)
class Data:
    """What is evaluated: a dataset (path, URL or ``zarr.Group``) or arrays given to the call."""

    source: Any
    arrays: dict[str, Any]
    storage_options: Mapping[str, Any] | None

    def __post_init__(self) -> None:
        # fsspec's keyword arguments: a mapping (a number or a string there was a TypeError from deep in fsspec)
        if self.storage_options is not None and not isinstance(self.storage_options, Mapping):
            raise OptionError("storage_options", f"give a mapping of fsspec options (such as {{'anon': True}}), "
                                                 f"not {type(self.storage_options).__name__}")


@dataclass(frozen=True)
class How:
    """How it is evaluated: the evaluation options (``evalcore.declarations``), as ``evaluate`` takes them."""

    protocol: str | None
    similarity: Similarity | None
    ks: Sequence[int]
    max_rank: int
    ties: Ties
    threshold: float | None
    map_at: int | None
    judged_only: bool
    radius: float | None
    empty_queries: EmptyQueries
    sweep: bool
    target_fpir: float | None
    metrics: Sequence[str] | None
    rerank: Rerank
    rel_level: int
    depth: int | None
    query_expansion: Expansion
    database_augmentation: Expansion
    ci: float | None
    resamples: int
    seed: int

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


@dataclass(frozen=True)
class Where:
    """Where it runs: threads here, local worker processes or a client's cluster, and how it is watched."""

    client: Any
    workers: int | None
    memory_limit: Any
    chunk_rows: int | None
    gallery_shards: int | None
    on_chunk: Callable[[dict[str, Any], int, int], None] | None
    stall_timeout: float | None
    on_progress: Callable[..., None] | None

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


class Result(EngineResult):
    """What ``evalcore.evaluate`` returns: the engine's tables and run record, and ``save``."""

    def save(self, out: str | os.PathLike[str], overwrite: bool = False, storage_options: Mapping[str, Any] | None = None,
             run: Mapping[str, Any] | None = None) -> str:
        """Write the report folder (the same files as ``evalcore evaluate --out``); returns its path.

        The folder appears whole or not at all; an existing one is replaced
        only with ``overwrite=True``. ``run`` adds entries to run.json.
        """
        from evalcore.render import pages

        record = {**self.run, "versions": report.versions(), **(run or {})}
        html = pages.render_report_html(self.per_query, self.summary, self.cmc, record, sweep=self.sweep)
        return report.write_report(out, self.tables(), record, extra={"report.html": html}, overwrite=overwrite,
                                   storage_options=storage_options)


def evaluate(source: Source = None, *, query: ArrayLike = None, gallery: ArrayLike = None,
             query_labels: ArrayLike = None, gallery_labels: ArrayLike = None, query_cams: ArrayLike = None,
             gallery_cams: ArrayLike = None, gallery_junk: ArrayLike = None, query_keys: ArrayLike = None,
             gallery_keys: ArrayLike = None, query_groups: ArrayLike = None,
             scores: ArrayLike = None, distances: ArrayLike = None,
             query_ids: Sequence[str | int] | None = None, gallery_ids: Sequence[str | int] | None = None,
             qrels: Any = None,
             protocol: str | None = None, similarity: Similarity | None = None,
             ks: Sequence[int] = (1, 3, 5, 10), max_rank: int = 50, ties: Ties = "pessimistic", threshold: float | None = None, map_at: int | None = None,
             judged_only: bool = False, radius: float | None = None, empty_queries: EmptyQueries = "skip",
             sweep: bool = False, target_fpir: float | None = None, metrics: Sequence[str] | None = None,
             rerank: Rerank = None, rel_level: int = 1, depth: int | None = None,
             query_expansion: Expansion = None, database_augmentation: Expansion = None,
             ci: float | None = None, resamples: int = 10_000, seed: int = 0,
             client: Any = None, workers: int | None = None, memory_limit: str | None = "auto",
             storage_options: Mapping[str, Any] | None = None, chunk_rows: int | None = None,
             gallery_shards: int | None = None,
             on_chunk: Callable[[dict[str, Any], int, int], None] | None = None,
             stall_timeout: float | None = None,
             on_progress: Callable[[int, int, str], None] | None = None) -> Result:
    """Rank every query against the gallery and compute the per-query and summary metrics.

    ``source``: a path or URL of a dataset, an open ``zarr.Group``, or None
    when the arrays are given (numpy, dask, or anything ``np.asarray`` takes,
    such as CPU torch tensors). ``scores`` or ``distances`` (Q, G), float16/32/64,
    numpy, dask or Zarr, replace ``query`` and ``gallery``: every pair's value
    as given, compared exactly (distances: lower is better), and
    ``top1_score``/``relevant_score`` report them as given. Identities
    (``query_labels``, ``gallery_labels``, the cams) may be integers (a negative
    label: no identity) or any hashable values, strings, tuples, mixed, which
    match by Python's ``==`` (None and NaN labels match nothing); the per-query
    ``label``/``cam`` columns show them as given. ``query_cams``/``gallery_cams``: each row's camera
    (``reid``: a gallery item of the query's identity from its camera is junk); ``gallery_junk``: a boolean
    per gallery row, junk for every query (removed from its ranking); ``query_keys``/``gallery_keys``: each
    row's name (strings, each once; default ``q<i>``, ``g<i>``); ``query_groups``: each query's group (a
    string), with a summary row per group. ``protocol`` and ``similarity`` default to the dataset's ``evalcore`` attribute, else
    ``class`` and ``cosine``.
    ``query_ids``, ``gallery_ids`` (str or int, each once) and ``qrels`` (BEIR's and pytrec_eval's
    ``{qid: {docid: grade}}``, an Arrow or pandas table with query, document and grade columns, a TREC
    qrels path, or ranx's ``Qrels``) beside the embeddings or ``scores``: the judgements matched to the
    rows by id (protocol ``qrels``; the ids are the keys). A grade >= 1 is relevant with that gain, 0
    judged not relevant, a negative grade in the pool, never relevant (trec_eval's reading). A judged
    query not in ``query_ids`` is left out, with a warning; a judged document not in ``gallery_ids`` is
    never retrieved but still judged (it counts in R and in nDCG's ideal, as pytrec_eval counts the
    judged documents a BEIR top-k run lacks), which embeddings need for it (``judged_by_id``).
    ``client=None, workers=None``: run here on threads when the gallery fits,
    else on a local cluster; ``workers=N``: a local cluster of N processes;
    ``client``: that Dask client. ``metrics``: names (``["map", "recall@5"]``, see
    ``metric_names()``) to compute only those; None: the default set. ``ties``: how equal scores rank,
    ``"pessimistic"`` (non-relevant items first), ``"optimistic"`` or ``"average"`` (tied items share their
    gains: the expected value over every order of the ties, for the metrics ``metric_names(ties="average")``
    lists; the default set is cut to those, and naming another is an ``OptionError``). ``rerank``: ``(k1, k2, lambda_value)``
    (or True for 20, 6, 0.3) ranks by k-reciprocal re-ranking's final distance (README, Re-ranking).
    ``database_augmentation=(K, alpha)`` replaces every gallery vector by the normalised sum of itself and its K
    nearest gallery vectors weighted by similarity^alpha, then ``query_expansion=(K, alpha)`` every query by the
    same over its K nearest (augmented) gallery vectors, before ranking (README, Query expansion).
    ``ci``: a level in (0, 1) adds the percentile bootstrap interval of every mean
    (``<metric>_ci_low``, ``<metric>_ci_high`` in the summary, ``ci_low``/``ci_high``
    per CMC point) over ``resamples`` resamples drawn from ``seed``. Raises
    ``InputError`` naming the parameter. What a reader should know (queries
    left out of the means, ...) is in ``run["warnings"]`` and issued as
    ``evalcore.EvalcoreWarning`` through Python's ``warnings``, naming the
    parameters (``warnings.filterwarnings("ignore", category=evalcore.EvalcoreWarning)``
    silences them).
    On a cluster, a worker that holds a task for ``stall_timeout`` seconds
    (default 180; longer when tasks are slow: 10 x the longest so far) is
    restarted and its tasks run elsewhere, or, with no other worker, the run
    raises ``evalcore.errors.WorkerStalled``; ``run["faults"]`` records lost
    and restarted workers.
    ``on_progress(done, total, phase)`` is called as the work goes: phase "ranking" counts query-gallery pairs
    ranked here, tile by tile; "chunks" (or "shards") tasks finished on a cluster; done == total ends a phase.
    Before numba compiles a kernel its cache lacks (a first run), it is called once with total 0 and the
    phase "compiling kernels (first run only, cached in <folder>)"; without ``on_progress`` that line goes
    to stderr. ``on_chunk(stats, done, total)`` still comes as each chunk ends.

    >>> import numpy as np, evalcore
    >>> gallery = np.eye(4, dtype=np.float32)
    >>> query = gallery[[0, 2]] + 0.1
    >>> r = evalcore.evaluate(query=query, gallery=gallery, query_labels=[0, 2], gallery_labels=[0, 1, 2, 3])
    >>> r.metrics["map"], r.metrics["hit_at_1"]
    (1.0, 1.0)
    >>> r.per_query.column("first_rank").to_pylist()
    [1, 1]
    """  # the options' section is added from the declarations below the function
    given = locals()
    arrays = {name: given[name] for name in (*ARRAY_PARAMETERS, DISTANCES) if given[name] is not None}
    for_python = not (_CLI_WORDS.get() or _NESTED.get())  # else the command line or the calling function says them
    with parameter_names(bool(arrays), DISTANCES in arrays):
        by_id = None
        if any(given[name] is not None for name in QRELS_PARAMETERS):
            if protocol not in (None, "qrels"):
                raise OptionError("protocol", f"{protocol!r} does not read qrels=; give protocol='qrels' or leave it out")
            arrays, by_id = judged_by_id(arrays, query_ids, gallery_ids, qrels, similarity, depth)
            similarity, depth = by_id.similarity, by_id.depth
            reshaped = [n for n, v in (("rerank", rerank), ("query_expansion", query_expansion),
                                       ("database_augmentation", database_augmentation)) if v not in (None, False)]
            if by_id.absent_score is not None and reshaped:  # their neighbour sets would take in the stand-in rows
                raise input_error(reshaped[0], "not with judged documents missing from gallery_ids (qrels); "
                                 "leave those judgements out to use it")
        arrays, originals = coded_identities(arrays)
        result = _evaluate(Data(source, arrays, storage_options),
                           How(**{name: given[name] for name in How.names()} | {"similarity": similarity,
                                                                              "depth": depth}),
                           Where(**{name: given[name] for name in Where.names()}))
    if originals:
        result = with_identities(result, originals)
    if by_id is not None:
        result = by_id.restored(result)
    if for_python:
        result.run["warnings"] = [python_words(w) for w in result.warnings]
        issue_warnings(result.warnings)
    return result


if evaluate.__doc__:  # None under python -OO
    evaluate.__doc__ += declarations.options_doc(inspect.signature(evaluate).parameters)


#: identities given as a pair of arrays, query side and gallery side, and the per-query column each becomes
IDENTITY_PAIRS = (("query_labels", "gallery_labels", "label"), ("query_cams", "gallery_cams", "cam"))


def coded_identities(arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``arrays`` with identities that are not integers (strings, mixed, any hashable values) coded once to
    int64 by ``io.identities.code_identities`` (equal values share a code; None and NaN labels match nothing;
    cameras keep every value, -1 too, and must be given), and ``{column: the query side's values}`` of those
    coded, for the per-query table. Integer identities are left as they are (a negative label: no identity)."""
    from evalcore.io.identities import NO_IDENTITY, code_identities, one_dimensional

    arrays, originals = dict(arrays), {}
    for query_name, gallery_name, column in IDENTITY_PAIRS:
        if query_name not in arrays or gallery_name not in arrays:
            continue  # one side alone: the dataset's checks name what is missing
        sides = [one_dimensional(as_given(arrays[name]), name) for name in (query_name, gallery_name)]
        if all(side.dtype.kind in "iu" for side in sides):
            continue
        cameras = column == "cam"  # a camera is a value like any other: two -1 cameras are the same camera
        codes = code_identities(*sides, negative_is_identity=cameras, names=(query_name, gallery_name))
        for name, coded in zip((query_name, gallery_name), codes, strict=True):
            missing = np.flatnonzero(coded == NO_IDENTITY) if cameras else np.empty(0, np.int64)
            if missing.size:
                raise input_error(name, f"row {int(missing[0])} has no camera (None or NaN); the same-camera "
                                 "rule needs every row's camera", rows=[int(missing[0])])
            arrays[name] = coded
        originals[column] = sides[0]
    return arrays, originals


def as_given(values: Any) -> Any:
    """A list or tuple mixing strings with other values as an object array: numpy would turn it into strings,
    making ``1`` and ``"1"`` one identity."""
    if not isinstance(values, (list, tuple)):
        return values
    kinds = {isinstance(v, str) for v in values}
    if len(kinds) < 2:
        return values
    out = np.empty(len(values), dtype=object)
    for row, value in enumerate(values):  # one by one: a tuple is one identity, not a row of values
        out[row] = value
    return out


def with_identities(result: Result, originals: dict[str, Any]) -> Result:
    """The per-query ``label``/``cam`` columns in the user's own values (strings stay strings) where Arrow holds
    them as one type; else the codes stay and run.json's ``identity_codes`` maps each code to its value."""
    per_query = result.per_query
    rows = per_query.column("query").to_numpy()
    for column, values in originals.items():
        if column not in per_query.column_names:
            continue
        shown = values[rows].tolist()
        try:
            kept = pa.array([None if _missing(v) else v for v in shown])
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):  # mixed kinds: no one column type
            codes = per_query.column(column).to_pylist()
            result.run.setdefault("identity_codes", {})[column] = {str(c): repr(v) for c, v in zip(codes, shown)}
            continue
        per_query = per_query.set_column(per_query.column_names.index(column), column, kept)
    result.per_query = per_query
    return result


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and value != value)


#: judged documents missing from the corpus rank below every corpus document: their extra coordinate gives them
#: the dot score -NEVER_RANKED_SCORE * (a bound of every real |score|) with each query, below -1 for cosine
NEVER_RANKED_SCORE = 3.0


@dataclass
class JudgedById:
    """How ``judged_by_id`` changed the call (the options the engine gets) and how to undo it in the result."""

    similarity: Similarity | None
    depth: int | None
    given_similarity: str | None
    given_depth: int | None
    absent_score: float | None
    notes: list[str]
    #: run.json's "judged_by_id": the judged queries and documents the ids did not name
    record: dict[str, Any] | None = None

    def restored(self, result: Result) -> Result:
        """The run record in the caller's options; a never-ranked document's stand-in score is no score."""
        options = result.run.get("options", {})
        if self.absent_score is not None:
            options["similarity"] = self.given_similarity or "cosine"
            if self.given_depth is None:
                options.pop("depth", None)
            else:
                options["depth"] = self.given_depth
            pq = result.per_query
            if "relevant_score" in pq.column_names:  # only never-ranked documents relevant: no relevant score
                column = pq.column("relevant_score")
                keep = pc.fill_null(pc.greater(column, -self.absent_score / 2), False)
                pq = pq.set_column(pq.column_names.index("relevant_score"), "relevant_score",
                                   pc.if_else(keep, column, pa.scalar(None, column.type)))
                result.per_query = pq
        result.run["warnings"] = [*result.run.get("warnings", []), *self.notes]
        if self.record is not None:
            result.run["judged_by_id"] = self.record
        return result


def judged_by_id(arrays: dict[str, Any], query_ids: Any, gallery_ids: Any, qrels: Any, similarity: Similarity | None,
                 depth: int | None) -> tuple[dict[str, Any], JudgedById]:
    """``arrays`` with ``qrels=`` matched to the rows by ``query_ids``/``gallery_ids`` (BEIR's layout) as the
    qrels arrays, and the ids as the keys.

    Rules (pytrec_eval's reading of a run that lacks judged documents): a judged query not in ``query_ids``
    is left out, with a warning; a judged document not in ``gallery_ids`` can never be retrieved but is still
    judged: a relevant one counts in R (recall's denominator, nDCG's ideal), a 0 among bpref's judged
    non-relevant. It is held as an extra gallery row that ranks below every corpus document for every query
    (an extra coordinate: 0 on the corpus, -c on the queries, 1 on the stand-ins, scores compared on the
    rows as normalised, so every corpus score stays the canonical one) with the ranking cut after the corpus
    (``depth``), so it has no rank.
    """
    from evalcore.io import trec_tables

    for name, value in (("query_ids", query_ids), ("gallery_ids", gallery_ids)):
        if value is None:
            raise input_error(name, "qrels match rows by id: give query_ids and gallery_ids with qrels")
        keys = "query_keys" if name == "query_ids" else "gallery_keys"
        if keys in arrays:
            raise input_error(keys, f"give {keys} or {name}, not both ({name} are the keys)")
    if qrels is None:
        raise OptionError("qrels", "query_ids and gallery_ids name the rows of the judgements: give qrels")
    qids = trec_tables.id_strings(query_ids, "query_ids")
    gids = trec_tables.id_strings(gallery_ids, "gallery_ids")
    rows = {"query_ids": _rows(arrays, "query", 0), "gallery_ids": _rows(arrays, "gallery", 1)}
    for name, ids in (("query_ids", qids), ("gallery_ids", gids)):
        side = "query" if name == "query_ids" else "gallery"
        if rows[name] is not None and rows[name] != len(ids):
            raise input_error(name, f"{len(ids)} ids, but {side} has {rows[name]} rows")
    pairs = trec_tables.judged_pairs(qrels, qids, gids)
    arrays = {**arrays, "query_keys": qids.to_numpy(zero_copy_only=False),
              "gallery_keys": gids.to_numpy(zero_copy_only=False),
              "qrels/query": pairs.query, "qrels/item": pairs.item, "qrels/rel": pairs.rel}
    notes = []
    if pairs.absent_queries:
        notes.append(f"qrels: {len(pairs.absent_queries)} judged queries are not among query_ids (first "
                     f"{pairs.absent_queries[0]!r}): their judgements are left out")
    record = {"queries_not_in_query_ids": len(pairs.absent_queries),
              "documents_not_in_gallery_ids": len(pairs.absent_docs),
              "stand_in_gallery_rows": 0}  # n_gallery counts them: the corpus is n_gallery less these
    by_id = JudgedById(similarity, depth, similarity, depth, None, notes, record)
    if not pairs.absent_docs:
        return arrays, by_id
    arrays, score = never_ranked_rows(arrays, len(pairs.absent_docs), similarity or "cosine")
    if score is None:
        return arrays, by_id
    arrays["gallery_keys"] = np.concatenate([arrays["gallery_keys"], np.array(pairs.absent_docs, dtype=object)])
    notes.append(f"qrels: {len(pairs.absent_docs)} judged documents are not among gallery_ids (first "
                 f"{pairs.absent_docs[0]!r}): never retrieved, still judged (a relevant one counts in R, "
                 "as pytrec_eval counts judged documents a run lacks)")
    cut = len(gids) if depth is None else min(int(depth), len(gids)) if _integer(depth) else depth
    record["stand_in_gallery_rows"] = len(pairs.absent_docs)
    return arrays, JudgedById("dot", cut, similarity, depth, score, notes, record)


def _integer(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _rows(arrays: dict[str, Any], side: str, axis: int) -> int | None:
    """The number of query (axis 0) or gallery (axis 1) rows the embeddings or the given scores hold."""
    if side in arrays:
        return int(np.shape(arrays[side])[0])
    for name in ("scores", DISTANCES):
        if name in arrays:
            return int(ds.matrix_like(arrays[name])[0].shape[axis])
    return None


def never_ranked_rows(arrays: dict[str, Any], count: int, similarity: str) -> tuple[dict[str, Any], float | None]:
    """``arrays`` with ``count`` gallery rows that rank below every corpus row for every query, and their
    score. Rows as the canonical score reads them (cosine: normalised as ``normalize_rows``; dot: float32 as
    given), one coordinate more: 0 on the corpus, 1 on the new rows, -c on the queries, c > every
    ||q|| ||g||: a corpus pair's exact dot product is unchanged, a new row's is -c, below all. The score
    is None, and ``arrays`` unchanged, when a row is malformed: the dataset's checks name it."""
    from evalcore.core.scan.embeddings import normalize_rows, row_norms

    if "query" not in arrays or "gallery" not in arrays:
        raise OptionError("qrels", "judged documents missing from gallery_ids need the query and gallery "
                         "embeddings (given scores have no row for them)")
    if similarity not in ("cosine", "dot"):
        raise OptionError("similarity", f"{similarity!r} with judged documents missing from gallery_ids: "
                         "cosine or dot")
    dims = int(np.shape(arrays["gallery"])[-1]) if np.ndim(arrays["gallery"]) == 2 else 0
    needed = count * (dims + 1) * 4  # bounded before any copy: qrels may name any number of documents
    if needed > total_memory() * IN_PROCESS_SHARE:
        raise OptionError("qrels", f"{count} judged documents are not among gallery_ids; their rows would take "
                         f"{needed / 2 ** 30:.1f} GiB, more than {IN_PROCESS_SHARE:.0%} of this machine's memory "
                         "(check that gallery_ids name the corpus rows)")
    sides = {}
    for name in ("query", "gallery"):
        value = np.asarray(arrays[name])
        if value.ndim != 2 or value.dtype.kind not in "fiu":
            return arrays, None  # the dataset's checks name the problem
        norms = row_norms(value.astype(np.float32, copy=False))
        bad = np.flatnonzero(~np.isfinite(norms))
        if bad.size:  # named here: the judgements of the stand-in rows would otherwise be the first problem
            raise input_error(name, f"row {int(bad[0])} contains NaN or Inf", rows=[int(bad[0])])
        zero = np.flatnonzero(norms == 0) if similarity == "cosine" else np.empty(0, np.int64)
        if zero.size:
            raise input_error(name, f"row {int(zero[0])} is an all-zero vector (cosine similarity is undefined "
                             "for it; use similarity dot or fix the row)", rows=[int(zero[0])])
        sides[name] = (normalize_rows(value, similarity), norms)
    bound = 1.0 if similarity == "cosine" else float(sides["query"][1].max(initial=0) *
                                                      sides["gallery"][1].max(initial=0))
    score = float(np.float32(NEVER_RANKED_SCORE * max(bound, 1.0)))
    if not np.isfinite(score):
        raise OptionError("query", "the embeddings' norms are too large for judged documents missing from "
                         "gallery_ids to rank after the corpus (float32 overflows)")
    (q, _), (g, _) = sides["query"], sides["gallery"]
    extended_q = np.concatenate([q, np.full((q.shape[0], 1), -score, np.float32)], axis=1)
    extended_g = np.zeros((g.shape[0] + count, g.shape[1] + 1), np.float32)
    extended_g[:g.shape[0], :-1] = g
    extended_g[g.shape[0]:, -1] = 1.0
    arrays = {**arrays, "query": extended_q, "gallery": extended_g}
    if "gallery_junk" in arrays:
        arrays["gallery_junk"] = np.concatenate([np.asarray(arrays["gallery_junk"], bool), np.zeros(count, bool)])
    return arrays, score


def _evaluate(what: Data, how: How, where: Where) -> Result:
    """One evaluation from its three parts: the data, the evaluation options, the execution."""
    started = time.perf_counter()
    if what.arrays and what.source is not None:
        raise OptionError("source", f"give a dataset or arrays ({', '.join(what.arrays)}), not both")
    if what.source is None and not what.arrays:
        raise OptionError("source", "give a dataset path, a zarr.Group, or the query and gallery arrays")
    group = in_memory_dataset(what.arrays) if what.arrays else ds.open_dataset(what.source, what.storage_options)
    attributes = ds.dataset_attributes(group)
    if ds.has(group, ds.SCORES):
        if how.similarity is not None:
            raise OptionError("--similarity", "does not apply to given scores (" + mention(ds.SCORES)
                              + "), compared as given")
        if not ds.higher_is_better(group) and (how.sweep or how.target_fpir is not None):
            raise OptionError("--sweep" if how.sweep else "--target-fpir", "the open-set sweep needs scores, where "
                              "higher is better; these are distances (higher_is_better false): negate them and give them as "
                             "scores")
    elif how.similarity == "euclidean" and (kind := kinds.kind_of(group)) is not None and not kind.features:
        raise OptionError("--similarity", "euclidean needs " + mention("query/emb") + " and "
                          + mention("gallery/emb") + " to measure distances; this dataset gives rankings ("
                          + mention(kind.name) + "), ranked as given")
    options = engine.Options(
        protocol=chosen_protocol(group, how.protocol),  # given, the attribute's, the arrays' choice, else class
        similarity=how.similarity or attributes.get("similarity") or "cosine",
        **{name: engine_value(name, getattr(how, name)) for name in ENGINE_OPTIONS}).checked()
    if options.similarity == "euclidean" and not ds.has(group, ds.SCORES):
        for flag, value in (("--threshold", how.threshold is not None), ("--sweep", how.sweep),
                            ("--target-fpir", how.target_fpir is not None)):
            if value:
                raise OptionError(flag, "accepts rank 1 when its score is >= T; " + mention("--similarity")
                                  + " euclidean reports squared distances (lower is better): use "
                                  + mention("--similarity") + " cosine or dot")
    if options.ties == "average" and (how.sweep or how.target_fpir is not None):
        raise OptionError("--sweep" if how.sweep else "--target-fpir", "the open-set sweep is not defined under "
                          + mention("--ties") + " average: it needs the one item at rank 1, and a tie there has "
                          "none (use " + mention("--ties") + " pessimistic or optimistic)")
    if how.target_fpir is not None and not 0 <= how.target_fpir <= 1:
        raise OptionError("--target-fpir", f"{how.target_fpir} must lie in [0, 1]")
    if where.workers is not None and where.client is not None:
        raise OptionError("--workers", "give workers or client, not both")
    if where.workers is not None and (int(where.workers) != where.workers or where.workers < 1):
        raise OptionError("--workers", f"{where.workers} must be a positive integer")
    stall_timeout = check_stall_timeout(where.stall_timeout)
    unused = unused_arrays(group, options.protocol)
    if unused and what.arrays:  # given to this call and then ignored: the caller meant another protocol
        raise InputError(protocols.unused_message(unused, options.protocol))
    target = group if what.arrays or isinstance(what.source, zarr.Group) else what.source
    with execution(group, where.client, where.workers, where.memory_limit) as (run_client, threads, recorded):
        result = engine.evaluate(target, options, client=run_client, threads=threads,
                                 storage_options=dict(what.storage_options) if what.storage_options else None,
                                 chunk_rows=where.chunk_rows, gallery_shards=where.gallery_shards,
                                 on_chunk=where.on_chunk,
                                 stall_timeout=stall_timeout, on_progress=where.on_progress)
    run = dict(result.info)
    # options recorded only when given (metrics=, rerank, --ci ...) are left out otherwise, as the declarations say
    run["options"] = declarations.recorded_options(run["options"])
    if options.ci is not None:
        method = options.interval_method()
        run["intervals"] = {"method": "percentile bootstrap of the mean over the counted queries (per query/group "
                                      "row, resampled within the row)", "level": method.level,
                            "resamples": method.resamples, "seed": method.seed}
    run["execution"] = recorded
    if unused:  # a dataset's arrays for another protocol: kept for other runs, named so none is ignored unseen
        run["warnings"] = [*run.get("warnings", []), str(protocols.unused_message(unused, options.protocol))]
    if what.arrays:
        run["dataset"] = "<arrays in memory: " + ", ".join(what.arrays) + ">"
    swept = None
    if how.sweep or how.target_fpir is not None:
        swept, result.summary = sweep_tables(result, how.target_fpir)
    run["timings"] = {**run.get("timings", {}), "wall_s": time.perf_counter() - started}
    shown = {c.name for c in options.columns()}  # first_rank only served the CMC and the sweep if not asked for
    per_query = result.per_query.drop_columns([c.name for c in options.columns(first_rank=True) if c.name not in shown])
    values = {f.name: getattr(result, f.name) for f in fields(result)}
    return Result(**{**values, "per_query": per_query, "run": run, "sweep": swept if how.sweep else None})


def neighbors(source: Source = None, *, query: ArrayLike = None, gallery: ArrayLike = None, k: int = 10, similarity: str | None = None,
              storage_options: Mapping[str, Any] | None = None, threads: int | None = None) -> pa.Table:
    """Each query's ``k`` nearest gallery items, exactly, on canonical scores (ties: the lower index first).

    ``source``: a dataset path or URL or an open ``zarr.Group``, or None with
    ``query`` and ``gallery`` arrays. Returns a table with one row per
    (query, rank): ``query``, ``rank`` (1 .. k), ``item`` (gallery index),
    ``key`` (the item's key) and ``score`` (its canonical score, float32;
    under ``similarity="euclidean"`` its squared distance, ascending):
    exact ground truth to measure an approximate search against. Raises
    ``InputError`` naming the parameter.
    """
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    from evalcore.engine import rerank as rerank_phase
    from evalcore.engine.tasks import keys_of
    from evalcore.types import SIMILARITIES

    given = {name: value for name, value in (("query", query), ("gallery", gallery)) if value is not None}
    with parameter_names(bool(given), False):
        if given and source is not None:
            raise OptionError("source", f"give a dataset or arrays ({', '.join(given)}), not both")
        group = in_memory_dataset(given) if given else ds.open_dataset(source, storage_options)
        similarity = similarity or ds.dataset_attributes(group).get("similarity") or "cosine"
        if similarity not in SIMILARITIES:
            raise OptionError("--similarity", f"{similarity!r} is not cosine, dot or euclidean")
        workers = threads or max(1, min(os.cpu_count() or 1, 8))
        with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
            found = rerank_phase.gallery_neighbors(group, k, similarity=similarity, map_fn=pool.map)
    n, kk = found.ids.shape
    items = found.ids.reshape(-1)
    return pa.table({"query": pa.array(np.repeat(np.arange(n, dtype=np.int64), kk)),
                     "rank": pa.array(np.tile(np.arange(1, kk + 1, dtype=np.int32), n)),
                     "item": pa.array(items),
                     "key": pa.array(keys_of(group, "gallery", items), pa.string()),
                     "score": pa.array(found.scores.reshape(-1))})


#: the engine's options (``Options``' fields) that ``How`` gives as they are or through ``PYTHON_VALUES``;
#: protocol and similarity aside (None: the dataset's)
ENGINE_OPTIONS = tuple(f.name for f in fields(engine.Options) if f.name not in ("protocol", "similarity"))


def engine_value(name: str, value: Any) -> Any:
    """The engine's value of the option ``name`` from ``evaluate``'s argument: ``PYTHON_VALUES``' conversion
    where one is declared (a list of cut-offs as a tuple, metric names checked, ``rerank=True`` as its
    parameters), else as given (``Options.checked`` checks it against its declaration)."""
    convert = PYTHON_VALUES.get(name)
    return value if convert is None else convert(value)


def rerank_parameters(rerank: Rerank) -> tuple[Any, ...] | None:
    """``rerank=`` as the engine's (k1, k2, lambda): None or False for none, True for the defaults 20, 6, 0.3."""
    if rerank is None or rerank is False:
        return None
    if rerank is True:
        return (20, 6, 0.3)
    if isinstance(rerank, str):
        return engine_options.parse_rerank(rerank)
    return tuple(rerank)


def expansion_parameters(option: str, value: Expansion) -> tuple[Any, ...] | None:
    """``query_expansion=`` / ``database_augmentation=`` as (K, alpha): None for none, a "K,ALPHA" string, or
    a pair (checked by the engine's options)."""
    if value is None:
        return None
    if isinstance(value, str):
        return engine_options.parse_expansion(option, value)
    try:
        return tuple(value)
    except TypeError:
        raise input_error(option, f"{value!r} is not a pair K, ALPHA") from None


#: how ``evaluate``'s value of an option becomes the engine's, where it is not taken as given
PYTHON_VALUES: Mapping[str, Callable[[Any], Any]] = {
    "ks": tuple,
    "judged_only": bool,
    "metrics": lambda names: None if names is None else registry.select(names),
    "rerank": rerank_parameters,
    "query_expansion": lambda value: expansion_parameters("--query-expansion", value),
    "database_augmentation": lambda value: expansion_parameters("--database-augmentation", value),
}


def sweep_tables(result: Any, target_fpir: float | None) -> tuple[pa.Table, pa.Table]:
    pq = result.per_query
    kind = kinds.get(result.info["ranked_by"])
    if kind.backend is None and pq.num_rows and pq.column("top1_score").null_count == pq.num_rows:
        raise OptionError("--sweep", f"needs scores ({', '.join(kind.optional)}) for the precomputed lists")
    return openset.sweep_tables(pq, result.summary, target_fpir)


def in_memory_dataset(arrays: Mapping[str, Any]) -> zarr.Group:
    """The arrays as a dataset group in memory (no disk), one Zarr chunk per side's rows (given scores in
    chunks of whole query tiles, copied a chunk at a time)."""
    given = [name for name in ("scores", DISTANCES) if name in arrays]
    if len(given) > 1:
        raise OptionError("distances", "give scores or distances, not both")
    if given and ("query" in arrays or "gallery" in arrays):
        raise input_error(given[0], f"give {given[0]} or the query and gallery embeddings, not both")
    if given:
        return _scores_dataset(given[0], arrays)
    for name in ("query", "gallery"):
        if name not in arrays:
            raise input_error(name, "missing (give both query and gallery embeddings, or scores)")
    data = {}
    for name, value in arrays.items():
        value = np.asarray(value)  # dask arrays compute, CPU torch tensors convert
        if name in ("query", "gallery"):
            if value.ndim != 2:
                raise input_error(name, f"must be 2-D (rows, dims), got shape {value.shape}")
            if value.dtype.kind not in "fiu":
                raise input_error(name, f"dtype {value.dtype} is not numeric")
            if value.dtype not in (np.float16, np.float32):
                value = value.astype(np.float32)
        elif value.ndim != 1:
            raise input_error(name, f"must be 1-D, got shape {value.shape}")
        data[ARRAY_PARAMETERS.get(name, name)] = value  # qrels/* come by their array names (judged_by_id)
    dims = {data[n].shape[1] for n in ("query/emb", "gallery/emb")}
    if len(dims) > 1:
        raise OptionError("gallery", f"{data['gallery/emb'].shape[1]} dims, query has {data['query/emb'].shape[1]}")
    for name, array in data.items():
        side = name.split("/")[0]
        if side == "qrels":  # judgements, not rows of a side: the protocol checks them
            continue
        n = data[f"{side}/emb"].shape[0]
        if array.shape[0] != n:
            raise input_error(name, f"{array.shape[0]} rows, but " + mention(f"{side}/emb") + f" has {n}")
    rows = max(1, data["query/emb"].shape[0], data["gallery/emb"].shape[0])
    return ds.write_dataset(zarr.storage.MemoryStore(), data, chunk_rows=rows)


def _scores_dataset(name: str, arrays: Mapping[str, Any]) -> zarr.Group:
    """The in-memory dataset of a given score (or distance) matrix and the 1-D arrays beside it."""
    matrix, dtype = ds.matrix_like(arrays[name])
    if len(matrix.shape) != 2:
        raise input_error(name, f"must be 2-D (queries, gallery items), got shape {tuple(matrix.shape)}")
    if dtype.name not in ds.SCORE_DTYPES:
        raise input_error(name, f"dtype {dtype} is not float16, float32 or float64")
    sizes = {"query": int(matrix.shape[0]), "gallery": int(matrix.shape[1])}
    data: dict[str, Any] = {ds.SCORES: matrix}
    for parameter, value in arrays.items():
        if parameter == name:
            continue
        value = np.asarray(value)
        array = ARRAY_PARAMETERS.get(parameter, parameter)  # qrels/* come by their array names (judged_by_id)
        if value.ndim != 1:
            raise input_error(array, f"must be 1-D, got shape {value.shape}")
        side = array.split("/")[0]
        if side != "qrels" and value.shape[0] != sizes[side]:
            what = "rows" if side == "query" else "columns"
            raise input_error(array, f"{value.shape[0]} rows, but " + mention(ds.SCORES) + f" has {sizes[side]} {what}")
        data[array] = value
    rows = max(1, *sizes.values())
    return ds.write_dataset(zarr.storage.MemoryStore(), data, chunk_rows=rows,
                            array_attrs={ds.SCORES: {"higher_is_better": name != DISTANCES}})


@contextlib.contextmanager
def execution(group: zarr.Group, client: Any, workers: int | None,
              memory_limit: Any) -> Iterator[tuple[Any, int, str]]:
    """(client or None, threads, description): where the work runs, chosen by size unless told."""
    if client is not None:
        yield client, 1, "dask client"
        return
    if workers is None:
        threads = choose_threads(group)
        if threads:
            yield None, threads, f"in process, {threads} thread(s)"
            return
    from evalcore.engine.cluster import dask_client  # deferred: in-process runs never import distributed

    with dask_client(None, workers, memory_limit) as local:
        yield local, 1, f"local cluster, {len(local.scheduler_info()['workers'])} worker process(es)"


def choose_threads(group: zarr.Group) -> int:
    """Threads for an in-process run, or 0 when the normalised gallery is too large for one process."""
    cores = max(1, min(os.cpu_count() or 1, 8))
    kind = kinds.kind_of(group)
    if kind is None or not kind.features:
        return cores
    rows, dims = ds.array(group, kind.arrays[1]).shape
    return cores if rows * dims * 4 <= total_memory() * IN_PROCESS_SHARE else 0


def total_memory() -> int:
    return int(psutil.virtual_memory().total)


#: a declared option's flag -> its Python parameter, where the two are not the same word (``--storage-option``
#: is ``storage_options``); any other flag is its words joined by underscores (``--max-rank``: ``max_rank``)
FLAG_PARAMETERS = {d.flag: d.name for d in declarations.DECLARATIONS if d.flag and d.flag[2:].replace("-", "_") != d.name}


def parameter_of_flag(flag: str) -> str:
    """A flag's Python parameter (``--max-rank`` -> ``max_rank``, ``--storage-option`` -> ``storage_options``)."""
    return FLAG_PARAMETERS.get(flag, flag[2:].replace("-", "_"))


#: set inside ``command_line_words()``: errors keep the command line's words
_CLI_WORDS: contextvars.ContextVar[bool] = contextvars.ContextVar("evalcore_cli_words", default=False)
#: set inside ``parameter_names()``: an API function (``evalcore.trec``) calls ``evaluate`` for its own ends, and
#: says what its user should know itself
_NESTED: contextvars.ContextVar[bool] = contextvars.ContextVar("evalcore_nested_call", default=False)

#: the engine words its warnings for the command line; a Python caller reads the parameter instead. Exact
#: phrases, not a pattern: a new flag in a warning fails test_python_warnings rather than being guessed at
#: a command the engine's words name -> the Python call that does the same
COMMAND_CALLS = {"evalcore metrics --ties average": 'evalcore.metric_names(ties="average")'}
PYTHON_WORDS = (("(--empty-queries zero)", '(empty_queries="zero")'),
                *COMMAND_CALLS.items(),
                ("--ties average", 'ties="average"'),
                ("pass --threshold to", "pass threshold= to"),
                ("--max-rank ", "max_rank="))


def python_words(warning: str) -> str:
    """A warning the engine made for the command line, in the Python parameters' words
    (``--empty-queries zero`` -> ``empty_queries="zero"``)."""
    for flag, parameter in PYTHON_WORDS:
        warning = warning.replace(flag, parameter)
    return warning


def issue_warnings(messages: Iterable[str], stacklevel: int = 2) -> None:
    """Each message through Python's ``warnings`` as an ``EvalcoreWarning``, pointing ``stacklevel`` frames
    above the caller (2: the line that called the API function that calls this)."""
    for message in messages:
        warnings.warn(message, EvalcoreWarning, stacklevel=stacklevel + 1)


@contextlib.contextmanager
def command_line_words() -> Iterator[None]:
    """Inside this block ``evaluate`` raises errors in the command line's words (``--max-rank``,
    ``query/label``): what ``evalcore evaluate`` and the jobs want to print."""
    token = _CLI_WORDS.set(True)
    try:
        yield
    finally:
        _CLI_WORDS.reset(token)


@contextlib.contextmanager
def parameter_names(from_arrays: bool, distances: bool = False) -> Iterator[None]:
    """Re-word InputErrors for Python callers: ``--max-rank`` -> ``max_rank``; with arrays given,
    ``gallery/label`` -> ``gallery_labels`` (``scores/value`` -> ``distances`` when distances were given)."""
    if _CLI_WORDS.get():
        yield
        return
    token = _NESTED.set(True)
    try:
        yield
    except InputError as exc:
        raise exc.reworded(python_names(from_arrays, distances)).with_traceback(None) from None
    finally:
        _NESTED.reset(token)


def python_names(from_arrays: bool, distances: bool = False) -> Callable[[str], str]:
    """The command line's word -> the Python API's, for an error's subject and each word it mentions, looked up
    whole: a flag is its parameter (``--max-rank`` -> ``max_rank``); with arrays given, an array is the keyword
    that gave it (``gallery/label`` -> ``gallery_labels``, ``scores/value`` -> ``distances`` when distances were
    given); the advice to run ``evalcore validate`` is Python's. Any other word is itself."""
    arrays = {array: (DISTANCES if distances and array == ds.SCORES else parameter)
              for parameter, array in ARRAY_PARAMETERS.items()} if from_arrays else {}
    advice = "" if from_arrays else "; evalcore.validate(source) lists them"
    words = {VALIDATE_ADVICE.word: advice, **COMMAND_CALLS, **arrays}

    def word(said: str) -> str:
        if said in words:
            return words[said]
        return parameter_of_flag(said) if is_flag(said) else said
    return word


def metric_names(ties: Ties = "pessimistic") -> list[registry.MetricInfo]:
    """Every registered metric, one a line when printed: the name ``metrics=`` takes, its per-query (and
    summary) column pattern, which direction is better, and its definition (``evalcore metrics``).
    ``ties="average"``: the metrics defined under ``ties="average"``, each with its definition there
    (``evalcore metrics --ties average``)."""
    return registry.describe(ties)


def validate(source: Source, protocol: str | None = None, *, similarity: str | None = None, judged_only: bool = False,
             storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """Every problem of a dataset for a protocol (an empty list when it is valid)."""
    group = ds.open_dataset(source, storage_options)
    attributes = ds.dataset_attributes(group)
    return validate_group(group, chosen_protocol(group, protocol),
                          similarity=similarity or attributes.get("similarity") or "cosine",
                          judged_only=judged_only).messages()


# --------------------------------------------------------------------------- compare

#: the CMC points compare.html draws bands at (log-spaced: the chart's k axis is logarithmic)
CMC_BAND_KS = (1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100)


def compare(*runs: Any, out: str | os.PathLike[str] | None = None, names: Sequence[str] | None = None,
            ci: float = 0.95, resamples: int = 10_000, permutations: int = 10_000,
            seed: int = 0, metrics: Sequence[str] | None = None, intersect: bool = False,
            latex: str | os.PathLike[str] | None = None, overwrite: bool = False,
            storage_options: Mapping[str, Any] | None = None) -> comparison.Comparison:
    """Compare runs on their paired known queries (README, Compare): every run after the first against
    the first (the baseline), every metric with a mean, every query/group row.

    ``runs``: report folders (paths or URLs) or ``Result`` objects; ``names``
    their names (default: the folder names, ``run1``, ``run2``, ... for Results).
    ``ci`` the interval's level, ``resamples`` bootstrap resamples,
    ``permutations`` sign flips (every flip up to 20 queries), ``seed``.
    ``metrics`` names to keep; ``intersect`` compares the common queries of
    runs whose query sets differ (else an InputError). ``out``: write the
    comparison folder (comparison.parquet, per_query_diff.parquet,
    compare.html, comparison.json, manifest.json), whole or not at all;
    ``latex``: write the LaTeX table to that file. Returns the ``Comparison``
    (``.table()`` is comparison.parquet, ``.per_query_diff``, ``.warnings``, each also issued as an
    ``evalcore.EvalcoreWarning``).
    """
    from evalcore.core import comparison, intervals
    from evalcore.render import compare as render_compare

    started = time.perf_counter()
    cli = _CLI_WORDS.get()
    method = intervals.Method(ci, resamples, permutations, seed).checked("--" if cli else "")
    if len(runs) < 2:
        raise OptionError("runs", "give at least two runs to compare (the first is the baseline)")
    labels = list(names) if names is not None else _run_names(runs)
    if len(labels) != len(runs):
        raise OptionError("names", f"{len(labels)} names for {len(runs)} runs")
    folders = {f"run {label}": r for label, r in zip(labels, runs) if not isinstance(r, EngineResult)}
    if out is not None:
        report.check_apart("--out" if cli else "out", out, folders)
        report.check_out(out, overwrite, storage_options)
    if latex is not None:  # not an input, not in the comparison folder: checked before any work
        report.check_file_target("--latex" if cli else "latex", latex,
                                 {**folders, **({} if out is None else {"comparison folder --out" if cli
                                                                        else "comparison folder out": out})})
    tables = [_run_table(label, r, storage_options) for label, r in zip(labels, runs)]
    max_rank = int(tables[0].options.get("max_rank") or 50)
    result = comparison.compare_runs(tables, method, metrics=metrics, intersect=intersect,
                                     cmc_ks=[k for k in CMC_BAND_KS if k <= max_rank] if out is not None else ())
    seconds = time.perf_counter() - started
    if out is not None:
        record = {"runs": [{"name": t.name, "source": str(r) if not isinstance(r, EngineResult) else "Result",
                            "options": dict(t.options)} for t, r in zip(tables, runs)],
                  "baseline": labels[0], **method.record(), "intersect": bool(intersect),
                  "metrics": list(dict.fromkeys(r.metric for r in result.rows)), "warnings": result.warnings,
                  "seconds": round(seconds, 3), "versions": report.versions()}
        html = render_compare.render_compare_html(result, record, result.cmc)
        report.write_report(out, {"comparison": result.table(), "per_query_diff": result.per_query_diff}, record,
                            extra={"compare.html": html}, overwrite=overwrite, storage_options=storage_options,
                            record="comparison.json")
    if latex is not None:  # after the folder: a failed write there leaves no table behind either
        atomic_write(latex, render_compare.format_latex(result).encode())
    if not cli:  # the command line prints them itself, once
        issue_warnings(result.warnings)
    return result


def _run_names(runs: Sequence[Any]) -> list[str]:
    out = []
    for i, r in enumerate(runs):
        if isinstance(r, EngineResult):
            out.append(f"run{i + 1}")
        else:
            out.append(str(r).rstrip("/").rsplit("/", 1)[-1] or str(r))
    if len(set(out)) != len(out):  # two folders of the same name: their whole paths
        out = [str(r) if not isinstance(r, EngineResult) else f"run{i + 1}" for i, r in enumerate(runs)]
    return out


def _run_table(name: str, run: Any, storage_options: Mapping[str, Any] | None) -> comparison.RunTable:
    from evalcore.core import comparison  # already loaded by compare, its one caller

    if isinstance(run, EngineResult):
        per_query, record = run.per_query, run.run
    else:
        tables = report.read_report(run, storage_options)
        if "per_query" not in tables:
            raise InputError(f"run {run}: has no per_query.parquet, so it is not an evaluation report")
        per_query, record = tables["per_query"], tables.get("run", {})
    options = record.get("options") or {}
    fingerprint = record.get("fingerprint")
    return comparison.RunTable(name, per_query, options if isinstance(options, dict) else {},
                               fingerprint if isinstance(fingerprint, str) else None)

