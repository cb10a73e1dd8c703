"""Writing an import: ``--out`` checked first, the readers run, then the dataset swapped into place."""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping

import numpy as np

from evalcore.errors import InputError, mention
from evalcore.io import report
from evalcore.io.dataset import is_url, write_dataset
from evalcore.io.importers.checks import WARNINGS
from evalcore.io.importers.formats import read_format
from evalcore.types import LIST_ITEMS


def _same_path(a, b) -> bool:
    if is_url(a) or is_url(b):
        return str(a).rstrip("/") == str(b).rstrip("/")
    return os.path.abspath(a) == os.path.abspath(b)


#: import options that name input files or folders (--out must stay clear of them)
PATH_OPTIONS = ("query_features", "gallery_features", "query_ids", "gallery_ids", "query_cams", "gallery_cams",
                "query_index", "reference_index", "results_dir", "queries", "gallery", "dataset")


def _is_evalcore_group_meta(meta) -> bool:
    return (isinstance(meta, dict) and meta.get("node_type") == "group"
            and isinstance(meta.get("attributes"), dict) and "evalcore" in meta["attributes"])


def check_import_out(out, overwrite: bool, inputs: Mapping | None = None,
                     storage_options: Mapping | None = None) -> None:
    """``--out`` of an import: new, an empty folder, or (with ``overwrite``) a dataset evalcore wrote.

    Ours: a Zarr group whose attributes hold ``evalcore`` (``write_dataset`` sets
    it) and whose folder holds nothing but ``zarr.json`` and Zarr nodes. Never
    one of the ``inputs`` ({what: path}), inside one, or holding one.
    """
    report.check_apart("--out", out, inputs or {}, plain_folders_may_hold_out=True)
    if is_url(out):
        fs, root = report._fs(out, storage_options)
        root = root.rstrip("/")
        fs.invalidate_cache(root)
        if not report._listing(fs, root):
            return
        if not overwrite:
            raise InputError(mention("--out") + f" {out}: exists and is not empty (pass " + mention("--overwrite")
                             + " to replace it)")
        try:
            meta = json.loads(fs.cat_file(f"{root}/zarr.json"))
        except (FileNotFoundError, ValueError):
            meta = None
        if not _is_evalcore_group_meta(meta):
            raise InputError(mention("--out") + f" {out}: is not a dataset evalcore wrote (no Zarr group with the "
                             "evalcore attribute); " + mention("--overwrite") + " only replaces those, choose "
                             "another " + mention("--out"))
        return
    with report.lock_if_folder(report._local(out).parent):  # a concurrent import's swap must wait
        check_local_import_out(out, overwrite)


def check_local_import_out(out, overwrite: bool) -> None:
    """``check_import_out`` of a local folder; the caller holds ``folder_lock`` on its parent (if that exists)."""
    entries = report.local_out_entries(out, overwrite)
    if not entries:
        return
    p = report._local(out)
    try:
        meta = json.loads((p / "zarr.json").read_text())
    except (OSError, ValueError):
        meta = None
    foreign = [n for n in entries if n != "zarr.json" and not (p / n / "zarr.json").is_file()]
    if not _is_evalcore_group_meta(meta) or foreign:
        what = f"holds {foreign[0]!r}" if foreign else "is not a Zarr group with the evalcore attribute"
        raise InputError(mention("--out") + f" {out}: {what}, so it is not a dataset evalcore wrote; "
                         + mention("--overwrite") + " only replaces those (or an empty folder), choose another "
                         + mention("--out"))


def import_inputs(inputs, options: Mapping) -> dict:
    """{what: path} of every input file or folder of an import, for ``check_import_out``."""
    found = {"input" + (f" {i + 1}" if i else ""): path for i, path in enumerate(inputs)}
    found.update({f"--{k.replace('_', '-')}": v for k, v in options.items()
                  if k in PATH_OPTIONS and isinstance(v, (str, os.PathLike))})
    return found


def import_to(format: str, inputs, out, overwrite: bool = False, *, chunk_rows: int | None = None,
              storage_options: Mapping | None = None, **options) -> dict:
    """Read ``inputs`` in ``format``, validate everything, then write the dataset at ``out``.

    Locally the dataset is written into a hidden sibling folder and swapped into
    place in one step (``report.swap_into_place``), so a failed or killed import
    leaves an earlier dataset as it was, and ``out`` is never missing. Returns a summary: format, out, protocol and
    counts (queries, gallery, dims, qrels, ranking_k) for what was written.
    """
    check_import_out(out, overwrite, import_inputs(inputs, options), storage_options)
    if format == "trec":
        options["storage_options"] = storage_options
        if options.get("dataset") is not None and _same_path(options["dataset"], out):
            raise InputError(mention("--out") + f" {out}: is the " + mention("--dataset")
                             + " being read; write the merged dataset elsewhere")
    arrays, attrs = read_format(format, inputs, **options)
    warnings = attrs.pop(WARNINGS, [])
    # the evalcore attribute marks the group as ours for a later --overwrite, even without a protocol
    attrs = dict(attrs) or {"version": 1}
    if is_url(out):
        write_dataset(out, arrays, attrs, chunk_rows=chunk_rows, storage_options=storage_options,
                      overwrite=overwrite)
    else:
        target = report._local(out)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = report.leftover_path(target, "tmp")
        try:
            write_dataset(tmp, arrays, attrs, chunk_rows=chunk_rows)
            report.swap_into_place(tmp, target, lambda: check_local_import_out(out, overwrite))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    summary = {"format": format, "out": str(out), "protocol": attrs.get("protocol"), "warnings": warnings}
    for side, label in (("query", "queries"), ("gallery", "gallery")):
        for leaf in ("emb", "key", "label", "lat"):
            if f"{side}/{leaf}" in arrays:
                summary[label] = int(arrays[f"{side}/{leaf}"].shape[0])
                break
    if "query/emb" in arrays:
        summary["dims"] = int(arrays["query/emb"].shape[1])
    if "gallery/junk" in arrays:
        summary["junk"] = int(np.count_nonzero(arrays["gallery/junk"]))
    if "qrels/rel" in arrays:
        summary["qrels"] = int(arrays["qrels/rel"].shape[0])
    if LIST_ITEMS in arrays:
        summary["ranking_k"] = int(arrays[LIST_ITEMS].shape[1])
    return summary
