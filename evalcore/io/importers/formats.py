"""The formats by name, and running one reader with the options it takes."""
from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from evalcore.errors import InputError, flag_of, joined
from evalcore.io.importers.faiss_json import read_faiss_json
from evalcore.io.importers.mat import read_mat
from evalcore.io.importers.npy import read_npy
from evalcore.io.importers.parquet import read_parquet
from evalcore.io.importers.trec import read_trec, read_trec_run

#: format -> (reader, fewest and most positional inputs, what the inputs are)
#: format: (reader, fewest input paths, most input paths, what the paths are)
FORMATS: dict[str, tuple[Callable[..., Any], int, int, str]] = {
    "mat": (read_mat, 1, 1, "pytorch_result.mat"),
    "npy": (read_npy, 0, 1, "an .npz file or a folder of .npy files (or none with --query-features ...)"),
    "parquet": (read_parquet, 1, 2, "one Parquet file with a side column, or a query and a gallery file"),
    "faiss-json": (read_faiss_json, 0, 1, "a folder with query_index.json, reference_index.json, results/"),
    "trec": (read_trec, 1, 1, "a TREC qrels file"),
    "trec-run": (read_trec_run, 1, 1, "a TREC run file (qid Q0 docno rank score tag)"),
}


def read_format(format: str, inputs, **options) -> tuple[dict[str, np.ndarray], dict]:
    """Run the reader of ``format`` on ``inputs`` (a path or list of paths) with its options."""
    if format not in FORMATS:
        raise InputError(f"format {format!r}: unknown (choose {', '.join(FORMATS)})")
    reader, fewest, most, what = FORMATS[format]
    if inputs is None:
        inputs = []
    elif isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    inputs = [os.fspath(p) for p in inputs]
    if not fewest <= len(inputs) <= most:
        count = str(fewest) if fewest == most else f"{fewest} to {most}"
        raise InputError(f"format {format}: {len(inputs)} input path(s) given, expected {count} ({what})")
    accepted = [p.name for p in inspect.signature(reader).parameters.values()
                if p.kind == inspect.Parameter.KEYWORD_ONLY]
    options = {k: v for k, v in options.items() if v is not None}
    for option in options:
        if option not in accepted:
            takes = joined(map(flag_of, accepted)) if accepted else "none"
            raise InputError(flag_of(option) + f": not an option of format {format} (it takes " + takes + ")")
    return reader(*inputs, **options)
