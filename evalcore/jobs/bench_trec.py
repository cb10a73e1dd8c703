"""``evalcore bench --shape trec``: ``evalcore trec``, and ``import trec-run`` + ``evaluate``, as whole processes
on a synthetic TREC run, beside pytrec_eval's whole process.

The run has ``queries`` queries x ``top`` (default 100; ``qid Q0 docno rank score tag``,
scores with 6 decimals, a few ties), the qrels 20 judgements a query (grades
0-3) over a 1,000,000-document corpus, so 100,000 queries is the issue's
10M-line run with 2M qrels lines. Each repeat times evalcore (import, then
evaluate), ``evalcore trec`` (trec_eval's command: read, evaluate, print) and,
when ``pytrec_eval`` is importable, pytrec_eval's whole process (its parse
functions, then its evaluator) on the same files, one after the other, so all
see the same load; the ratios are of each round's pair.
"""
from __future__ import annotations

import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from evalcore.errors import InputError, mention
from evalcore.jobs.bench import Peak
from evalcore.jobs.common import parse_number

#: results a query, judgements a query, documents in the corpus
TOP, JUDGED, CORPUS = 100, 20, 1_000_000
#: the measures both tools compute (evalcore --metrics; pytrec_eval's names)
METRICS, KS = "map,mrr,precision@10,recall@100", "10,100"
PYTREC_MEASURES = ("map", "recip_rank", "P_10", "recall_100")
#: the same measures as ``evalcore trec`` names them (its rules are trec_eval's, as pytrec_eval's are)
TREC_MEASURES = ("-m", "map", "-m", "recip_rank", "-m", "P.10", "-m", "recall.100")

PYTREC_SCRIPT = """
import sys, pytrec_eval
with open(sys.argv[1]) as f: run = pytrec_eval.parse_run(f)
with open(sys.argv[2]) as f: qrels = pytrec_eval.parse_qrel(f)
per_query = pytrec_eval.RelevanceEvaluator(qrels, {'map', 'recip_rank', 'P', 'recall'}).evaluate(run)
for m in ('map', 'recip_rank', 'P_10', 'recall_100'):
    print(m, sum(q[m] for q in per_query.values()) / len(per_query))
"""


def write_trec_files(folder: str, queries: int, seed: int = 1, top: int = TOP) -> tuple[str, str]:
    """The synthetic run (``top`` results a query) and qrels files, written a batch of queries at a time
    (Arrow's CSV writer, space-delimited), so a 100M-line run is never held whole."""
    corpus = pa.array([f"DOC{i:07d}" for i in range(CORPUS)])
    options = pa_csv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
    run_path, qrels_path = os.path.join(folder, "run.txt"), os.path.join(folder, "qrels.txt")
    with pa_csv.CSVWriter(run_path, RUN_SCHEMA, write_options=options) as run_out, \
            pa_csv.CSVWriter(qrels_path, QRELS_SCHEMA, write_options=options) as qrels_out:
        for batch, first in enumerate(range(0, queries, BATCH_QUERIES)):
            rng = np.random.default_rng([seed, batch])
            run, qrels = trec_batch(rng, corpus, first, min(queries, first + BATCH_QUERIES), top)
            run_out.write_table(run)
            qrels_out.write_table(qrels)
    return run_path, qrels_path


#: queries generated at a time
BATCH_QUERIES = 10_000
RUN_SCHEMA = pa.schema([("qid", pa.string()), ("q0", pa.string()), ("docno", pa.string()), ("rank", pa.int64()),
                        ("score", pa.float64()), ("tag", pa.string())])
QRELS_SCHEMA = pa.schema([("qid", pa.string()), ("iter", pa.int64()), ("docno", pa.string()), ("rel", pa.int64())])


