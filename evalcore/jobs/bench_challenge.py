"""``evalcore bench --shape challenge``: one submission scored by the scoring service against ``evalcore score``.

Both score the same submission of the same truth bundle (generated: every
query judged on ``JUDGED`` products, about 30% relevant, its vector near the
sum of its relevant products' vectors). Timed in alternated pairs
(``timing.alternate``):

- the service: one submission decided by the long-lived scorer process that
  ``evalcore score-service`` keeps (truth loaded, kernels warm), from the
  check to the ledger row and public leaderboard (``service.decide`` then
  ``service.record``), each time into a fresh ``--out``;
- ``evalcore score``: the whole command as a fresh process, start to exit.

Printed: the medians with min-max, the median paired ratio service / score,
and submissions per hour of each (3600 / the median seconds).
"""
from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

#: name: queries, gallery images, dims
SHAPES = {
    "challenge": (1000, 50_000, 128),
    "challenge-product": (10_000, 1_000_000, 128),
    # issue 24's big submission: a 4 GiB float32 gallery, scored from a temporary Zarr (service.SPILL_BYTES)
    "challenge-big": (10_000, 2_000_000, 512),
}
#: judged products per query
JUDGED = 50
#: rows per block when writing the generated gallery
WRITE_ROWS = 1 << 16


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows divided by their L2 norm, as float32."""
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def generate(folder: Path, n_query: int, n_gallery: int, dims: int, seed: int = 0) -> tuple[Path, Path]:
    """``truth.zarr`` and ``subs/team-a/run-1/{query,gallery}.npy`` in ``folder`` (reused when complete)."""
    from evalcore.io.dataset import write_dataset

    truth, sub = folder / "truth.zarr", folder / "subs" / "team-a" / "run-1"
    if (sub / "READY").exists() and (truth / "zarr.json").exists():
        return truth, sub
    rng = np.random.default_rng(seed)
    item = np.stack([rng.choice(n_gallery, JUDGED, replace=False) for _ in range(n_query)])
    rel = (rng.random(item.shape) < 0.3).astype(np.int8)
    rel[:, 0] = 1  # every query has a relevant product
    write_dataset(str(truth), {
        "query/key": np.array([f"q{i}" for i in range(n_query)], object),
        "gallery/key": np.array([f"img{i}" for i in range(n_gallery)], object),
        "qrels/query": np.repeat(np.arange(n_query), JUDGED), "qrels/item": item.ravel(), "qrels/rel": rel.ravel()},
        {"protocol": "qrels", "dims": dims})
    sub.mkdir(parents=True, exist_ok=True)
    # the gallery written a block at a time: the big shape's 4 GiB never sit in this process
    gallery = np.lib.format.open_memmap(sub / "gallery.npy", mode="w+", dtype=np.float32, shape=(n_gallery, dims))
    query = np.zeros((n_query, dims), np.float64)
    hit = rel.ravel() == 1
    owner, judged = np.repeat(np.arange(n_query), JUDGED)[hit], item.ravel()[hit]
    for start in range(0, n_gallery, WRITE_ROWS):
        block = unit_rows(rng.standard_normal((min(WRITE_ROWS, n_gallery - start), dims), dtype=np.float32))
        gallery[start:start + len(block)] = block
        inside = (judged >= start) & (judged < start + len(block))
        np.add.at(query, owner[inside], block[judged[inside] - start])
    gallery.flush()
    del gallery
    np.save(sub / "query.npy", unit_rows(query + rng.standard_normal((n_query, dims))))
    (sub / "READY").write_text("")
    return truth, sub


def run(args) -> int:
    """Generate the shape (or reuse it under ``--data-dir``), then time both ways and print the figures."""
    from evalcore.errors import OptionError
    from evalcore.jobs import service
    from evalcore.jobs.bench import DEFAULT_REPEAT, Peak, whole_process
    from evalcore.jobs.common import parse_number
    from evalcore.jobs.timing import alternate

    nq, ng, dims = SHAPES[args.shape]
    repeat = parse_number("--repeat", str(getattr(args, "repeat", None) or DEFAULT_REPEAT), int)
    if repeat < 1:
        raise OptionError("--repeat", f"{repeat} must be at least 1")
    workers = None if args.workers is None else parse_number("--workers", args.workers, int)
    if workers is not None and workers < 1:
        raise OptionError("--workers", f"{workers} must be at least 1")
    tmp = None if args.data_dir else tempfile.TemporaryDirectory(prefix="evalcore-bench-challenge-")
    folder = Path(args.data_dir or tmp.name) / f"bench-{args.shape}"  # type: ignore[union-attr]
    where = f"a local cluster of {workers} worker processes" if workers else "in process (threads)"
    print(f"shape {args.shape}: {nq:,} judged queries ({JUDGED} products each) x {ng:,} gallery x {dims} dims, "
          f"float32 .npy submission; scoring {where}", flush=True)
    started = time.perf_counter()
    truth, sub = generate(folder, nq, ng, dims)
    print(f"  data ready in {time.perf_counter() - started:.1f} s ({folder})", flush=True)
    outs = folder / "outs"
    shutil.rmtree(outs, ignore_errors=True)
    counter = itertools.count()
    cluster = ["--workers", str(workers)] if workers else []
    exe = shutil.which("evalcore") or os.path.join(os.path.dirname(sys.executable), "evalcore")
    config = service.ServiceConfig(sub.parent.parent, str(truth), outs / "service-0", workers=workers,
                                   timeout=3600.0)
    candidate = service.Candidate("team-a", "run-1", sub)
    scorer = service.Scorer(config)
    maps: dict[str, float | None] = {}

    def by_service() -> float:
        mine = replace(config, out=outs / f"service-{next(counter)}")
        t = time.perf_counter()
        e = service.decide(mine, scorer, candidate, [])
        service.record(mine, e)
        seconds = time.perf_counter() - t
        if e.status != "scored":
            raise RuntimeError(f"the service did not score the submission: {e.status} ({e.reason})")
        maps["service"] = e.map
        return seconds

    def by_command() -> float:
        out = outs / f"score-{next(counter)}"
        seconds = whole_process([exe, "score", str(sub), "--truth", str(truth), "--out", str(out / "r"),
                                 "--team", "team-a", "--quiet", *cluster])
        maps["score"] = json.loads((out / "r" / "result.json").read_text())["score"]
        return seconds

    try:
        t = time.perf_counter()
        scorer.start()
        t_start = time.perf_counter() - t
        t_first = by_service()  # the scorer's first submission: kernels compiled or loaded from the cache
        with Peak([scorer.process.pid]) as peak:
            paired = alternate(by_service, by_command, repeat)
    finally:
        scorer.stop()
        if tmp is not None:
            tmp.cleanup()
        else:
            shutil.rmtree(outs, ignore_errors=True)
    s, c = paired.first, paired.second
    diff = abs((maps["service"] or 0.0) - (maps["score"] or 0.0))
    print(f"  score-service: scorer start (truth loaded{', cluster started' if workers else ''}) {t_start:6.2f} s, "
          f"its first submission {t_first:6.2f} s; peak RSS of the scorer process {peak.peak / 2**20:,.0f} MiB"
          + (" (the submission scored from a temporary Zarr: over service.SPILL_BYTES)"
             if service.float32_bytes(service.LoadedTruth({}, nq, ng, dims, np.empty(0))) > service.SPILL_BYTES
             else ""), flush=True)
    print("  per submission, alternated pairs (median, min-max):", flush=True)
    print(f"    score-service (check, score, files, ledger)  {s.text()}   {3600 / s.median:8,.0f} submissions/hour",
          flush=True)
    print(f"    evalcore score (whole process)               {c.text()}   {3600 / c.median:8,.0f} submissions/hour",
          flush=True)
    print(f"    service / score = {paired.ratio_text()} (target <= 0.60)   mAP {maps['service']:.6f} "
          f"(|diff| {diff:.1e})", flush=True)
    return 0
