"""``evalcore neighbors --format zarr``: the exact neighbour lists as a Zarr group.

Arrays ``neighbors/item`` (Q, K) int64, gallery indices best first, and
``neighbors/score`` (Q, K) float32, their canonical scores; the group's
``evalcore`` attribute records the run (k, similarity, dataset). Written like
an import (``importers.write``): every array created first and then filled,
locally into a hidden sibling folder swapped into place, so a failed run
leaves an earlier output as it was; ``--overwrite`` replaces only a Zarr
group evalcore wrote.
"""
from __future__ import annotations

import shutil
from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from evalcore.io import report
from evalcore.io.dataset import is_url, write_dataset
from evalcore.io.importers.write import check_import_out, check_local_import_out

ITEM, SCORE = "neighbors/item", "neighbors/score"


def check_zarr_out(out, overwrite: bool, dataset, storage_options: Mapping | None = None) -> None:
    """``--out`` of the Zarr output: new, empty, or (with overwrite) a group evalcore wrote; not the dataset."""
    check_import_out(out, overwrite, {"dataset": dataset}, storage_options)


def list_arrays(table: pa.Table, k: int) -> dict[str, np.ndarray]:
    """The (query, rank) rows of ``evalcore.neighbors`` as (Q, K) arrays of items and scores."""
    n = table.num_rows // k
    return {ITEM: table.column("item").to_numpy().reshape(n, k),
            SCORE: table.column("score").to_numpy().astype(np.float32).reshape(n, k)}


def write_neighbors_zarr(out, table: pa.Table, k: int, run: Mapping, *, overwrite: bool = False,
                         storage_options: Mapping | None = None) -> str:
    """Write the lists to the Zarr group ``out`` (module docstring); returns its path."""
    arrays = list_arrays(table, k)
    attrs = {"neighbors": dict(run)}
    if is_url(out):
        write_dataset(out, arrays, attrs, storage_options=storage_options, overwrite=overwrite)
        return str(out)
    target = report._local(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = report.leftover_path(target, "tmp")
    try:
        write_dataset(tmp, arrays, attrs)
        report.swap_into_place(tmp, target, lambda: check_local_import_out(out, overwrite))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(target)
