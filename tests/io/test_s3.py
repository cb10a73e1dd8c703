"""Datasets and report folders on S3 (moto's server on 127.0.0.1): same results, manifest-last reports."""
from __future__ import annotations

import json

import fsspec
import numpy as np
import pyarrow as pa
import pytest
from conftest import random_reid
from s3server import s3_server
from test_cluster import dask_processes, run

from evalcore.errors import InputError
from evalcore.io import dataset as ds
from evalcore.io import report

pytestmark = pytest.mark.cluster

EVALUATE_FILES = {"per_query.parquet", "summary.parquet", "cmc.parquet", "run.json", "report.html", "manifest.json"}


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:
        yield server


@pytest.fixture(scope="module")
def dataset(s3, tmp_path_factory):
    """The same small dataset locally and at s3://evalcore/ds.zarr (few arrays: every one costs requests)."""
    data = {name: values for name, values in random_reid(np.random.default_rng(5), n_query=300, n_gallery=3000,
                                                         dims=16).items() if name.endswith(("/emb", "/label"))}
    local = tmp_path_factory.mktemp("s3data") / "ds.zarr"
    ds.write_dataset(local, data, {"protocol": "class"}, chunk_rows=512)
    url = f"s3://{s3.bucket}/ds.zarr"
    ds.write_dataset(url, data, {"protocol": "class"}, chunk_rows=512, storage_options=s3.storage_options)
    return local, url


def names_under(s3, prefix: str) -> set[str]:
    return {k[len(prefix):] for k in s3.keys(prefix)}


def assert_same_report(a: dict, b: dict, tables=("per_query", "summary", "cmc")):
    for name in tables:
        assert a[name].equals(b[name]), name


def local_run(path, *cli_args) -> dict:
    """The same evaluation in this process, on the local copy, chunk after chunk (no cluster)."""
    from evalcore import api
    from evalcore.cli.main import build_parser
    from evalcore.jobs.common import evaluate_params

    args = build_parser().parse_args(["evaluate", str(path), "--out", "unused", *cli_args])
    result = api.evaluate(str(path), **evaluate_params(args))
    return {"per_query": result.per_query, "summary": result.summary, "cmc": result.cmc}


def test_s3_dataset_to_s3_report_equals_a_local_run(s3, dataset):
    local_ds, url = dataset
    out = f"s3://{s3.bucket}/reports/r1"
    # Only --storage-option leads to the server: the environment has no credentials and its
    # AWS_ENDPOINT_URL is a dead loopback port, so the options must win and must travel with the tasks
    # to the worker processes (which read the dataset themselves).
    remote = run("evaluate", url, "--out", out, "--workers", "1", "--threshold", "0.5", *s3.cli_options(),
                 env=s3.env(aws=False))
    assert remote.returncode == 0, remote.stderr
    assert "report written to" in remote.stdout

    assert names_under(s3, "reports/r1/") == EVALUATE_FILES
    got = report.read_report(out, s3.storage_options)
    assert_same_report(got, local_run(local_ds, "--threshold", "0.5"))
    assert got["run"]["dataset"] == url
    manifest = json.loads(s3.client().get_object(Bucket=s3.bucket, Key="reports/r1/manifest.json")["Body"].read())
    assert set(manifest["files"]) == EVALUATE_FILES - {"manifest.json"}

    # a report without its manifest (a run killed before the end) is refused by readers
    s3.client().delete_object(Bucket=s3.bucket, Key="reports/r1/manifest.json")
    assert not report.is_complete(out, s3.storage_options)
    with pytest.raises(InputError, match="incomplete"):
        report.read_report(out, s3.storage_options)
    shown = run("show", out, env=s3.env())  # endpoint and credentials from AWS_* this time
    assert shown.returncode == 2, shown.stderr
    assert "incomplete" in shown.stderr and "Traceback" not in shown.stderr


