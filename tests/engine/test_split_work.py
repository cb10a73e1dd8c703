"""How a run splits its work over threads: column ranges, pair runs, prefetch pieces (none may change a number)."""
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import zarr

from evalcore.core.scan.base import SPAN_COLS, column_spans
from evalcore.core.scan.embeddings import normalize_rows
from evalcore.engine.cache import forget_run
from evalcore.engine.gallery import GalleryBlocks, row_runs
from evalcore.errors import InputError
from evalcore.io import dataset as ds


@pytest.mark.parametrize("n, parts", [(1, 2), (255, 2), (257, 2), (19732, 2), (19732, 3), (5000, 8), (4096, 2),
                                      (1_000_000, 7)])
def test_column_spans_cover_the_gallery_in_ranges_as_equal_as_the_granule_allows(n, parts):
    spans = column_spans(n, parts)
    assert spans[0][0] == 0 and spans[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(spans[:-1], spans[1:]))  # contiguous, in order
    assert len(spans) == min(parts, -(-n // SPAN_COLS))
    assert all(a % SPAN_COLS == 0 for a, _ in spans)
    widths = [b - a for a, b in spans]
    # the last range may be short by the gallery's remainder; the others differ by at most one granule
    assert max(widths[:-1] or [0]) - min(widths[:-1] or [0]) <= SPAN_COLS
    assert max(widths) - min(widths) <= 2 * SPAN_COLS


@pytest.mark.parametrize("n, block, pieces", [(10, 4, 2), (7, 100, 3), (1, 8, 2), (19732, 20480, 2), (9, 3, 4)])
def test_row_runs_cut_every_block_into_pieces_that_cover_it(n, block, pieces):
    runs = row_runs(n, block, pieces)
    covered = np.concatenate([np.arange(a, z) for a, z in runs])
    assert np.array_equal(covered, np.arange(n))
    assert all((a // block) == ((z - 1) // block) for a, z in runs)  # no run crosses a block


@pytest.fixture
def run_id():
    """A run of its own: the process's run cache holds one run's blocks, and this test's go with it."""
    name = uuid.uuid4().hex
    yield name
    forget_run(name)


def gallery_group(rows: np.ndarray, chunk_rows: int):
    return ds.write_dataset(zarr.storage.MemoryStore(), {"query/emb": rows[:3], "gallery/emb": rows,
                                                         "query/label": np.zeros(3, np.int64),
                                                         "gallery/label": np.zeros(len(rows), np.int64)},
                            chunk_rows=chunk_rows)


@pytest.mark.parametrize("pieces", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_prefetch_in_pieces_gives_the_rows_normalised_one_at_a_time(pieces, dtype, run_id):
    rows = (np.random.default_rng(3).standard_normal((1001, 40)) * 7).astype(dtype)
    blocks = GalleryBlocks(gallery_group(rows, 1001), "cosine", run_id, 1 << 30, block_bytes=300 * 40 * 4)
    with ThreadPoolExecutor(2) as pool:
        blocks.prefetch(pool.map, pieces)
    want = normalize_rows(rows.astype(np.float32), "cosine")  # row by row: no piece can change a bit
    assert np.array_equal(blocks.whole.view(np.uint32), want.view(np.uint32))
    for g0, block in blocks.blocks():
        assert np.array_equal(block, want[g0:g0 + len(block)])


def test_prefetch_in_pieces_reports_every_bad_row_of_the_first_bad_block(run_id):
    rows = np.random.default_rng(4).standard_normal((1000, 8)).astype(np.float32)
    rows[[7, 900]] = np.nan   # both in the first block, in different pieces
    rows[999] = 0.0
    blocks = GalleryBlocks(gallery_group(rows, 1000), "cosine", run_id, 1 << 30)
    with ThreadPoolExecutor(2) as pool, pytest.raises(InputError) as err:
        blocks.prefetch(pool.map, 2)
    assert str(err.value).startswith("gallery/emb: rows 7, 900 contain NaN or Inf"), str(err.value)
