"""evalcore compare against hostile or damaged input (issue 35, findings 12, 16 and part of 15): every write
target is checked against every input before any work, the numbers compared are finite, reports of different
data paired only by position are refused, bounded options, and report files that do not parse are one line.

Each command runs in a subprocess, as a user runs it, and must end with exit 2, one line on stderr naming
the option, file or column, and nothing written or changed. The expected facts come from the inputs
themselves (the bytes of the report before the command, the labels the datasets were made with).
"""
import json
import math
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import random_reid

import evalcore
from evalcore.errors import InputError

CLI = [str(Path(sys.executable).with_name("evalcore"))]
FAST = ["--resamples", "200", "--permutations", "200"]


def cli(*args, memory: int | None = None, timeout: float = 120, cwd=None):
    """The command as a user runs it; ``memory`` caps the address space (bytes) of the process."""
    def cap():
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    # one BLAS thread under a cap: each thread's buffer is address space, and a many-core machine has many
    threads = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"} if memory else {}
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "EVALCORE_DEBUG": "", **threads}, preexec_fn=cap, cwd=cwd)


def refused(p, *words):
    """Exit 2 and exactly one line on stderr holding every word; no traceback."""
    assert p.returncode == 2, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def snapshot(folder: Path) -> dict:
    """Every file under ``folder`` with its bytes (what must survive a refused command)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def evaluate(arrays, query=None, **options):
    return evalcore.evaluate(query=arrays["query/emb"] if query is None else query, gallery=arrays["gallery/emb"],
                             query_labels=arrays["query/label"], gallery_labels=arrays["gallery/label"], **options)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Two runs of one dataset (a: small noise, b: more), as report folders."""
    root = tmp_path_factory.mktemp("hostile_compare")
    arrays = random_reid(np.random.default_rng(0), n_query=40, n_gallery=200)
    rng = np.random.default_rng(1)
    for name, noise in (("a", 0.1), ("b", 0.6)):
        query = (arrays["query/emb"] + noise * rng.standard_normal(arrays["query/emb"].shape)).astype(np.float32)
        evaluate(arrays, query).save(root / name)
    return root


