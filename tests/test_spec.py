"""One evaluation spec: the command line, the job files, score and demo build the same typed records."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

import evalcore
from evalcore.cli.main import build_parser
from evalcore.engine.options import Options
from evalcore.errors import InputError
from evalcore.jobs import common, nightly, score
from evalcore.jobs.common import EvaluationSpec, RunSettings


def test_no_hand_built_namespace_in_the_package():
    root = Path(evalcore.__file__).parent
    built = [f"{p.relative_to(root)}:{n}" for p in sorted(root.rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\bNamespace\(", line)]
    assert built == []


def cli(*words: str) -> argparse.Namespace:
    return build_parser().parse_args(["evaluate", "d.zarr", "--out", "o", *words])


def test_the_command_line_and_a_job_file_give_the_same_records(tmp_path):
    args = cli("--protocol", "qrels", "--ks", "5,1", "--max-rank", "20", "--map-at", "100", "--threshold", "0.5",
               "--judged-only", "--empty-queries", "zero", "--metrics", "map,recall@5", "--target-fpir", "0.1",
               "--workers", "2", "--memory-limit", "4GiB", "--stall-timeout", "30", "--chunk-rows", "64",
               "--storage-option", "anon=true")
    path = tmp_path / "job.toml"
    path.write_text('reports = "r"\nhistory = "h"\nworkers = 2\nmemory_limit = "4GiB"\nstall_timeout = 30\n'
                    '[[evaluation]]\nname = "a"\ndataset = "d.zarr"\nprotocol = "qrels"\nks = [5, 1]\n'
                    'max_rank = 20\nmap_at = 100\nthreshold = 0.5\njudged_only = true\nempty_queries = "zero"\n'
                    'metrics = "map,recall@5"\ntarget_fpir = 0.1\nchunk_rows = 64\nstorage_options = { anon = true }\n')
    job = nightly.load_job(path)
    ev = job["evaluation"][0]
    spec = common.spec_from_args(args)
    assert spec == nightly.evaluation_spec(ev).checked()
    assert spec.options == Options(ks=(5, 1), max_rank=20, map_at=100, threshold=0.5, judged_only=True,
                                   empty_queries="zero", metrics=("map", "recall@5"))
    assert (spec.protocol, spec.similarity, spec.sweep, spec.target_fpir) == ("qrels", None, False, 0.1)
    no_cli = argparse.Namespace(scheduler=None, workers=None, memory_limit=None, stall_timeout=None)
    settings = nightly.run_settings(ev, no_cli, job)
    assert settings == RunSettings(workers=2, memory_limit="4GiB", stall_timeout=30.0, chunk_rows=64,
                                   storage_options={"anon": True}, overwrite=True)
    assert common.settings_from_args(args) == RunSettings(workers=2, memory_limit="4GiB", stall_timeout=30.0,
                                                          chunk_rows=64, storage_options={"anon": True})
    # the same keyword arguments of evalcore.evaluate either way
    assert common.evaluate_params(args) == {**nightly.evaluation_spec(ev).evaluate_kwargs(),
                                            **RunSettings(workers=2, memory_limit="4GiB", stall_timeout=30.0,
                                                          chunk_rows=64).evaluate_kwargs()}


def test_score_evaluates_judged_only_map_with_cosine_and_pessimistic_ties():
    spec = score.SCORE_SPEC.checked()
    assert (spec.protocol, spec.similarity) == ("qrels", "cosine")
    assert spec.options.judged_only and spec.options.ties == "pessimistic" and spec.options.ks == (1, 5, 10)
    assert spec.options.max_rank == 50 and not spec.sweep and spec.target_fpir is None


@pytest.mark.parametrize("settings, option", [
    (RunSettings(workers=0), "--workers: 0 must be at least 1"),
    (RunSettings(scheduler="tcp://h"), "--scheduler"),
    (RunSettings(memory_limit="lots"), "--memory-limit: 'lots' is not a size"),
    (RunSettings(stall_timeout=-1), "--stall-timeout: -1 must be a number of seconds > 0"),
    (RunSettings(chunk_rows=0), "--chunk-rows: 0 must be at least 1"),
    (RunSettings(gallery_shards=0), "--gallery-shards: 0 must be at least 1"),
])
def test_run_settings_name_the_option(settings, option):
    with pytest.raises(InputError, match=re.escape(option)):
        settings.checked()


@pytest.mark.parametrize("words, message", [
    (["--workers", "x"], "--workers: 'x' is not an integer"),
    (["--workers", "0"], "--workers: 0 must be at least 1"),
    (["--chunk-rows", "0"], "--chunk-rows: 0 must be at least 1"),
    (["--stall-timeout", "soon"], "--stall-timeout: 'soon' is not a number"),
    (["--target-fpir", "2"], "--target-fpir: 2.0 must lie in [0, 1]"),
    (["--max-rank", "x"], "--max-rank: 'x' is not an integer"),
    (["--ks", "0"], "--ks: '0' must list positive integers"),
])
def test_the_command_line_parses_into_the_records_naming_the_option(words, message):
    args = cli(*words)
    with pytest.raises(InputError, match=re.escape(message)):
        common.settings_from_args(args)
        common.spec_from_args(args)


@pytest.mark.parametrize("line, message", [
    ("workers = 0", "job.toml: workers: 0 must be at least 1"),
    ("workers = true", "job.toml: workers: True must be a positive integer"),
    ('stall_timeout = "5m"', "job.toml: stall_timeout: '5m' is not a number of seconds"),
])
def test_a_job_file_shares_the_command_lines_checks_naming_file_and_key(tmp_path, line, message):
    path = tmp_path / "job.toml"
    path.write_text(f'{line}\nreports = "r"\nhistory = "h"\n[[evaluation]]\nname = "a"\ndataset = "d.zarr"\n')
    with pytest.raises(InputError, match=re.escape(message)):
        nightly.load_job(path)


def test_the_command_lines_cluster_options_replace_the_job_files(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text('reports = "r"\nhistory = "h"\nscheduler = "tcp://a:8786"\nmemory_limit = "1GiB"\n'
                    'stall_timeout = 90\n[[evaluation]]\nname = "a"\ndataset = "d.zarr"\n')
    job = nightly.load_job(path)
    ev = job["evaluation"][0]
    given = argparse.Namespace(scheduler=None, workers="3", memory_limit="2GiB", stall_timeout="20")
    assert nightly.run_settings(ev, given, job) == RunSettings(workers=3, memory_limit="2GiB", stall_timeout=20.0,
                                                              overwrite=True)
    none = argparse.Namespace(scheduler=None, workers=None, memory_limit=None, stall_timeout=None)
    assert nightly.run_settings(ev, none, job) == RunSettings(scheduler="tcp://a:8786", memory_limit="1GiB",
                                                             stall_timeout=90.0, overwrite=True)
    with pytest.raises(InputError, match=re.escape("--workers: 0 must be at least 1")):
        nightly.run_settings(ev, argparse.Namespace(scheduler=None, workers="0", memory_limit=None,
                                                    stall_timeout=None), job)


def test_demo_and_evaluate_take_the_same_spec_type():
    spec = EvaluationSpec(Options(ks=(1, 5, 10), threshold=0.2), sweep=True, target_fpir=0.1).checked()
    assert spec.evaluate_kwargs()["target_fpir"] == 0.1 and spec.evaluate_kwargs()["protocol"] is None
    with pytest.raises(InputError, match=re.escape("--target-fpir: 1.5 must lie in [0, 1]")):
        EvaluationSpec(target_fpir=1.5).checked()
