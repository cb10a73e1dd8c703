"""Planning a run: what the dataset is, how queries split into tasks, how the gallery splits into shards.

Pure functions of sizes (and one read of array shapes in ``describe``): the
task context they produce is all a worker needs besides the dataset itself.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import psutil

from evalcore.core.ranking import TILE_COLS, TILE_ROWS
from evalcore.engine.options import Options
from evalcore.errors import OptionError, input_error, mention
from evalcore.io import dataset as ds
from evalcore.io import kinds
from evalcore.io.kinds import InputKind

Span = tuple[int, int]

#: bytes of normalised float32 gallery rows read at a time (a whole number of score tiles)
BLOCK_BYTES = 64 << 20


@dataclass(frozen=True)
class DatasetShape:
    """Sizes and how queries are ranked: read once from the dataset, then trusted."""

    n_queries: int
    n_gallery: int
    #: the input kind's name (``io.kinds``): run.json's record of how the queries were ranked
    ranked_by: str
    #: ranked by embeddings
    dims: int | None = None
    query_dtype: str | None = None
    gallery_dtype: str | None = None
    #: ranked by precomputed lists
    list_length: int | None = None
    list_scores: bool | None = None
    #: ranked by a given score matrix (scores/value): its dtype, and false for distances
    score_dtype: str | None = None
    higher_is_better: bool | None = None

    @property
    def kind(self) -> InputKind:
        return kinds.get(self.ranked_by)

    def record(self) -> dict:
        """run.json's description of the dataset (the fields that apply)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class TaskContext:
    """What every task of a run is given besides the dataset and its query range."""

    shape: DatasetShape
    #: names the run, so a worker's cache never serves another run's blocks ("": keep nothing)
    run_id: str = ""
    #: bytes of normalised gallery a worker may keep between tasks (0: keep nothing)
    cache_bytes: int = 0


def describe(group, options: Options) -> DatasetShape:
    """Sizes and how queries are ranked; InputError when something needed is missing."""
    kind = kinds.kind_of(group)
    if kind is kinds.SCORES:
        return describe_scores(group, options)
    if kind is None:
        others = " or ".join(sorted(k for k in kinds.PRECEDENCE if k != kinds.EMBEDDINGS.name))
        missing = next(a for a in kinds.EMBEDDINGS.arrays if not ds.has(group, a))
        raise input_error(missing, f"missing (needed to rank; or give {others})")
    n_queries = group[kind.query_array].shape[0]
    n_gallery = None
    for name in ("gallery/emb", "gallery/label", "gallery/key", "gallery/lat", "gallery/x", "gallery/cam"):
        if ds.has(group, name):
            n_gallery = group[name].shape[0]
            break
    if n_gallery is None:
        raise OptionError("gallery", "no array tells the gallery size (give " + mention("gallery/emb") + ", "
                          + mention("gallery/label") + " or " + mention("gallery/key") + ")")
    if kind.backend is None:  # rankings given as lists, one row a query
        scored = bool(kind.optional) and ds.has(group, kind.optional[0])
        if options.threshold is not None and not scored:
            raise OptionError("--threshold", f"needs {' or '.join(kind.optional) or 'scores'} (the precomputed lists "
                              "have no scores)")
        return DatasetShape(int(n_queries), int(n_gallery), kind.name,
                            list_length=int(group[kind.query_array].shape[1]), list_scores=scored)
    query, gallery = (group[name] for name in kind.arrays)
    return DatasetShape(int(n_queries), int(n_gallery), kind.name, dims=int(query.shape[1]),
                        query_dtype=str(query.dtype), gallery_dtype=str(gallery.dtype))


def describe_scores(group, options: Options) -> DatasetShape:
    """The shape of a dataset ranked by its given score matrix (``scores/value``, Q x G)."""
    values = group[ds.SCORES]
    if len(values.shape) != 2:
        raise input_error(ds.SCORES, f"shape {values.shape} is not (queries, gallery items)")
    higher_is_better = ds.higher_is_better(group)
    if options.threshold is not None and not higher_is_better:
        raise OptionError("--threshold", "open-set decisions need scores, where higher is better; these are distances "
                         "(higher_is_better false): negate them and give them as scores")
    return DatasetShape(int(values.shape[0]), int(values.shape[1]), kinds.SCORES.name, score_dtype=str(values.dtype),
                        higher_is_better=higher_is_better)


def cutoffs_past_lists(shape: DatasetShape, options: Options) -> str | None:
    """The run.json warning when a metric's cut-off k exceeds the lists' length K (``ranking/item``), or None.

    Places K+1..k of a list are empty: they count as not relevant, as trec_eval's
    P_1000 does on a 100-item list (precision_at_k = hits in the top K / k).
    """
    if shape.list_length is None:
        return None
    past = sorted({c.k for c in options.columns() if c.k is not None and c.k > shape.list_length})
    if not past:
        return None
    several = len(past) > 1
    return (f"cut-off{'s' if several else ''} {', '.join(map(str, past))} {'are' if several else 'is'} past the "
            f"ranking lists' length (ranking/item has "
            f"K = {shape.list_length}): the places after K count as not relevant (as trec_eval counts them)")


def query_rows_array(shape: DatasetShape) -> str:
    """The array whose Zarr row chunks set the default task size: one row per query of how it is ranked."""
    return shape.kind.query_array


