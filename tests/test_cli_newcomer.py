"""The command line behaves like every command line: --version, a bare ``evalcore`` prints its help, one
``evalcore: error:`` prefix, "did you mean" for commands, options, choices and metric names, ``show`` says a
path does not exist, per-format plain-text help for ``import``, and ``demo`` run twice replaces its own output.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import evalcore
from evalcore.cli.main import main
from evalcore.core import registry

COMMANDS = ["evaluate", "validate", "demo", "show", "compare", "metrics", "neighbors", "bench", "import",
            "nightly", "score", "score-service", "leaderboard"]
FORMATS = ["mat", "npy", "parquet", "faiss-json", "trec", "trec-run"]


def one_error_line(err: str) -> str:
    """The one line of a usage error: a single ``evalcore: error:`` prefix and no program name after it."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("evalcore: error: ") and lines[0].count("evalcore: error:") == 1, err
    assert not lines[0].startswith("evalcore: error: evalcore"), err
    return lines[0]


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- --version, bare evalcore, one prefix


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_installed_version_and_exits_0(flag, capsys):
    assert main([flag]) == 0
    out = capsys.readouterr().out
    # the reference: the installed distribution's metadata, not the module under test
    assert out == f"evalcore {importlib.metadata.version('evalcore')}\n"
    assert evalcore.__version__ == importlib.metadata.version("evalcore")


def test_bare_evalcore_prints_the_help_with_every_command_and_exits_0(capsys):
    assert main([]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("usage: evalcore") and captured.err == ""
    for command in COMMANDS:
        assert f"\n    {command} " in captured.out or f"\n    {command}\n" in captured.out, command


@pytest.mark.parametrize("argv,leads", [
    (["evaluate"], "dataset, --out: required"),
    (["show"], "report: required"),
    (["evaluate", "ds.zarr", "--out", "o", "--ks"], "--ks: expected one argument"),
    (["show", "r", "--worst", "many"], "--worst: invalid int value"),
    (["import"], "FORMAT, --out: required"),
    (["score", "sub"], "--truth, --out, --team: required"),
])
def test_argparse_errors_have_one_prefix_and_lead_with_the_argument(argv, leads, capsys):
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"evalcore: error: {leads}"), line


# --------------------------------------------------------------------------- did you mean


