"""The command line's fixed start-up cost stays small: each command imports only what it uses.

Every ``evalcore`` command (timed as a whole process beside pytrec_eval and
plain numpy scripts) pays for the imports of ``evalcore.cli.main`` and of
argument parsing before it does anything. These tests run in fresh
interpreters and check, without timing anything, which modules are loaded:
parsing imports no numpy, numba, zarr, pyarrow, dask or distributed, no job
program and no page; ``import evalcore`` imports none of them either; and an
in-process evaluation never imports distributed, nor compare's modules.
"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from evalcore.io import dataset as ds

#: what argument parsing must not import (each costs tens to hundreds of milliseconds at every start)
HEAVY = ("numpy", "numba", "zarr", "pyarrow", "scipy", "dask", "distributed", "tqdm", "psutil", "fsspec")
#: evalcore's own heavy modules: the API and engine, compare's statistics, the pages, the job programs
HEAVY_EVALCORE = ("evalcore.api", "evalcore.engine.evaluate", "evalcore.engine.cluster", "evalcore.core.intervals",
                  "evalcore.core.comparison", "evalcore.core.registry", "evalcore.core.protocols",
                  "evalcore.render.pages", "evalcore.render.compare", "evalcore.io.report",
                  "evalcore.io.importers", "evalcore.jobs.bench", "evalcore.jobs.bench_challenge",
                  "evalcore.jobs.bench_compare", "evalcore.jobs.bench_trec", "evalcore.jobs.leaderboard",
                  "evalcore.jobs.nightly", "evalcore.jobs.score", "evalcore.jobs.service", "evalcore.jobs.synthetic")

COMMAND_LINES = [
    ["import", "trec-run", "run.txt", "--qrels", "qrels.txt", "--out", "ds.zarr"],
    ["evaluate", "ds.zarr", "--out", "report", "--protocol", "qrels", "--empty-queries", "zero", "--ci", "0.95"],
    ["evaluate", "ds.zarr", "--out", "report", "--workers", "2"],
    ["validate", "ds.zarr", "--protocol", "reid"],
    ["compare", "a", "b"],
    ["neighbors", "ds.zarr", "--k", "5", "--out", "n"],
    ["bench", "--shape", "trec"],
    ["nightly", "job.toml"],
    ["score", "sub", "--truth", "t", "--out", "o", "--team", "x"],
    ["score-service", "subs", "--truth", "t", "--out", "o"],
    ["leaderboard", "scored"],
]


def loaded_after(code: str) -> list[str]:
    """The modules of ``HEAVY`` and ``HEAVY_EVALCORE`` loaded after running ``code`` in a fresh interpreter."""
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps([m for m in {HEAVY + HEAVY_EVALCORE!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("words", COMMAND_LINES, ids=lambda words: " ".join(words[:2]))
def test_parsing_a_command_line_imports_nothing_heavy(words):
    code = f"from evalcore.cli.main import build_parser\nargs = build_parser().parse_args({words!r})"
    assert loaded_after(code) == []


def test_import_evalcore_imports_nothing_heavy():
    assert loaded_after("import evalcore") == []
    assert loaded_after("import evalcore.cli.main") == []


def test_the_public_names_still_resolve_on_first_use():
    code = ("import evalcore\n"
            "assert dir(evalcore) == sorted(evalcore.__all__)\n"
            "for name in evalcore.__all__:\n"
            "    assert getattr(evalcore, name) is not None, name\n"
            "from evalcore import evaluate, compare, neighbors, InputError, Result\n")
    loaded = loaded_after(code)
    assert "evalcore.api" in loaded and "distributed" not in loaded


def test_in_process_evaluate_imports_no_cluster_and_no_compare(tmp_path):
    rng = np.random.default_rng(0)
    labels = np.arange(40) % 8
    gallery = rng.standard_normal((40, 8)).astype(np.float32)
    ds.write_dataset(tmp_path / "ds.zarr", {"query/emb": gallery[:10] + 0.01, "gallery/emb": gallery,
                                            "query/label": labels[:10], "gallery/label": labels})
    code = ("from evalcore.cli.main import main\n"
            f"assert main(['evaluate', {str(tmp_path / 'ds.zarr')!r}, '--out', {str(tmp_path / 'report')!r}, "
            "'--quiet']) == 0")
    loaded = loaded_after(code)
    assert (tmp_path / "report" / "per_query.parquet").exists()
    assert "evalcore.api" in loaded and "evalcore.render.pages" in loaded  # used: the run and report.html
    for unused in ("dask", "distributed", "evalcore.engine.cluster", "evalcore.core.intervals",
                   "evalcore.core.comparison", "evalcore.render.compare", "evalcore.jobs.bench",
                   "evalcore.jobs.synthetic", "evalcore.io.importers"):
        assert unused not in loaded, unused


def test_light_copies_of_the_choices_equal_the_registries():
    """The parser's choices are named in light modules; they must stay the registries' own lists."""
    from evalcore.cli.import_cmd import FORMAT_NAMES
    from evalcore.core import protocols
    from evalcore.io.importers import FORMATS
    from evalcore.types import PROTOCOLS

    assert FORMAT_NAMES == tuple(FORMATS)
    assert PROTOCOLS == protocols.names()


def test_import_help_still_lists_the_formats(capsys):
    from evalcore.cli.main import build_parser
    from evalcore.io.importers import FORMATS_HELP

    with pytest.raises(SystemExit):
        build_parser().parse_args(["import", "--help"])
    out = capsys.readouterr().out
    assert "Formats:" in out and "query_index.json" in out and FORMATS_HELP.splitlines()[-1].strip() in out
