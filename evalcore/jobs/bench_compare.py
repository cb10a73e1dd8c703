"""``evalcore bench --compare``: ``evalcore compare`` on two large reports, beside scipy on the same columns.

Two report folders of ``--queries`` queries (default 100,000) are generated
from synthetic relevant ranks (the run is the baseline with every query's
rank gaps moved by -1, 0 or +1), with every metric column of the registry
computable from binary relevance ranks at ``--ks 1,5,10`` (24 columns). Then:

* ``evalcore compare A B --out DIR`` as a fresh process, ``--repeat`` times
  (imports, reading, bootstrap, sign flips, t-tests, Holm, the HTML, the
  writing): the median and the spread (min–max);
* scipy on the same paired differences: ``scipy.stats.bootstrap`` (percentile)
  and ``scipy.stats.permutation_test`` (paired, vectorized) for
  ``--scipy-columns`` columns at ``--scipy-resamples`` resamples, timed once,
  and scaled to every column at ``--resamples``/``--permutations``: scipy's
  cost grows in proportion to both (it resamples in batches of the same
  size), and timing it in full would take about an hour on two cores.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

from evalcore.core import registry
from evalcore.errors import input_error
from evalcore.io import report
from evalcore.jobs.common import parse_number

#: the metrics of the generated reports: every registered one computable from binary relevance ranks alone
#: (bpref also needs the judged non-relevant items), the cut-off ones at each of KS
METRICS = ("map", "map_trapz", "minp", "mrr", "rprec", "ndcg", "hit", "recall", "precision", "ndcg@1", "ndcg@5",
           "ndcg@10", "map_cut", "mrr@1", "mrr@5", "mrr@10")
KS = (1, 5, 10)


def synthetic_ranks(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, gaps, n_relevant): R = 1 + Poisson(2) relevant items per query, their ranks the running
    sums of geometric gaps (mean 8)."""
    n_relevant = 1 + rng.poisson(2.0, n)
    indptr = np.concatenate([[0], np.cumsum(n_relevant)])
    gaps = rng.geometric(1 / 8, int(indptr[-1]))
    return indptr, gaps, n_relevant


def ranks_of(indptr: np.ndarray, gaps: np.ndarray) -> np.ndarray:
    """Strictly increasing ranks per query: the running sum of its gaps (each >= 1)."""
    total = np.cumsum(gaps)
    start = np.repeat(np.concatenate([[0], total[indptr[1:-1] - 1]]), np.diff(indptr))
    return (total - start).astype(np.int64)


def per_query_table(indptr: np.ndarray, ranks: np.ndarray, n_relevant: np.ndarray) -> pa.Table:
    columns = registry.run_columns(METRICS, KS, None, first_rank=True)
    values = registry.compute(columns, indptr, ranks, n_relevant)
    n = len(n_relevant)
    out: dict[str, pa.Array] = {"query": pa.array(np.arange(n)), "key": pa.array([f"q{i}" for i in range(n)]),
                                "n_relevant": pa.array(n_relevant.astype(np.int64)),
                                "n_junk": pa.array(np.zeros(n, np.int64))}
    for c in columns:
        v = values[c.name]
        out[c.name] = pa.array(v, mask=c.metric.null(v))
    out["top1_key"] = pa.array([f"g{r}" for r in values["first_rank"]])
    return pa.table(out)


def write_reports(folder: str, n: int, seed: int = 0) -> tuple[str, str, int]:
    """The baseline and the run as report folders in ``folder``; returns their paths and the column count."""
    rng = np.random.default_rng(seed)
    indptr, gaps, n_relevant = synthetic_ranks(rng, n)
    moved = np.maximum(1, gaps + rng.integers(-1, 2, len(gaps)))
    paths = []
    for name, g in (("baseline", gaps), ("run", moved)):
        table = per_query_table(indptr, ranks_of(indptr, g), n_relevant)
        path = os.path.join(folder, name)
        run = {"options": {"protocol": "class", "ks": list(KS), "ties": "pessimistic", "max_rank": 10},
               "dataset": "synthetic ranks (evalcore bench --compare)"}
        report.write_report(path, {"per_query": table, "summary": pa.table({"group": ["all"]}),
                                   "cmc": pa.table({"group": pa.array([], pa.string())})}, run, overwrite=True)
        paths.append(path)
    columns = [c for c in registry.run_columns(METRICS, KS, None) if c.summary is not None]
    return paths[0], paths[1], len(columns)