def test_a_mistyped_command_gets_did_you_mean(capsys):
    assert main(["evalute", "ds.zarr"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("evalcore: error: unknown command 'evalute' (did you mean 'evaluate'?)"), line
    assert main(["lederboard"]) == 2
    assert "(did you mean 'leaderboard'?)" in one_error_line(capsys.readouterr().err)
    assert main(["xyzzy"]) == 2  # nothing close: the commands listed, no guess
    line = one_error_line(capsys.readouterr().err)
    assert "did you mean" not in line and all(c in line for c in COMMANDS)


@pytest.mark.parametrize("argv,option,meant", [
    (["evaluate", "ds.zarr", "--out", "o", "--metircs", "map"], "--metircs", "--metrics"),
    (["evaluate", "ds.zarr", "--out", "o", "--metircs=map"], "--metircs", "--metrics"),
    (["evaluate", "ds.zarr", "--out", "o", "--max-rnak", "5"], "--max-rnak", "--max-rank"),
    (["import", "trec-run", "run.txt", "--out", "o", "--qerls", "q"], "--qerls", "--qrels"),
    (["compare", "a", "b", "--permutatoins", "5"], "--permutatoins", "--permutations"),
    (["--verison"], "--verison", "--version"),
])
def test_a_mistyped_option_gets_did_you_mean(argv, option, meant, capsys):
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"evalcore: error: {option}: ") and f"(did you mean '{meant}'?)" in line, line


@pytest.mark.parametrize("argv,value,meant", [
    (["validate", "ds.zarr", "--protocol", "clas"], "clas", "class"),
    (["evaluate", "ds.zarr", "--out", "o", "--protocol", "reld"], "reld", "reid"),
    (["evaluate", "ds.zarr", "--out", "o", "--similarity", "cosin"], "cosin", "cosine"),
    (["evaluate", "ds.zarr", "--out", "o", "--ties", "pesimistic"], "pesimistic", "pessimistic"),
    (["neighbors", "ds.zarr", "--k", "3", "--out", "o", "--format", "parket"], "parket", "parquet"),
    (["import", "trec_run", "run.txt", "--out", "o"], "trec_run", "trec-run"),
])
def test_a_mistyped_choice_gets_did_you_mean(argv, value, meant, capsys):
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"{value!r} (did you mean {meant!r}?)" in line, line
    assert not os.path.exists("o")


@pytest.mark.parametrize("given,meant", [("ndgc@10", "ndcg@10"), ("recal", "recall"), ("precison_at_5", "precision@5"),
                                         ("NDGC@3", "ndcg@3"), ("mapp", "map")])
def test_a_mistyped_metric_name_gets_did_you_mean_on_the_command_line_and_in_python(given, meant, tmp_path, capsys):
    assert main(["evaluate", str(tmp_path / "ds.zarr"), "--out", str(tmp_path / "o"), "--metrics",
                 f"map,{given}"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"evalcore: error: --metrics: unknown metric {given!r} (did you mean {meant!r}?)"), line
    assert not (tmp_path / "o").exists()
    with pytest.raises(evalcore.OptionError, match=rf"unknown metric '{given}' \(did you mean '{meant}'\?\)"):
        evalcore.evaluate(query=np.eye(3), gallery=np.eye(3), query_labels=[0, 1, 2], gallery_labels=[0, 1, 2],
                          metrics=["map", given])
    # the suggestion is a name the registry takes, and names the same metric an exact spelling does
    assert registry.select(meant) == registry.select(meant.lower().replace("_at_", "@"))


def test_a_metric_name_gets_a_guess_only_when_a_close_one_exists():
    with pytest.raises(evalcore.OptionError, match=r"\(did you mean 'ndcg'\?\)"):
        registry.select("ndgc", "--metrics")
    with pytest.raises(evalcore.OptionError) as caught:
        registry.select("zzzz")
    assert "did you mean" not in str(caught.value) and "ndcg@k" in str(caught.value)
    with pytest.raises(evalcore.OptionError, match="takes no cut-off") as caught:  # not a typo: no guess either
        registry.select("map_trapz@5")
    assert "did you mean" not in str(caught.value)


# --------------------------------------------------------------------------- show


def test_show_says_a_missing_path_does_not_exist_and_a_folder_without_manifest_was_not_finished(tmp_path, capsys):
    assert main(["show", str(tmp_path / "nowhere")]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line == f"evalcore: error: report {tmp_path / 'nowhere'}: does not exist", line
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "per_query.parquet").write_bytes(b"")
    assert main(["show", str(tmp_path / "half")]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "not finished" in line and "does not exist" not in line
    (tmp_path / "file.txt").write_text("x")
    assert main(["show", str(tmp_path / "file.txt")]) == 2
    assert "is a file, not a report folder" in one_error_line(capsys.readouterr().err)


# --------------------------------------------------------------------------- help: per format, plain text


def reader_options() -> dict[str, set[str]]:
    """Each format's options, as flags, from its reader's keyword-only parameters (the reference)."""
    from evalcore.io.importers.formats import FORMATS as READERS

    out = {}
    for name, (reader, *_) in READERS.items():
        keywords = [p.name for p in inspect.signature(reader).parameters.values()
                    if p.kind == inspect.Parameter.KEYWORD_ONLY and p.name != "storage_options"]
        out[name] = {"--" + k.replace("_", "-") for k in keywords}
    return out


@pytest.mark.parametrize("fmt", FORMATS)
def test_import_format_help_shows_that_format_alone(fmt, capsys):
    assert main(["import", fmt, "--help"]) == 0
    out = capsys.readouterr().out
    options = reader_options()
    assert set(options) == set(FORMATS)
    assert out.startswith(f"usage: evalcore import {fmt} ")
    def has(flag):
        return re.search(rf"{re.escape(flag)}(?![\w-])", out) is not None

    for flag in options[fmt] | {"--out", "--overwrite", "--chunk-rows"}:
        assert has(flag), flag
    for other, flags in options.items():
        for flag in flags - options[fmt]:
            assert not has(flag), (fmt, other, flag)
        if other != fmt:
            assert f"\n{other}\n" not in out and f"{other}:" not in out, other
    assert len(out.splitlines()) < 70, len(out.splitlines())  # was 171 lines, every format
    assert "`" not in out
    # help after the inputs works the same
    assert main(["import", fmt, "some-input", "--out", "o", "--help"]) == 0
    assert capsys.readouterr().out == out


def test_import_trec_run_help_describes_trec_run(capsys):
    assert main(["import", "trec-run", "--help"]) == 0
    out = capsys.readouterr().out
    assert "qid Q0 docno rank score tag" in out and "--order trec_eval" in out and "listed twice" in out
    assert "query_index.json" not in out and "pytorch_result.mat" not in out


@pytest.mark.parametrize("argv", [[], ["import"], ["import", "faiss-json"], *([c] for c in COMMANDS)])
def test_every_help_is_plain_text(argv, capsys):
    assert main([*argv, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: evalcore")
    assert "`" not in out and ":func:" not in out and ":class:" not in out
    assert not [line for line in out.splitlines() if line.rstrip().endswith("::")]
    if argv == ["import"]:  # the whole reference stays, every format in it, with its literal block
        assert all(f"\n{f}\n" in out for f in FORMATS)
        assert '\n        results/<query id>.json, one per query' in out


# --------------------------------------------------------------------------- demo twice


@pytest.fixture
def small_demo(monkeypatch):
    """The demo on a small dataset of the same generator, in this process (the folder handling is the test)."""
    from evalcore.jobs import synthetic

    def small(path, dims=256, dtype="float32", seed=0):
        synthetic.write_clustered(path, synthetic.Clusters(n_query=40, n_gallery=200, dims=dims, n_ids=20, n_cams=3,
                                                           dtype=dtype, junk=0.02, protocol="reid"), seed=seed)
    monkeypatch.setattr(synthetic, "write_market_like", small)
    return ["--dims", "8", "--threshold", "0.5"]


def test_demo_run_twice_replaces_its_own_output_and_never_a_folder_it_did_not_write(tmp_path, small_demo, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), *small_demo]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["dataset.zarr", "evalcore-demo.json", "report"]
    first = (out / "report" / "run.json").read_bytes()
    capsys.readouterr()
    assert main(["demo", "--out", str(out), *small_demo[:1], "16", *small_demo[2:]]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["dataset.zarr", "evalcore-demo.json", "report"]
    assert (out / "report" / "run.json").read_bytes() != first
    assert evalcore.open_dataset(str(out / "dataset.zarr"))["query/emb"].shape[1] == 16
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]  # no leftovers beside it
    capsys.readouterr()

    # a file the demo did not write makes it a folder the demo must not replace, with or without --overwrite
    (out / "notes.txt").write_text("mine")
    before = snapshot(out)
    for extra in ([], ["--overwrite"]):
        assert main(["demo", "--out", str(out), *small_demo, *extra]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert line.startswith(f"evalcore: error: --out {out}: holds 'notes.txt'"), line
        assert snapshot(out) == before
    # a folder shaped like the demo's but without its marker is not the demo's either
    mine = tmp_path / "mine"
    (mine / "report").mkdir(parents=True)
    (mine / "report" / "draft.txt").write_text("years of work")
    before = snapshot(mine)
    assert main(["demo", "--out", str(mine), *small_demo]) == 2
    assert "evalcore-demo.json" in one_error_line(capsys.readouterr().err)
    assert snapshot(mine) == before


# --------------------------------------------------------------------------- as a real process


def test_the_entry_point_and_python_m_behave_the_same(tmp_path):
    env = {**os.environ, "EVALCORE_DEBUG": ""}
    exe = str(Path(sys.executable).with_name("evalcore"))
    for prefix in ([exe], [sys.executable, "-m", "evalcore.cli.main"]):
        done = subprocess.run([*prefix, "--version"], capture_output=True, text=True, timeout=60, env=env)
        assert (done.returncode, done.stdout, done.stderr) == \
            (0, f"evalcore {importlib.metadata.version('evalcore')}\n", "")
        done = subprocess.run(prefix, capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 0 and done.stdout.startswith("usage: evalcore") and done.stderr == ""
        done = subprocess.run([*prefix, "evalute"], capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 2 and done.stdout == ""
        assert one_error_line(done.stderr).startswith(
            "evalcore: error: unknown command 'evalute' (did you mean 'evaluate'?)")
        done = subprocess.run([*prefix, "show", str(tmp_path / "nope")], capture_output=True, text=True,
                              timeout=60, env=env)
        assert done.returncode == 2 and one_error_line(done.stderr).endswith("nope: does not exist")


def test_a_reader_that_leaves_early_gets_no_error(tmp_path):
    # `evalcore metrics | head -1`: the pipe closes after the first line; a CLI says nothing and exits cleanly
    import subprocess
    import sys
    done = subprocess.run(f"{sys.executable} -m evalcore.cli.main metrics | head -1", shell=True,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.startswith("first_rank")
    assert "BrokenPipe" not in done.stderr and "error" not in done.stderr, done.stderr


def test_the_console_script_exits_with_main_s_status_after_python_s_own_cleanup(tmp_path):
    # evalcore's console script (pyproject: evalcore.cli.main:entry) ends the process without the native
    # libraries' teardown, which could abort a finished command (exit 134); what Python's own exit does still
    # happens: atexit handlers run, non-daemon threads finish, output is flushed
    script = tmp_path / "run.py"
    script.write_text(
        "import atexit, sys, threading, time\n"
        "from evalcore.cli import main\n"
        "atexit.register(lambda: print('atexit ran', flush=True))\n"
        "threading.Thread(target=lambda: (time.sleep(0.3), print('thread finished'))).start()\n"
        "sys.argv = ['evalcore', *sys.argv[1:]]\n"
        "main.entry()\n")
    done = subprocess.run([sys.executable, str(script), "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.splitlines() == ["evalcore 0.1.0", "thread finished", "atexit ran"]
    refused = subprocess.run([sys.executable, str(script), "show", str(tmp_path / "nowhere")], capture_output=True,
                             text=True, timeout=120)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "evalcore: error:" in refused.stderr
    import tomllib

    scripts = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["evalcore"] == "evalcore.cli.main:entry"