def copy_report(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for p in src.iterdir():
        (dst / p.name).write_bytes(p.read_bytes())
    return dst


def replace_file(report: Path, name: str, data: bytes) -> None:
    """Put ``data`` in the report as ``name`` and make manifest.json's size agree (a consistent manifest,
    as a careful tamperer or a damaged copy with its manifest rewritten would leave it)."""
    (report / name).write_bytes(data)
    manifest = json.loads((report / "manifest.json").read_text())
    if name not in manifest["files"]:
        manifest["files"].append(name)
    manifest["sizes"][name] = len(data)
    (report / "manifest.json").write_text(json.dumps(manifest))


def with_value(report: Path, column: str, row: int, value) -> None:
    """Rewrite per_query.parquet with ``column``'s value at ``row`` replaced (NaN/inf as floats, not nulls)."""
    table = pq.read_table(report / "per_query.parquet")
    values = table.column(column).to_numpy(zero_copy_only=False).astype(np.float64)
    values[row] = value
    nulls = np.asarray(table.column(column).is_null())
    nulls[row] = False
    table = table.set_column(table.column_names.index(column), column,
                             pa.array(values, pa.float64(), mask=nulls))
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    replace_file(report, "per_query.parquet", sink.getvalue().to_pybytes())


def first_known(report: Path) -> tuple[int, str]:
    table = pq.read_table(report / "per_query.parquet")
    row = int(np.flatnonzero(np.asarray(table.column("n_relevant").to_pylist()) > 0)[0])
    return row, table.column("key")[row].as_py()


# --------------------------------------------------------------------------- finding 12: write targets


@pytest.mark.parametrize("target", ["manifest.json", "run.json", "per_query.parquet", "table.tex"])
def test_latex_at_or_inside_an_input_report_is_refused_and_the_report_is_untouched(reports, tmp_path, target):
    a = copy_report(reports / "a", tmp_path / "a")
    before = snapshot(a)
    p = cli("compare", a, reports / "b", "--latex", a / target, *FAST)
    refused(p, "--latex", "run")
    assert snapshot(a) == before
    assert evalcore.read_report(a)["per_query"].num_rows == 40  # still a readable report


def test_latex_at_or_inside_the_comparison_folder_is_refused_before_any_work(reports, tmp_path):
    out = tmp_path / "cmp"
    for latex in (out, out / "table.tex"):
        p = cli("compare", reports / "a", reports / "b", "--out", out, "--latex", latex, *FAST)
        refused(p, "--latex", "--out")
        assert not out.exists()
    # an existing comparison folder replaced with --overwrite: the table must not land in it either
    assert cli("compare", reports / "a", reports / "b", "--out", out, *FAST).returncode == 0
    before = snapshot(out)
    p = cli("compare", reports / "a", reports / "b", "--out", out, "--overwrite", "--latex", out / "t.tex", *FAST)
    refused(p, "--latex")
    assert snapshot(out) == before


def test_latex_naming_a_folder_is_refused_with_one_line(reports, tmp_path):
    folder = tmp_path / "tables"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    p = cli("compare", reports / "a", reports / "b", "--latex", folder, *FAST)
    refused(p, "--latex", "folder")
    assert snapshot(folder) == {"notes.txt": b"mine"}
    # a folder that holds the input reports
    p = cli("compare", reports / "a", reports / "b", "--latex", reports, *FAST)
    refused(p, "--latex")


def test_latex_given_as_a_url_is_refused(reports, tmp_path):
    # run in an empty folder: a URL taken as a local path would create a folder named "memory:" there
    p = cli("compare", reports / "a", reports / "b", "--latex", "memory://bucket/table.tex", *FAST, cwd=tmp_path)
    refused(p, "--latex", "local")
    assert list(tmp_path.iterdir()) == []


def test_the_api_names_latex_in_its_own_words(reports):
    with pytest.raises(InputError, match=r"^latex .*folder"):
        evalcore.compare(reports / "a", reports / "b", latex=reports, resamples=100, permutations=100)


# --------------------------------------------------------------------------- finding 15: bounded options


@pytest.mark.parametrize("option", ["--resamples", "--permutations"])
def test_huge_resample_counts_are_refused_before_any_work(reports, option):
    # capped at 2 GiB: a command that allocates for the count instead of refusing it dies here, not the machine
    p = cli("compare", reports / "a", reports / "b", option, "1000000000000", memory=2 << 30, timeout=60)
    refused(p, option, "1000000")


def test_the_api_refuses_huge_resample_counts(reports):
    with pytest.raises(InputError, match="^resamples"):
        evalcore.compare(reports / "a", reports / "b", resamples=10**12)
    with pytest.raises(InputError, match="^resamples"):
        evaluate(random_reid(np.random.default_rng(0), n_query=10, n_gallery=30), ci=0.95, resamples=10**12)


# --------------------------------------------------------------------------- finding 15: damaged report files


@pytest.mark.parametrize("command", ["compare", "show"])
def test_a_run_json_that_is_not_json_is_one_line_naming_it(reports, tmp_path, command):
    a = copy_report(reports / "a", tmp_path / "a")
    replace_file(a, "run.json", b'{"options": {"protocol": "class"')  # cut short, sizes consistent
    p = cli(command, a, *((reports / "b", *FAST) if command == "compare" else ()))
    refused(p, "run.json", str(a))


def test_a_run_json_nested_too_deep_or_not_an_object_is_one_line(reports, tmp_path):
    for i, data in enumerate((b"[" * 100_000 + b"]" * 100_000, b"[1, 2]", b"null")):
        a = copy_report(reports / "a", tmp_path / f"a{i}")
        replace_file(a, "run.json", data)
        refused(cli("compare", a, reports / "b", *FAST), "run.json")


def test_a_damaged_parquet_file_with_its_size_in_the_manifest_is_one_line(reports, tmp_path):
    a = copy_report(reports / "a", tmp_path / "a")
    replace_file(a, "per_query.parquet", b"PAR1" + b"\0" * 100 + b"PAR1")
    for command in (("compare", a, reports / "b", *FAST), ("show", a)):
        refused(cli(*command), "per_query.parquet")


def test_a_manifest_naming_files_outside_the_report_is_refused(reports, tmp_path):
    secret = tmp_path / "secret.parquet"
    pq.write_table(pa.table({"x": [1]}), secret)
    (tmp_path / "inner").mkdir()
    a = copy_report(reports / "a", tmp_path / "inner" / "a")
    manifest = json.loads((a / "manifest.json").read_text())
    manifest["files"].append("../../secret.parquet")
    manifest["sizes"]["../../secret.parquet"] = secret.stat().st_size
    (a / "manifest.json").write_text(json.dumps(manifest))
    refused(cli("show", a), "manifest.json", "../../secret.parquet")
    for bad in ([5], {"per_query.parquet": 1}):
        manifest["files"] = bad
        (a / "manifest.json").write_text(json.dumps(manifest))
        refused(cli("show", a), "manifest.json")


def test_show_of_a_report_without_a_summary_is_one_line(reports, tmp_path):
    a = copy_report(reports / "a", tmp_path / "a")
    manifest = json.loads((a / "manifest.json").read_text())
    manifest["files"].remove("summary.parquet")
    (a / "manifest.json").write_text(json.dumps(manifest))
    refused(cli("show", a), "summary.parquet")


# --------------------------------------------------------------------------- finding 16: values and pairing


@pytest.mark.parametrize("value, word", [(math.inf, "inf"), (-math.inf, "-inf"), (math.nan, "NaN")])
def test_a_non_finite_metric_of_a_known_query_is_an_input_error_naming_it(reports, tmp_path, value, word):
    b = copy_report(reports / "b", tmp_path / "b")
    row, key = first_known(b)
    with_value(b, "ap", row, value)
    line = refused(cli("compare", reports / "a", b, *FAST), "ap", repr(key), word, "b")
    assert "--intersect" not in line  # --intersect is for different query sets, it would not help here
    # also with --intersect: the value is not dropped
    refused(cli("compare", reports / "a", b, "--intersect", *FAST), "ap", repr(key))


def test_a_null_metric_or_relevant_count_of_a_query_is_not_dropped_silently(reports, tmp_path):
    b = copy_report(reports / "b", tmp_path / "b")
    row, key = first_known(b)
    table = pq.read_table(b / "per_query.parquet")
    column = table.column("ap").to_pylist()
    column[row] = None
    sink = pa.BufferOutputStream()
    pq.write_table(table.set_column(table.column_names.index("ap"), "ap", pa.array(column, pa.float64())), sink)
    replace_file(b, "per_query.parquet", sink.getvalue().to_pybytes())
    refused(cli("compare", reports / "a", b, *FAST), "ap", repr(key), "null")
    # an unknown count of relevant items would make the query look unknown and leave it out
    c = copy_report(reports / "b", tmp_path / "c")
    table = pq.read_table(c / "per_query.parquet")
    counts = table.column("n_relevant").to_pylist()
    counts[row] = None
    sink = pa.BufferOutputStream()
    pq.write_table(table.set_column(table.column_names.index("n_relevant"), "n_relevant",
                                    pa.array(counts, pa.int64())), sink)
    replace_file(c, "per_query.parquet", sink.getvalue().to_pybytes())
    refused(cli("compare", reports / "a", c, *FAST), "n_relevant", repr(key))


def test_reports_of_different_datasets_paired_only_by_position_are_refused(tmp_path):
    # two unrelated datasets of the same size, different dimensions (so run.json's fingerprints differ);
    # neither has query/key, so both have the default keys q0, q1, ... and pairing by key pairs positions
    one = random_reid(np.random.default_rng(10), n_query=30, n_gallery=120, dims=16)
    two = random_reid(np.random.default_rng(11), n_query=30, n_gallery=120, dims=24)
    evaluate(one).save(tmp_path / "one")
    evaluate(two).save(tmp_path / "two")
    fingerprints = [json.loads((tmp_path / n / "run.json").read_text())["fingerprint"] for n in ("one", "two")]
    assert fingerprints[0] != fingerprints[1]
    line = refused(cli("compare", tmp_path / "one", tmp_path / "two", "--intersect", *FAST), "two",
                   "fingerprint", "q")
    assert fingerprints[0] in line and fingerprints[1] in line
    assert not any(tmp_path.glob("*.tex"))


def test_one_dataset_embedded_twice_in_different_dimensions_is_compared_with_a_warning(tmp_path):
    # the same queries and gallery (labels) embedded by two models of different widths: the fingerprints
    # differ, the queries are the same, so the comparison stands, with a warning saying how it paired them
    arrays = random_reid(np.random.default_rng(12), n_query=30, n_gallery=120, dims=16)
    wide = np.random.default_rng(13).standard_normal((16, 32))
    evaluate(arrays).save(tmp_path / "narrow")
    evalcore.evaluate(query=(arrays["query/emb"] @ wide).astype(np.float32),
                      gallery=(arrays["gallery/emb"] @ wide).astype(np.float32), query_labels=arrays["query/label"],
                      gallery_labels=arrays["gallery/label"]).save(tmp_path / "wide")
    p = cli("compare", tmp_path / "narrow", tmp_path / "wide", *FAST)
    assert p.returncode == 0, p.stderr
    assert "fingerprint" in p.stderr and "position" in p.stderr


def test_different_datasets_with_real_keys_are_compared_with_a_warning(tmp_path):
    arrays = random_reid(np.random.default_rng(14), n_query=30, n_gallery=120, dims=16)
    keys = np.array([f"img{i:03d}.jpg" for i in range(30)], dtype=object)
    wide = np.random.default_rng(15).standard_normal((16, 24))
    evaluate(arrays, query_keys=keys).save(tmp_path / "narrow")
    evalcore.evaluate(query=(arrays["query/emb"] @ wide).astype(np.float32),
                      gallery=(arrays["gallery/emb"] @ wide).astype(np.float32), query_labels=arrays["query/label"],
                      gallery_labels=arrays["gallery/label"], query_keys=keys).save(tmp_path / "wide")
    result = evalcore.compare(tmp_path / "narrow", tmp_path / "wide", resamples=100, permutations=100)
    assert any("fingerprint" in w and "key" in w for w in result.warnings), result.warnings


def test_latex_escapes_every_special_character_of_a_run_name(reports, tmp_path):
    # LaTeX's ten special characters (The TeXbook, ch. 7): # $ % & ~ _ ^ \ { }; a line break would end the row
    name = "r#$%&~_^\\{}\nx"
    evalcore.compare(reports / "a", reports / "b", names=["base", name], latex=tmp_path / "t.tex",
                     resamples=100, permutations=100)
    row = next(line for line in (tmp_path / "t.tex").read_text().splitlines() if line.startswith("r"))
    cell = row.split(" & ")[0]
    assert cell == (r"r\#\$\%\&\textasciitilde{}\_\textasciicircum{}\textbackslash{}\{\} x")