def scipy_seconds(baseline: str, run: str, columns: int, resamples: int) -> float:
    """Seconds of scipy.stats.bootstrap + permutation_test on the first ``columns`` metric columns."""
    from scipy import stats

    a_table, b_table = report.read_report(baseline)["per_query"], report.read_report(run)["per_query"]
    names = [c.name for c in registry.run_columns(METRICS, KS, None) if c.summary is not None][:columns]
    started = time.perf_counter()
    for name in names:
        a = a_table.column(name).to_numpy(zero_copy_only=False).astype(float)
        b = b_table.column(name).to_numpy(zero_copy_only=False).astype(float)
        stats.bootstrap((b - a,), np.mean, n_resamples=resamples, method="percentile", random_state=0)
        stats.permutation_test((a, b), lambda x, y, axis=-1: np.mean(y - x, axis=axis), vectorized=True,
                               permutation_type="samples", n_resamples=resamples, random_state=0)
    return time.perf_counter() - started


def run(args) -> int:
    n = parse_number("--queries", args.queries or "100000", int)
    resamples = parse_number("--resamples", args.resamples or "10000", int)
    permutations = parse_number("--permutations", args.permutations or "10000", int)
    repeat = parse_number("--repeat", args.repeat or "5", int)
    scipy_columns = parse_number("--scipy-columns", args.scipy_columns or "1", int)
    scipy_resamples = parse_number("--scipy-resamples", args.scipy_resamples or "1000", int)
    for option, value in (("--queries", n), ("--resamples", resamples), ("--permutations", permutations),
                          ("--repeat", repeat), ("--scipy-columns", scipy_columns),
                          ("--scipy-resamples", scipy_resamples)):
        if value < 1:
            raise input_error(option, f"{value} must be at least 1")
    with tempfile.TemporaryDirectory(prefix="evalcore-bench-compare-") as folder:
        print(f"writing two reports of {n:,} queries ...", flush=True)
        baseline, other, columns = write_reports(folder, n)
        scipy_columns = min(scipy_columns, columns)
        command = [sys.executable, "-m", "evalcore.cli.main", "compare", baseline, other, "--out",
                   os.path.join(folder, "cmp"), "--overwrite", "--resamples", str(resamples),
                   "--permutations", str(permutations)]
        seconds = []
        for _ in range(repeat):
            started = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True)
            seconds.append(time.perf_counter() - started)
            if done.returncode != 0:
                raise RuntimeError(f"evalcore compare exited {done.returncode}: {done.stderr.strip()[-500:]}")
        ours = statistics.median(seconds)
        print(f"evalcore compare, {n:,} paired queries x {columns} metric columns, {resamples:,} resamples and "
              f"{permutations:,} sign flips, whole command: median {ours:.2f} s "
              f"(min {min(seconds):.2f}, max {max(seconds):.2f}; {repeat} runs)", flush=True)
        measured = scipy_seconds(baseline, other, scipy_columns, scipy_resamples)
        scale = (columns / scipy_columns) * (max(resamples, permutations) / scipy_resamples)
        estimate = measured * scale
        print(f"scipy.stats.bootstrap + permutation_test: {measured:.1f} s for {scipy_columns} column(s) at "
              f"{scipy_resamples:,} resamples; scaled to {columns} columns at {max(resamples, permutations):,}: "
              f"{estimate:.0f} s")
        print(f"evalcore compare is {estimate / ours:.0f}x faster than scipy on the same columns "
              "(our whole command against scipy's statistics alone)")
    return 0