def cap_max_rank(max_rank: int, n_gallery: int) -> tuple[int, str | None]:
    """(the CMC curve's length, a warning or None): at most max(G, 50).

    No query can have its first relevant item at a rank above G, so
    cmc[k] = cmc[G] for every k > G: a longer curve adds nothing but rows
    (--max-rank 20000000 over 2,000 items wrote 85 MB and used 7 GB). Curves
    up to the default length 50 are kept as asked even for tiny galleries, so
    k = 1..max_rank holds for every ordinary request.
    """
    cap = max(int(n_gallery), Options.max_rank)
    if max_rank <= cap:
        return max_rank, None
    return cap, (f"--max-rank {max_rank} is more than the {n_gallery} gallery items: the CMC curve stops at "
                 f"rank {cap} (it cannot rise beyond the gallery size)")


def plan_chunks(n_queries: int, chunk_rows: int, n_workers: int = 1, per_worker: int = 2) -> list[tuple[int, int]]:
    """Query ranges for the tasks: whole query tiles (TILE_ROWS), balanced across the workers.

    At most ``chunk_rows`` (the Zarr chunk, rounded up to whole tiles) per
    task; the number of tasks is a multiple of the worker count (at least
    ``per_worker`` per worker while there are tiles to share) and task sizes differ by at
    most one tile, so no worker is left with the long tail. A tile is never
    split between tasks (its product would be computed twice).
    """
    if n_queries == 0:
        return []
    n_tiles = -(-n_queries // TILE_ROWS)
    max_tiles = max(1, -(-chunk_rows // TILE_ROWS))
    n_tasks = max(-(-n_tiles // max_tiles), per_worker * n_workers)
    n_tasks = -(-n_tasks // n_workers) * n_workers
    n_tasks = min(n_tasks, n_tiles)
    base, extra = divmod(n_tiles, n_tasks)
    edges = [0]
    for i in range(n_tasks):
        edges.append(edges[-1] + base + (1 if i < extra else 0))
    return [(a * TILE_ROWS, min(n_queries, b * TILE_ROWS)) for a, b in zip(edges[:-1], edges[1:])]


#: query rows per chunk, at least, of a run here whose chunks each use every thread (``schedule.splits_columns``)
SPLIT_CHUNK_ROWS = 4096


def block_rows(zarr_chunk_rows: int, dims: int, block_bytes: int = BLOCK_BYTES) -> int:
    """Gallery rows read at a time: whole score tiles, about ``block_bytes`` of float32, and, where
    Zarr chunks are not huge, at least one whole chunk (so each chunk is decompressed once per read)."""
    tiles = max(1, block_bytes // (TILE_COLS * dims * 4))
    if zarr_chunk_rows * dims * 4 <= 4 * block_bytes:
        tiles = max(tiles, -(-zarr_chunk_rows // TILE_COLS))
    return tiles * TILE_COLS


def shard_bounds(n_gallery: int, block_rows: int, shards: int) -> list[Span]:
    """Gallery ranges of whole blocks (whole tiles if there are fewer blocks than shards).

    Edge i is the block boundary nearest to i * G / shards rows, so shards
    differ by at most one block and a partial last block is not counted as a
    whole one (the owners of the shards get equal work).
    """
    unit = block_rows if n_gallery // block_rows >= shards else TILE_COLS
    shards = max(1, min(shards, -(-n_gallery // unit)))
    edges = [min(n_gallery, round(i * n_gallery / shards / unit) * unit) for i in range(shards)] + [n_gallery]
    return [(a, b) for a, b in zip(edges[:-1], edges[1:]) if a < b]


def plan_shards(group, shape: DatasetShape, cache_bytes: int, gallery_shards: int | None,
                n_workers: int = 1) -> list[Span] | None:
    """Gallery shards: as asked, or as many as keep each under a worker's gallery budget.

    Chosen here, the count is a multiple of the worker count, so every worker
    owns as many shards as the others (``shard_owners``) and they finish together.
    """
    if not shape.kind.features:
        return None
    gallery = group["gallery/emb"]
    bytes_needed = shape.n_gallery * gallery.shape[1] * 4
    if gallery_shards is None:
        gallery_shards = -(-bytes_needed // cache_bytes) if cache_bytes and bytes_needed > cache_bytes else 1
        if gallery_shards > 1:
            n_workers = max(1, n_workers)
            gallery_shards = -(-gallery_shards // n_workers) * n_workers
    if gallery_shards <= 1:
        return None
    return shard_bounds(shape.n_gallery, block_rows(gallery.chunks[0], gallery.shape[1]), gallery_shards)


def shard_owners(n_shards: int, workers: list[str]) -> list[list[str]]:
    """The workers that scan each shard: contiguous runs of shards per worker, or of workers per shard.

    Shard k goes to worker floor(k * W / S) when there are at least as many
    shards as workers (each worker then reads its own shards and no other);
    with fewer shards, shard k is shared by workers floor(k * W / S) up to
    floor((k + 1) * W / S) - 1. Workers are taken in the order given.
    """
    n_workers = len(workers)
    if not n_workers or not n_shards:
        return [[] for _ in range(n_shards)]
    if n_shards >= n_workers:
        return [[workers[k * n_workers // n_shards]] for k in range(n_shards)]
    return [workers[k * n_workers // n_shards:(k + 1) * n_workers // n_shards] for k in range(n_shards)]


def cache_budget(client) -> int:
    """Bytes of normalised gallery a worker may keep between tasks: a third of its memory limit."""
    limit = 0
    if client is not None:
        limits = [w.get("memory_limit") or 0 for w in client.scheduler_info()["workers"].values()]
        limit = min(limits) if limits else 0
    if not limit:
        limit = psutil.virtual_memory().total // 4
    return int(limit // 3)
