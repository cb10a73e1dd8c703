"""``evalcore bench --shape beir``: evalcore's exact evaluation against BEIR's and MTEB's CPU pipeline.

Synthetic BEIR-like data (``--queries`` x ``--gallery`` x ``--dims`` float32
embeddings, string ids, graded qrels: 1 to 5 relevant documents a query,
grades 1-2, and as many judged non-relevant ones), written once to a temporary
folder. Each round times two whole processes on it, one after the other so
both see the same load:

- evalcore: ``evalcore.evaluate(query=, gallery=, query_ids=, gallery_ids=,
  qrels=, metrics=...)``, every query ranked against the whole corpus;
- the pipeline BEIR's ``EvaluateRetrieval`` and MTEB's retrieval tasks run on
  CPU: cosine scores a corpus chunk at a time (a matrix product), each query's
  top ``--top`` (default 1,000) kept with numpy's ``argpartition``, merged
  across chunks, then ``pytrec_eval`` on that run.

It prints both means, the ratio of the times, and how many relevant
documents the top-1,000 run misses (judged relevant, in the corpus, ranked
past its cut: the pipeline counts them as not retrieved; the exact
evaluation ranks them where they are).
"""
from __future__ import annotations

import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

from evalcore.errors import OptionError
from evalcore.jobs.bench_trec import spread, timed_process
from evalcore.jobs.common import parse_number

#: default shape: runs in a couple of minutes on 2 cores
QUERIES, GALLERY, DIMS, TOP = 2_000, 100_000, 384, 1_000
#: corpus rows scored at a time by the pipeline (BEIR's ``corpus_chunk_size`` default is 50,000)
CHUNK = 50_000
#: the measures both compute (evalcore's names; pytrec_eval's; the per-query column evalcore reports)
MEASURES = (("ndcg@10", "ndcg_cut_10", "ndcg_at_10"), ("recall@100", "recall_100", "recall_at_100"),
            ("map", "map", "map"))

EVALCORE_SCRIPT = """
import json, sys, numpy as np, evalcore
folder = sys.argv[1]
query, corpus = np.load(folder + "/query.npy"), np.load(folder + "/corpus.npy")
ids = json.load(open(folder + "/ids.json")); qrels = json.load(open(folder + "/qrels.json"))
metrics = sys.argv[2].split(",")
result = evalcore.evaluate(query=query, gallery=corpus, query_ids=ids["query"], gallery_ids=ids["corpus"],
                           qrels=qrels, metrics=metrics, ks=(10, 100))
print(json.dumps({c: result.metrics[c] for c in sys.argv[3].split(",")}))
"""

PIPELINE_SCRIPT = """
import json, sys, numpy as np, pytrec_eval
folder, top = sys.argv[1], int(sys.argv[2])
query, corpus = np.load(folder + "/query.npy"), np.load(folder + "/corpus.npy")
ids = json.load(open(folder + "/ids.json")); qrels = json.load(open(folder + "/qrels.json"))
q = query / np.linalg.norm(query, axis=1, keepdims=True)
best_s = np.full((q.shape[0], 0), -np.inf, dtype=np.float32); best_i = np.zeros((q.shape[0], 0), dtype=np.int64)
for start in range(0, corpus.shape[0], int(sys.argv[3])):
    c = corpus[start:start + int(sys.argv[3])]
    s = q @ (c / np.linalg.norm(c, axis=1, keepdims=True)).T
    k = min(top, s.shape[1])
    part = np.argpartition(-s, k - 1, axis=1)[:, :k]
    s = np.concatenate([best_s, np.take_along_axis(s, part, axis=1)], axis=1)
    i = np.concatenate([best_i, part + start], axis=1)
    keep = np.argpartition(-s, min(top, s.shape[1]) - 1, axis=1)[:, :min(top, s.shape[1])]
    best_s, best_i = np.take_along_axis(s, keep, axis=1), np.take_along_axis(i, keep, axis=1)
corpus_ids = ids["corpus"]
run = {qid: {corpus_ids[j]: float(v) for j, v in zip(best_i[row].tolist(), best_s[row].tolist())}
       for row, qid in enumerate(ids["query"])}
per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "map"}).evaluate(run)
in_corpus = set(corpus_ids)
missed = sum(1 for qid, judged in qrels.items() for d, g in judged.items()
             if g >= 1 and d in in_corpus and d not in run.get(qid, {}))
names = sys.argv[4].split(",")
print(json.dumps({**{m: sum(v[m] for v in per_query.values()) / len(per_query) for m in names},
                  "missed": missed, "relevant": sum(g >= 1 for j in qrels.values() for g in j.values())}))
"""


