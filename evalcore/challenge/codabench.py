"""The Codabench / CodaLab scoring program: ``score.py INPUT OUTPUT`` (``jobs/codabench/score.py``).

The worker unpacks the reference data into ``INPUT/ref`` (the truth bundle:
the Zarr group itself, or a folder holding one ``*.zarr``) and the
participant's upload into ``INPUT/res`` (query.npy + gallery.npy, a Zarr
group, or a .zip / .npz of the two), and reads ``OUTPUT/scores.json``
(Codabench) or ``OUTPUT/scores.txt`` (CodaLab): ``map_public`` only, as
participants may see the scores file; run a phase whose truth is all
``public`` to show a private split.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from evalcore.challenge.archive import submission_limit, unpack
from evalcore.errors import InputError
from evalcore.io import ledger as lg
from evalcore.io.files import atomic_write
from evalcore.jobs import service


def truth_folder(ref: Path) -> Path:
    """``ref`` when it is a Zarr group, else its one ``*.zarr`` (or one sub-folder that is a group)."""
    if (ref / "zarr.json").is_file():
        return ref
    found = sorted(p for p in ref.iterdir() if p.is_dir() and (p / "zarr.json").is_file())
    if len(found) != 1:
        raise InputError(f"input/ref: holds {len(found)} Zarr groups; the reference data is one truth bundle")
    return found[0]


def submission_folder(res: Path, tmp: Path, limit: int) -> Path:
    """``res`` itself, the one folder inside it, or the one archive in it unpacked into ``tmp`` (at most
    ``limit`` bytes: ``archive.submission_limit``)."""
    if (res / "query.npy").exists() or (res / "zarr.json").exists():
        return res
    entries = [p for p in res.iterdir() if not p.name.startswith((".", "__MACOSX"))]
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        return entries[0]
    if len(entries) == 1 and entries[0].is_file():
        return unpack(entries[0], tmp, limit)
    raise InputError("input/res: no query.npy and gallery.npy (nor a Zarr group, nor one archive of them)")


def scores(split_maps) -> dict:
    """What participants see: the public split's mAP."""
    return {f"{lg.SPLIT_PREFIX}{lg.PUBLIC}": dict(split_maps).get(lg.PUBLIC)}


def run(input_dir, output_dir) -> dict:
    input_dir, output_dir = Path(input_dir), Path(output_dir)
    truth = service.load_truth(str(truth_folder(input_dir / "ref")))
    with tempfile.TemporaryDirectory(prefix="evalcore-codabench-") as tmp:
        limit = submission_limit(truth.n_query, truth.n_gallery, truth.dims)
        scored = service.score_path(truth, submission_folder(input_dir / "res", Path(tmp), limit))
    values = scores(scored.split_maps)
    atomic_write(output_dir / "scores.json", (json.dumps(values) + "\n").encode())
    atomic_write(output_dir / "scores.txt", "".join(f"{k}: {v}\n" for k, v in values.items()).encode())
    return values


def main(argv: list[str] | None = None) -> int:
    """``score.py INPUT OUTPUT``: 0 scored, 2 (one line on stderr) a bad submission or reference."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: score.py INPUT OUTPUT", file=sys.stderr)
        return 2
    try:
        run(*argv)
    except InputError as exc:  # the participant may read the log: no server path in it
        print(f"evalcore: error: {exc.redacted(lg.public_reason).message}", file=sys.stderr)
        return 2
    return 0