def test_an_existing_s3_report_is_refused_then_overwritten_without_stale_files(s3, dataset, tmp_path):
    _, url = dataset
    out = f"s3://{s3.bucket}/reports/r2"
    client = s3.client()
    report.write_report(out, {**_tables(3), "threshold_sweep": pa.table({"t": [0.1]})}, {"n": 1},
                        storage_options=s3.storage_options)
    old = names_under(s3, "reports/r2/")
    assert "threshold_sweep.parquet" in old
    client.put_object(Bucket=s3.bucket, Key="reports/r2-other/keep.txt", Body=b"a sibling, not part of r2")

    # endpoint and credentials from the environment only (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...)
    refused = run("evaluate", url, "--out", out, "--workers", "1", env=s3.env())
    assert refused.returncode == 2, refused.stderr
    assert "--overwrite" in refused.stderr
    assert names_under(s3, "reports/r2/") == old
    # a file evalcore did not write makes the folder not a report: --overwrite is refused, nothing deleted
    client.put_object(Bucket=s3.bucket, Key="reports/r2/notes.txt", Body=b"mine")
    refused = run("evaluate", url, "--out", out, "--workers", "1", "--overwrite", env=s3.env())
    assert refused.returncode == 2 and "notes.txt" in refused.stderr, refused.stderr
    assert names_under(s3, "reports/r2/") == old | {"notes.txt"}
    client.delete_object(Bucket=s3.bucket, Key="reports/r2/notes.txt")

    # ... on a cluster of `dask worker` processes, which get endpoint and credentials from their own
    # environment, as in deploy/ (nothing travels with the tasks: no --storage-option)
    with dask_processes(tmp_path, env=s3.env()) as cluster:
        done = run("evaluate", url, "--out", out, "--scheduler", cluster.address, "--overwrite", "--quiet",
                   env=s3.env())
        assert done.returncode == 0, done.stderr + cluster.log_tail()
    assert names_under(s3, "reports/r2/") == EVALUATE_FILES  # the old sweep is gone
    assert s3.keys("reports/r2-other/") == ["reports/r2-other/keep.txt"]
    got = report.read_report(out, s3.storage_options)
    assert "threshold_sweep" not in got
    assert got["per_query"].num_rows == 300


def _tables(n: int) -> dict:
    return {"per_query": pa.table({"query": list(range(n)), "ap": [0.5] * n}),
            "summary": pa.table({"group": ["all"], "map": [0.5]}),
            "cmc": pa.table({"group": ["all"], "rank": [1], "cmc": [0.5]})}


def test_an_interrupted_s3_overwrite_leaves_a_refused_report(s3, monkeypatch):
    out = f"s3://{s3.bucket}/reports/r3"
    opts = s3.storage_options
    report.write_report(out, {**_tables(3), "threshold_sweep": pa.table({"t": [0.1]})}, {"n": 1},
                        storage_options=opts)
    assert report.read_report(out, opts)["run"] == {"n": 1}
    with pytest.raises(InputError, match="--overwrite"):
        report.check_out(out, False, opts)
    report.check_out(f"s3://{s3.bucket}/reports/r", False, opts)  # a prefix of r3, not a folder holding it
    # --overwrite replaces report folders, never a bucket or a folder of folders (a dataset, other reports)
    with pytest.raises(InputError, match="whole bucket"):
        report.check_out(f"s3://{s3.bucket}", True, opts)
    with pytest.raises(InputError, match="not a report folder"):
        report.check_out(f"s3://{s3.bucket}/reports", True, opts)

    fs, _ = fsspec.core.url_to_fs(out, **opts)  # the instance report.py gets too (fsspec caches it)
    real, written = fs.pipe_file, []

    def crash_after_two(path, data, **kw):
        if len(written) == 2:
            raise ConnectionError("network gone")
        written.append(path)
        return real(path, data, **kw)

    monkeypatch.setattr(fs, "pipe_file", crash_after_two)
    with pytest.raises(ConnectionError):
        report.write_report(out, _tables(5), {"n": 2}, overwrite=True, storage_options=opts)
    monkeypatch.undo()
    assert len(written) == 2
    assert not report.is_complete(out, opts)
    with pytest.raises(InputError, match="incomplete"):
        report.read_report(out, opts)
    assert "threshold_sweep.parquet" not in names_under(s3, "reports/r3/")  # stale files went before new ones

    report.write_report(out, _tables(5), {"n": 3}, overwrite=True, storage_options=opts)
    got = report.read_report(out, opts)
    assert got["run"] == {"n": 3} and got["per_query"].num_rows == 5 and "threshold_sweep" not in got

    # a file replaced behind the manifest's back (a writer racing this reader) is refused, not mixed in
    s3.client().put_object(Bucket=s3.bucket, Key="reports/r3/per_query.parquet", Body=b"not the same file")
    with pytest.raises(InputError, match="per_query.parquet"):
        report.read_report(out, opts)


def test_nightly_reaches_s3_through_a_nested_storage_options_table(s3, dataset, tmp_path):
    """The job file's storage_options, client_kwargs a nested table, reach the server as a mapping (it used to
    be turned into the text "{'endpoint_url': ...}" and the run failed to reach the server)."""
    from s3server import KEY, REGION, SECRET

    local_ds, url = dataset
    job = tmp_path / "job.toml"
    job.write_text(f"""
reports = "{tmp_path / 'reports'}"
history = "{tmp_path / 'history'}"
[[evaluation]]
name = "on-s3"
dataset = "{url}"
ks = [1, 5]
storage_options = {{ key = "{KEY}", secret = "{SECRET}", client_kwargs = {{ endpoint_url = "{s3.endpoint}", region_name = "{REGION}" }} }}
""")
    result = run("nightly", job, "--date", "2025-02-01", "--quiet", env=s3.env(aws=False))
    assert result.returncode == 0, result.stderr
    got = report.read_report(tmp_path / "reports" / "2025-02-01" / "on-s3")
    assert_same_report(got, local_run(local_ds, "--ks", "1,5"))