def write_beir_files(folder: str, queries: int, gallery: int, dims: int, seed: int = 0) -> None:
    """query.npy, corpus.npy (float32), ids.json ({"query": [...], "corpus": [...]}, shuffled string ids) and
    qrels.json ({qid: {docid: grade}}): every query has 1-5 relevant documents (grades 1-2) made near it
    (the query plus noise, so most rank high and a few do not) and as many judged non-relevant ones."""
    rng = np.random.default_rng(seed)
    query = rng.standard_normal((queries, dims), dtype=np.float32)
    corpus = rng.standard_normal((gallery, dims), dtype=np.float32)
    query_ids = [f"q{i}" for i in rng.permutation(queries)]
    corpus_ids = [f"doc-{i}" for i in rng.permutation(gallery)]
    qrels: dict[str, dict[str, int]] = {}
    for row, qid in enumerate(query_ids):
        n = int(rng.integers(1, 6))
        docs = rng.choice(gallery, size=2 * n, replace=False)
        noise = rng.uniform(0.5, 3.0, size=(n, 1)).astype(np.float32)   # far from the query: ranked lower
        corpus[docs[:n]] = query[row] + noise * rng.standard_normal((n, dims), dtype=np.float32)
        qrels[qid] = {corpus_ids[d]: int(g) for d, g in zip(docs, [*rng.integers(1, 3, size=n), *[0] * n])}
    np.save(os.path.join(folder, "query.npy"), query)
    np.save(os.path.join(folder, "corpus.npy"), corpus)
    with open(os.path.join(folder, "ids.json"), "w") as out:
        json.dump({"query": query_ids, "corpus": corpus_ids}, out)
    with open(os.path.join(folder, "qrels.json"), "w") as out:
        json.dump(qrels, out)


def run(args) -> int:
    """``evalcore bench --shape beir [--queries N] [--gallery N] [--dims N] [--top N] [--repeat N]``."""
    queries = parse_number("--queries", args.queries or str(QUERIES), int)
    gallery = parse_number("--gallery", getattr(args, "gallery", None) or str(GALLERY), int)
    dims = parse_number("--dims", args.dims or str(DIMS), int)
    top = parse_number("--top", getattr(args, "top", None) or str(TOP), int)
    repeat = parse_number("--repeat", args.repeat or "3", int)
    for flag, value, least in (("--queries", queries, 1), ("--gallery", gallery, 10), ("--dims", dims, 1),
                               ("--top", top, 1), ("--repeat", repeat, 1)):
        if value < least:
            raise OptionError(flag, f"{value} must be at least {least}")
    return run_beir(queries, gallery, dims, top, repeat)


def run_beir(queries: int, gallery: int, dims: int, top: int, repeat: int) -> int:
    """Time ``repeat`` paired rounds of evalcore's exact evaluation and the top-``top`` pipeline; print medians."""
    have_pytrec = importlib.util.find_spec("pytrec_eval") is not None
    ours_names = ",".join(m[0] for m in MEASURES)
    columns = ",".join(m[2] for m in MEASURES)
    theirs_names = ",".join(m[1] for m in MEASURES)
    with tempfile.TemporaryDirectory(prefix="evalcore-bench-beir-") as folder:
        t = time.perf_counter()
        write_beir_files(folder, queries, gallery, dims)
        print(f"shape beir: {queries:,} queries x {gallery:,} documents x {dims} dims float32, string ids, graded "
              f"qrels; pipeline: top-{top} per query, corpus chunks of {CHUNK:,}; generated in "
              f"{time.perf_counter() - t:.1f} s; {repeat} paired rounds", flush=True)
        t_ours, t_theirs, peak_ours, peak_theirs = [], [], 0, 0
        ours, theirs = "{}", "{}"
        for _ in range(repeat):
            s, p, ours = timed_process([sys.executable, "-c", EVALCORE_SCRIPT, folder, ours_names, columns])
            t_ours.append(s)
            peak_ours = max(peak_ours, p)
            if have_pytrec:
                s, p, theirs = timed_process([sys.executable, "-c", PIPELINE_SCRIPT, folder, str(top), str(CHUNK),
                                              theirs_names])
                t_theirs.append(s)
                peak_theirs = max(peak_theirs, p)
            print(f"  round: evalcore {t_ours[-1]:.2f} s" + (f", pipeline {t_theirs[-1]:.2f} s" if have_pytrec else ""),
                  flush=True)
        means = json.loads(ours)
        print("  evalcore means (exact, whole corpus): "
              + " ".join(f"{m[1]} {means[m[2]]:.6f}" for m in MEASURES))
        print(f"  evalcore exact evaluation    {spread(t_ours)}   largest process {peak_ours / 2**20:,.0f} MiB")
        if not have_pytrec:
            print("  pipeline                     skipped (pytrec_eval is not importable here)")
            return 0
        found = json.loads(theirs)
        print(f"  pipeline means (top-{top}): " + " ".join(f"{m[1]} {found[m[1]]:.6f}" for m in MEASURES))
        print(f"  pipeline (top-{top} + pytrec_eval) {spread(t_theirs)}   largest process "
              f"{peak_theirs / 2**20:,.0f} MiB")
        ratios = [b / a for a, b in zip(t_ours, t_theirs)]
        print(f"  pipeline / evalcore          median {statistics.median(ratios):.2f}  (min-max {min(ratios):.2f}-"
              f"{max(ratios):.2f}; above 1: evalcore is faster)")
        print(f"  relevant documents the top-{top} run misses: {found['missed']:,} of {found['relevant']:,}")
    return 0
