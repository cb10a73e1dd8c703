"""Issue 35, findings 9 and 15 (attributes): a Zarr store's metadata are bounded before any work.

Hostile stores are made by editing a small valid dataset's ``zarr.json`` files as an attacker would; each
command runs in a subprocess whose address space is capped (RLIMIT_AS, 3 GiB) and must end within seconds with
exit 2 and one line naming the array, the file or the attribute.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import evalcore
from evalcore.io import dataset as ds

CLI = [str(Path(sys.executable).with_name("evalcore"))]
ENV = {**os.environ, "EVALCORE_DEBUG": ""}
MEMORY = 3 << 30


def run(*args, timeout=60):
    """The command as a user runs it, its address space capped at MEMORY."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))

    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=ENV,
                          preexec_fn=cap)


def refused(p, *words):
    """Exit 2, one line on stderr holding every word, no traceback."""
    assert p.returncode == 2, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


def small_dataset(path: Path) -> Path:
    rng = np.random.default_rng(9)
    ds.write_dataset(path, {"query/emb": rng.normal(size=(4, 3)).astype(np.float32),
                            "gallery/emb": rng.normal(size=(6, 3)).astype(np.float32),
                            "query/label": np.arange(4), "gallery/label": np.array([0, 1, 2, 3, 0, 1])},
                     {"protocol": "class"})
    return path


def edit(meta: Path, change) -> None:
    doc = json.loads(meta.read_text())
    change(doc)
    meta.write_text(json.dumps(doc))


def claim_rows(path: Path, name: str, rows: int, chunk: int) -> None:
    """Make ``name``'s zarr.json declare ``rows`` rows in chunks of ``chunk`` rows (no chunk file added)."""
    def change(doc):
        doc["shape"][0] = rows
        doc["chunk_grid"]["configuration"]["chunk_shape"][0] = chunk
    edit(path / name / "zarr.json", change)


@pytest.mark.parametrize("command", ["validate", "evaluate"])
def test_a_store_claiming_a_billion_one_row_chunks_is_refused_at_once(tmp_path, command):
    path = small_dataset(tmp_path / "ds.zarr")
    for name in ("query/emb", "query/label"):  # consistent shapes: every other check would pass
        claim_rows(path, name, 10 ** 9, 1)
    out = tmp_path / "report"
    started = time.monotonic()
    p = run(command, path, *(["--out", out] if command == "evaluate" else []))
    refused(p, "query/", "1,000,000,000 chunks", "more than the")
    assert time.monotonic() - started < 30
    assert not out.exists()


def test_a_chunk_grid_over_the_cap_in_the_api_names_the_array(tmp_path):
    path = small_dataset(tmp_path / "ds.zarr")
    claim_rows(path, "gallery/label", 3_000_000, 1)  # the README's cap: about two million chunks an array
    with pytest.raises(evalcore.InputError, match=r"^gallery/label: 3,000,000 chunks"):
        evalcore.validate(str(path))


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("command", ["validate", "evaluate"])
def test_attributes_nested_too_deeply_to_parse_are_one_line(tmp_path, command):
    path = small_dataset(tmp_path / "ds.zarr")
    meta = path / "zarr.json"
    meta.write_text(meta.read_text().replace('"attributes": {', f'"attributes": {{"other": {nested(100_000)}, ', 1))
    assert nested(100_000) in meta.read_text()
    out = tmp_path / "report"
    p = run(command, path, *(["--out", out] if command == "evaluate" else []))
    refused(p, str(path), "nested too deeply")
    assert not out.exists()


def test_a_metadata_file_over_the_bound_is_refused_before_zarr_parses_it(tmp_path):
    path = small_dataset(tmp_path / "ds.zarr")
    edit(path / "zarr.json", lambda doc: doc["attributes"].update(padding="x" * (17 << 20)))  # README: 16 MiB
    refused(run("validate", path), str(path), "bytes of metadata")
    # and an array's own zarr.json
    path = small_dataset(tmp_path / "ds2.zarr")
    edit(path / "gallery/emb/zarr.json", lambda doc: doc.update(attributes={"padding": "x" * (17 << 20)}))
    refused(run("evaluate", path, "--out", tmp_path / "report"), "gallery/emb", "bytes of metadata")
    assert not (tmp_path / "report").exists()
