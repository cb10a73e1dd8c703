"""Import retrieval results from other tools' file formats into the contract's Zarr layout.

One reader per format. Each reader only reads and validates: it returns
``(arrays, attrs)`` with arrays named as in the contract (``query/emb``,
``gallery/label``, ``qrels/rel``, ``ranking/item`` ...) and raises
:class:`~evalcore.errors.InputError` on the first problem, naming the file,
the record (0-based ``row`` / ``entry``, 1-based ``line``) and the field.
:func:`import_to` (``write.py``) runs a reader and only then calls
:func:`evalcore.io.dataset.write_dataset`, so nothing is written on bad input.

Formats (``FORMATS_HELP`` is the same text for the command line):

``mat``
    Person_reID_baseline_pytorch's ``pytorch_result.mat`` (``scipy.io.savemat``):
    keys ``query_f`` (Q,D), ``query_label`` (1,Q), ``query_cam`` (1,Q),
    ``gallery_f`` (G,D), ``gallery_label`` (1,G), ``gallery_cam`` (1,G).
    Gallery label -1 ("junk" in that project's evaluate script) becomes
    ``gallery/junk`` = True and stays negative; label 0 (Market-1501
    distractors) stays an ordinary non-matching item. Protocol ``reid``.

``npy``
    NumPy arrays as torchreid / fast-reid users save them, always loaded with
    ``allow_pickle=False``. Either one ``.npz`` with keys ``query_features``/``qf``,
    ``gallery_features``/``gf``, ``query_pids``/``q_pids``, ``gallery_pids``/``g_pids``
    and optionally ``query_camids``/``q_camids``, ``gallery_camids``/``g_camids``
    (and ``query_keys``/``gallery_keys``); or a folder holding ``<key>.npy`` files
    under those names; or explicit files ``--query-features --gallery-features
    --query-ids --gallery-ids [--query-cams --gallery-cams]`` (these override
    files found in a folder). With cameras the protocol is ``reid``, without it
    is ``class``. ``--junk-label N`` marks gallery items with label N as junk.

``parquet``
    One Parquet file with a side column (``--side-column``, default ``side``,
    values ``query``/``gallery``), or two files: query first, gallery second.
    Columns: ``--emb-column`` (default ``emb``; list<number>, every row the same
    length), and when present ``--label-column`` (``label``), ``--cam-column``
    (``cam``), ``--key-column`` (``key``), ``--group-column`` (``group``),
    ``--lat-column`` (``lat``), ``--lon-column`` (``lon``). A column named
    explicitly must exist; a default-named one is used when present. Row numbers
    in messages are 0-based rows of the file. Protocol: ``reid`` with labels and
    cameras, ``class`` with labels only, ``geo`` with coordinates only.

``faiss-json``
    FAISS search results for place recognition, in a folder::

        query_index.json      [{"id": "q1", "lat": 48.85, "lon": 2.35}, ...]
                              (or {"queries": [...]})
        reference_index.json  [{"id": "r1", "lat": ..., "lon": ...}, ...]
                              (or {"references": [...]})
        results/<query id>.json, one per query, best match first, either
            {"query": "q1", "results": [{"id": "r7", "score": 0.93}, ...]}
        or, as FAISS returns them (``index.search`` -> D, I):
            {"query": "q1", "neighbors": [7, 3, ...], "scores": [0.93, ...]}
            {"query": "q1", "neighbors": [7, 3, ...], "distances": [0.12, ...]}

    ``--query-index``, ``--reference-index`` and ``--results-dir`` override the
    three paths. Ids are strings (JSON integers are turned into strings) and
    must be unique; ``lat`` in [-90, 90] and ``lon`` in [-180, 180] degrees,
    finite. ``"query"`` is optional but, when given, must equal the file's id.
    In ``neighbors`` an integer is a 0-based position in reference_index.json
    (the FAISS id; -1 pads are dropped with their score), a string is a
    reference id. ``distances`` are stored negated in ``ranking/score`` so
    that higher is better everywhere. The order in the file is the ranking.
    A query without a results file is an error; an empty list is a query with
    no results; a results file for an unknown query is an error; a reference
    listed twice for one query is an error. ``ranking/item`` is (Q, K) with K
    the longest list, padded with -1 (score NaN). Protocol ``geo``.

``trec``
    A TREC qrels file, one judgement per line ``qid iter docid rel``
    (whitespace separated, ``iter`` ignored; blank lines and lines starting
    with ``#`` are skipped), plus the query and gallery ids: ``--queries
    FILE --gallery FILE`` (one id per line; the line order is the row order),
    or ``--dataset DATASET`` to take ``query/key``/``gallery/key`` from an
    existing dataset and write a copy of it with the qrels added (existing
    qrels are replaced). As in trec_eval: rel >= 1 -> that grade, relevant
    (at level 1); 0 -> 0 judged, not relevant; negative -> -2, in the pool,
    not judged (trec_eval's reading: ranked in place, never relevant, left
    out by bpref and by --judged-only; never junk). Judgements of queries not
    among the query ids are left out with a warning (trec_eval ignores
    queries without results). A repeated (qid, docid) with the same relevance
    is collapsed; with a different one it is an error. Protocol ``qrels``.

``trec-run``
    A TREC run file, one result per line ``qid Q0 docno rank score tag``
    (whitespace separated; ``Q0``, ``rank`` and ``tag`` are ignored, as
    trec_eval ignores them), with its qrels: ``--qrels FILE`` (read as for
    ``trec``). Writes ``ranking/item`` (best first, -1 pads), ``query/key``,
    ``gallery/key`` (every docno of the run and the qrels, sorted) and
    ``qrels/*``. Queries are those with both results and judgements, sorted
    by qid; the others are left out with a warning (trec_eval's default).
    ``--order score`` (default): results sorted by score, highest first, and
    ``ranking/score`` written as float64, each score as read (scores closer
    than float32 can tell apart stay distinct), so only equal scores are tie
    groups, which ``evaluate --ties`` orders (pessimistic by default).
    ``--order trec_eval``: trec_eval's own order (score descending, equal
    scores by docno descending) and no ``ranking/score``, so that order
    stands; with
    ``evaluate --empty-queries zero`` the numbers are trec_eval's (map,
    recip_rank = mrr, P_k = precision_at_k, recall_k, success_k = hit_at_k).
    Fields are split at ASCII whitespace and fields after the sixth are
    ignored, as trec_eval does. A line with fewer than 6 fields, a score
    that is not a plain decimal number read whole (``1_5``, ``0.5abc``;
    Python's float would read 15, trec_eval's atof 1 and 0.5) or is NaN or
    infinite, and a docno listed twice for one query are errors naming the
    file and line (duplicates in ``ranking/item`` are refused the same way
    at evaluation: a second listing would count as a second hit).
"""
from __future__ import annotations

from evalcore.io.importers.faiss_json import read_faiss_json
from evalcore.io.importers.formats import FORMATS, read_format
from evalcore.io.importers.mat import read_mat
from evalcore.io.importers.npy import read_npy
from evalcore.io.importers.parquet import read_parquet
from evalcore.io.importers.trec import read_trec, read_trec_run
from evalcore.io.importers.write import check_import_out, import_to

__all__ = [
    "FORMATS", "FORMATS_HELP", "check_import_out", "import_to", "read_faiss_json", "read_format", "read_mat",
    "read_npy", "read_parquet", "read_trec", "read_trec_run",
]

FORMATS_HELP = __doc__[__doc__.index("``mat``"):]