def trec_batch(rng, corpus: pa.Array, q0: int, q1: int, top: int) -> tuple[pa.Table, pa.Table]:
    """Run and qrels rows of queries q0..q1: ``top`` distinct documents a query, scores descending with some
    equal, JUDGED judgements (grades 0-3) half from the run's top 40, half from anywhere."""
    n = q1 - q0
    qids = pa.array([f"{100000 + q}" for q in range(q0, q1)])
    docs = np.sort(rng.integers(0, CORPUS, size=(n, top)), axis=1)
    docs[:, 1:] += np.cumsum(docs[:, 1:] <= docs[:, :-1], axis=1)   # a repeat shifted to a fresh document
    docs %= CORPUS
    score = -np.sort(-np.round(rng.random((n, top)) * 20, 4), axis=1)
    run = pa.table({"qid": qids.take(pa.array(np.repeat(np.arange(n), top))),
                    "q0": pa.array(np.full(n * top, "Q0")),
                    "docno": corpus.take(pa.array(rng.permuted(docs, axis=1).ravel())),
                    "rank": pa.array(np.tile(np.arange(1, top + 1), n)),
                    "score": pa.array(score.ravel()),
                    "tag": pa.array(np.full(n * top, "bench"))}, schema=RUN_SCHEMA)
    near = docs[np.arange(n)[:, None], np.argsort(rng.random((n, min(40, top))), axis=1)[:, :JUDGED // 2]]
    far = rng.integers(0, CORPUS, size=(n, JUDGED - near.shape[1]))
    judged = np.concatenate([near, far], axis=1)
    judged_sorted = np.sort(judged, axis=1)              # a document judged twice for a query is judged once
    keep = np.ones(judged.shape, dtype=bool)
    keep[:, 1:] = judged_sorted[:, 1:] != judged_sorted[:, :-1]
    rows = np.repeat(np.arange(n), JUDGED).reshape(n, JUDGED)[keep]
    qrels = pa.table({"qid": qids.take(pa.array(rows)),
                      "iter": pa.array(np.zeros(rows.size, dtype=np.int64)),
                      "docno": corpus.take(pa.array(judged_sorted[keep])),
                      "rel": pa.array(rng.integers(0, 4, size=rows.size))}, schema=QRELS_SCHEMA)
    return run, qrels


def timed_process(command: list[str]) -> tuple[float, int, str]:
    """(wall seconds start to exit, peak resident bytes sampled every 50 ms, stdout) of a fresh process."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with Peak([proc.pid]) as peak:
        out, err = proc.communicate()
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:3])} exited {proc.returncode}: {err.strip()[-500:]}")
    return seconds, peak.peak, out


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):7.2f} s  (min-max {min(values):.2f}-{max(values):.2f})"


def trec_means(out: str) -> str:
    """``evalcore trec``'s ``all`` lines (``map  all  0.1234``) as ``map 0.1234 recip_rank ...``, its order."""
    fields = [line.split("\t") for line in out.splitlines()]
    return " ".join(f"{f[0].strip()} {f[2]}" for f in fields if len(f) == 3 and f[1] == "all")


def evalcore_command() -> list[str]:
    return [sys.executable, "-c", "import sys; from evalcore.cli.main import main; sys.exit(main())"]


def run(args) -> int:
    """``evalcore bench --shape trec [--queries N] [--top N] [--repeat N]``."""
    queries = parse_number("--queries", args.queries or "100000", int)
    top = parse_number("--top", getattr(args, "top", None) or str(TOP), int)
    repeat = parse_number("--repeat", args.repeat or "3", int)
    if queries < 1 or repeat < 1 or top < 1:
        raise InputError(mention("--queries") + "/" + mention("--top") + "/" + mention("--repeat")
                         + f": {queries}/{top}/{repeat} must be at least 1")
    return run_trec(queries, repeat, top=top)


#: pytrec_eval holds about 230 bytes a run line (2.3 GB at 10M lines): past top-100 it is not run
PYTREC_MAX_TOP = 100
#: past top-100 evalcore computes every measure (graded ones included) at cut-offs 10, 100 and 1,000
ALL_METRICS, ALL_KS = "map,mrr,rprec,ndcg,bpref,ndcg@k,precision@k,recall@k,map_cut@k,mrr@k", "10,100,1000"


def run_trec(queries: int, repeat: int, evalcore: list[str] | None = None, top: int = TOP) -> int:
    """Time ``repeat`` paired rounds of evalcore (import + evaluate) and pytrec_eval, and print medians."""
    evalcore = evalcore or evalcore_command()
    have_pytrec = importlib.util.find_spec("pytrec_eval") is not None and top <= PYTREC_MAX_TOP
    metrics, ks = (METRICS, KS) if top <= TOP else (ALL_METRICS, ALL_KS)
    with tempfile.TemporaryDirectory(prefix="evalcore-bench-trec-") as folder:
        t = time.perf_counter()
        run_path, qrels_path = write_trec_files(folder, queries, top=top)
        lines = sum(1 for _ in open(qrels_path))
        print(f"shape trec: {queries:,} queries x top-{top} ({queries * top:,} run lines, "
              f"{os.path.getsize(run_path) / 2**20:,.0f} MiB), {lines:,} qrels lines; generated in "
              f"{time.perf_counter() - t:.1f} s; {repeat} paired rounds", flush=True)
        data, report = os.path.join(folder, "run.zarr"), os.path.join(folder, "report")
        t_import, t_eval, t_trec, t_pytrec = [], [], [], []
        peak_ours, peak_trec, peak_pytrec, means, trec_out = 0, 0, 0, "", ""
        for _ in range(repeat):
            s, p, _ = timed_process([*evalcore, "import", "trec-run", run_path, "--qrels", qrels_path,
                                     "--out", data, "--overwrite"])
            t_import.append(s)
            peak_ours = max(peak_ours, p)
            s, p, out = timed_process([*evalcore, "evaluate", data, "--out", report, "--overwrite", "--quiet",
                                       "--ks", ks, "--metrics", metrics, "--empty-queries", "zero"])
            t_eval.append(s)
            peak_ours = max(peak_ours, p)
            s, p, trec_out = timed_process([*evalcore, "trec", qrels_path, run_path, *TREC_MEASURES])
            t_trec.append(s)
            peak_trec = max(peak_trec, p)
            if have_pytrec:
                s, p, means = timed_process([sys.executable, "-c", PYTREC_SCRIPT, run_path, qrels_path])
                t_pytrec.append(s)
                peak_pytrec = max(peak_pytrec, p)
            print(f"  round: import {t_import[-1]:.2f} s, evaluate {t_eval[-1]:.2f} s, trec {t_trec[-1]:.2f} s"
                  + (f", pytrec_eval {t_pytrec[-1]:.2f} s" if have_pytrec else ""), flush=True)
        total = [a + b for a, b in zip(t_import, t_eval)]
        summary = pq.read_table(os.path.join(report, "summary.parquet")).to_pylist()[0]
        print("  evalcore means: " + " ".join(f"{name} {summary[column]:.6f}" for name, column in
                                              zip(PYTREC_MEASURES, ("map", "mrr", "precision_at_10", "recall_at_100"))))
        print(f"  evalcore import trec-run     {spread(t_import)}")
        print(f"  evalcore evaluate            {spread(t_eval)}")
        print(f"  evalcore import + evaluate   {spread(total)}   largest process {peak_ours / 2**20:,.0f} MiB")
        print(f"  evalcore trec                {spread(t_trec)}   largest process {peak_trec / 2**20:,.0f} MiB")
        print("  evalcore trec means: " + trec_means(trec_out))
        if have_pytrec:
            ratios = [p / o for p, o in zip(t_pytrec, total)]
            print(f"  pytrec_eval whole process    {spread(t_pytrec)}   largest process "
                  f"{peak_pytrec / 2**20:,.0f} MiB   pytrec_eval / evalcore: median {statistics.median(ratios):.2f}")
            trec_ratios = [p / o for p, o in zip(t_pytrec, t_trec)]
            print(f"  pytrec_eval / evalcore trec  median {statistics.median(trec_ratios):.2f}  (min-max "
                  f"{min(trec_ratios):.2f}-{max(trec_ratios):.2f}; above 1: evalcore trec is faster)")
            print("  pytrec_eval means: " + " ".join(means.split()))
        elif top > PYTREC_MAX_TOP:
            print(f"  pytrec_eval whole process    not run past top-{PYTREC_MAX_TOP} (it would hold about "
                  f"{queries * top * 230 / 2**30:,.0f} GiB)")
        else:
            print("  pytrec_eval whole process    skipped (pytrec_eval is not importable here)")
    return 0
