"""Issue 35, findings 13, 14 and part of 15: hostile input to the runners is one line and exit 2, before any work.

- nightly reads and checks its whole history before it writes anything (13);
- a --scheduler address that is not a Dask scheduler (an HTTP server, a silent
  listener, one that answers garbage or hangs up) is one line naming --scheduler
  within 30 s (14, 15);
- integer options too large for any evaluation, and a .npy header claiming more
  data than its file holds, are one line naming the option or the file (15).
"""
from __future__ import annotations

import contextlib
import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import random_reid

import evalcore
from evalcore.cli.main import main
from evalcore.errors import InputError
from evalcore.io import dataset as ds
from evalcore.io import history as h

CLI = [str(Path(sys.executable).with_name("evalcore"))]
HUGE = "99999999999999999999"  # 10^20: past what numpy's int64 holds


def run(*args, timeout=60, memory: int | None = None):
    """The real command in a subprocess (its own process group: whatever it starts is stopped with it),
    optionally with its address space capped at ``memory`` bytes."""
    def cap():
        if memory is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    proc = subprocess.Popen([*CLI, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "EVALCORE_DEBUG": ""}, start_new_session=True, preexec_fn=cap)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-runner")
    path = root / "ds.zarr"
    ds.write_dataset(path, random_reid(np.random.default_rng(35), n_query=30, n_gallery=120, dims=8, n_ids=10),
                     {"protocol": "reid"})
    return path


# --------------------------------------------------------------------------- 13: nightly's history


def _job(tmp_path: Path, dataset: Path, gates: str) -> Path:
    job = tmp_path / "job.toml"
    job.write_text(f"""
reports = "{tmp_path / 'reports'}"
history = "{tmp_path / 'history'}"

[[evaluation]]
name = "small"
dataset = "{dataset}"
ks = [1, 5]

{gates}
""")
    return job


def _listing(root: Path) -> dict[str, bytes]:
    """Every file and its bytes; the history's empty lock file (taken to read it) aside."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != h.LOCK}


OLD_SUMMARY = pa.table({"group": ["all"], "n_queries": [30], "map": [0.5], "hit_at_1": [0.6]})


def _corrupt_summary(history: Path) -> Path:
    h.write_run(history, "2026-01-01", "small", OLD_SUMMARY)
    bad = history / "small" / "2026-01-02.parquet"
    bad.write_bytes(b"PAR1 this is not a Parquet file")
    return bad


def _summary_without_run_date(history: Path) -> Path:
    bad = history / "small" / "2026-01-02.parquet"
    bad.parent.mkdir(parents=True)
    h.atomic_write(bad, pa.table({"group": ["all"], "map": [0.5]}))  # readable, but no run_date or evaluation
    return bad


def _corrupt_per_query(history: Path) -> Path:
    h.write_run(history, "2026-01-02", "small", OLD_SUMMARY)  # the previous run: its summary is fine
    bad = h.per_query_path(history, "2026-01-02", "small")
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"\x00" * 64)
    return bad


@pytest.mark.parametrize("corrupt, gates", [
    (_corrupt_summary, "[gates.map]\nmax_drop_previous = 0.01\n"),
    (_summary_without_run_date, "[gates.map]\nmax_drop_previous = 0.01\n"),
    (_corrupt_per_query, "[gates.map]\nmax_drop_previous = 0.01\nsignificance = 0.05\n"),
])
def test_nightly_with_a_bad_history_file_writes_nothing(dataset, tmp_path, capsys, corrupt, gates):
    job = _job(tmp_path, dataset, gates)
    bad = corrupt(tmp_path / "history")
    before = _listing(tmp_path / "history")

    assert main(["nightly", str(job), "--date", "2026-01-03"]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"evalcore: error: history {bad}:"), line
    assert not (tmp_path / "reports").exists()  # no report, no trend page: an ungated run is never "previous"
    assert _listing(tmp_path / "history") == before  # no entry for 2026-01-03, the rest untouched


# --------------------------------------------------------------------------- 14, 15: --scheduler


@contextlib.contextmanager
def listener(behave):
    """A loopback TCP server whose every connection is handled by ``behave(conn)`` in a thread; yields its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=behave, args=(conn, stop), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        server.close()


def _garbage(conn, stop):
    with conn, contextlib.suppress(OSError):
        conn.sendall(b"\xff" * 64 + b"hello, I am not Dask\n" * 8)
        stop.wait(60)


def _small_garbage(conn, stop):  # a size a Dask reader would believe: 2^32 bytes, then nothing
    with conn, contextlib.suppress(OSError):
        conn.sendall((2 ** 32).to_bytes(8, "little") + b"\x01" * 16)
        stop.wait(60)


def _silent(conn, stop):
    with conn:
        stop.wait(60)


def _hangs_up(conn, stop):
    conn.close()


@contextlib.contextmanager
def http_server():
    """Python's own HTTP server: it waits for a request line, so to a Dask client it is a silent listener."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("endpoint", ["garbage", "small-garbage", "hangs-up", "silent", "http"])
def test_a_scheduler_address_that_is_not_dask_is_one_line_within_30_s(dataset, tmp_path, endpoint):
    servers = {"garbage": lambda: listener(_garbage), "small-garbage": lambda: listener(_small_garbage),
               "hangs-up": lambda: listener(_hangs_up), "silent": lambda: listener(_silent), "http": http_server}
    out = tmp_path / "out"
    with servers[endpoint]() as port:
        address = f"tcp://127.0.0.1:{port}"
        started = time.monotonic()
        result = run("evaluate", dataset, "--out", out, "--scheduler", address, timeout=45, memory=3 * 2 ** 30)
        elapsed = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert line.startswith(f"evalcore: error: --scheduler: {address} "), line
    assert "not a Dask scheduler" in line, line
    assert elapsed < 30, elapsed
    assert not out.exists()


def test_the_handshake_check_passes_a_real_scheduler_and_bounds_a_silent_one():
    from distributed import LocalCluster

    from evalcore.engine.cluster import check_scheduler_answers

    with LocalCluster(n_workers=0, processes=True, dashboard_address=None,
                      scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}) as cluster:
        check_scheduler_answers(cluster.scheduler_address)  # no error: Dask's greeting
    with listener(_silent) as port:
        started = time.monotonic()
        with pytest.raises(InputError, match="sent no Dask greeting within 0.5 s"):
            check_scheduler_answers(f"tcp://127.0.0.1:{port}", greeting_timeout=0.5)
        assert time.monotonic() - started < 5


def test_a_nightly_job_names_its_scheduler_key(dataset, tmp_path, capsys):
    with listener(_garbage) as port:
        job = _job(tmp_path, dataset, "")
        job.write_text(f'scheduler = "tcp://127.0.0.1:{port}"\n' + job.read_text())
        assert main(["nightly", str(job), "--date", "2026-01-03"]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"evalcore: error: {job}: scheduler: tcp://127.0.0.1:{port} is not a Dask scheduler"), line
    assert not (tmp_path / "reports").exists() and not (tmp_path / "history").exists()


# --------------------------------------------------------------------------- 15: integer options


@pytest.mark.parametrize("option, value", [
    ("--map-at", HUGE), ("--ks", f"1,{HUGE}"), ("--max-rank", HUGE), ("--depth", HUGE), ("--rel-level", HUGE),
    ("--chunk-rows", HUGE), ("--gallery-shards", HUGE), ("--map-at", str(2 ** 31)),
])
def test_an_integer_option_too_large_is_one_line(dataset, tmp_path, capsys, option, value):
    out = tmp_path / "out"
    assert main(["evaluate", str(dataset), "--out", str(out), option, value]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"evalcore: error: {option}: {value.split(',')[-1]} is too large: at most 2,147,483,647"), \
        line
    assert not out.exists()


@pytest.mark.parametrize("value", ["1e400", f"{HUGE}TiB"])
def test_a_memory_limit_too_large_is_one_line(dataset, tmp_path, capsys, value):
    out = tmp_path / "out"
    assert main(["evaluate", str(dataset), "--out", str(out), "--memory-limit", value]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"evalcore: error: --memory-limit: '{value}' "), line
    assert not out.exists()


def test_more_workers_than_the_memory_can_start_is_one_line(dataset, tmp_path):
    from distributed.system import MEMORY_LIMIT

    from evalcore.engine.cluster import IDLE_WORKER_MEMORY

    out = tmp_path / "out"
    too_many = MEMORY_LIMIT // IDLE_WORKER_MEMORY + 1  # each idle worker process holds ~300 MiB
    for value in (HUGE, str(too_many)):
        result = run("evaluate", dataset, "--out", out, "--workers", value, timeout=30)
        assert result.returncode == 2, result.stderr
        line = one_line(result.stderr)
        assert line.startswith(f"evalcore: error: --workers: {value} worker processes cannot start here"), line
        assert not out.exists()


def test_the_api_and_a_job_file_bound_them_too(dataset, tmp_path, capsys):
    with pytest.raises(InputError, match=r"^map_at: 100000000000000000000 is too large"):
        evalcore.evaluate(str(dataset), map_at=10 ** 20)
    with pytest.raises(InputError, match=r"^ks: an integer of 13288 bits is too large"):
        evalcore.evaluate(str(dataset), ks=(1, 10 ** 4000))
    job = _job(tmp_path, dataset, "")
    job.write_text(job.read_text().replace("ks = [1, 5]", "ks = [1, 5]\nmap_at = 9223372036854775807"))
    assert main(["nightly", str(job), "--date", "2026-01-03"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "evaluation 'small': map_at 9223372036854775807 is too large" in line, line
    assert not (tmp_path / "reports").exists()


# --------------------------------------------------------------------------- 15: a .npy header that lies


def _lying_npy(path: Path, shape, descr="<f4", data=b"\0" * 64) -> bytes:
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": descr, "fortran_order": False, "shape": shape})
        fh.write(data)
    return path.read_bytes()


def _npy_files(root: Path) -> dict[str, Path]:
    files = {"gallery-features": root / "gf.npy", "query-ids": root / "qp.npy", "gallery-ids": root / "gp.npy"}
    np.save(files["gallery-features"], np.eye(4, dtype=np.float32))
    np.save(files["query-ids"], np.arange(4))
    np.save(files["gallery-ids"], np.arange(4))
    return files


def test_a_npy_header_claiming_more_rows_than_its_file_is_one_line(tmp_path):
    files = _npy_files(tmp_path)
    qf = tmp_path / "qf.npy"
    _lying_npy(qf, (10 ** 12, 4))  # 16 TB claimed, 64 bytes there
    out = tmp_path / "out.zarr"
    args = [f"--{k}={v}" for k, v in files.items()]
    result = run("import", "npy", "--out", out, f"--query-features={qf}", *args, memory=2 * 2 ** 30)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert line.startswith(f"evalcore: error: {qf}: the .npy header claims shape (1000000000000, 4) of float32"), line
    assert "--memory-limit" not in line
    assert not out.exists()


def test_a_npz_member_header_claiming_more_than_the_member_is_one_line(tmp_path):
    import io
    import zipfile

    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(member, {"descr": "<f4", "fortran_order": False, "shape": (10 ** 12, 4)})
    member.write(b"\0" * 64)
    npz = tmp_path / "bad.npz"
    with zipfile.ZipFile(npz, "w") as z:
        z.writestr("qf.npy", member.getvalue())
        for key, array in {"gf": np.eye(4, dtype=np.float32), "q_pids": np.arange(4), "g_pids": np.arange(4)}.items():
            buf = io.BytesIO()
            np.save(buf, array)
            z.writestr(f"{key}.npy", buf.getvalue())
    out = tmp_path / "out.zarr"
    result = run("import", "npy", npz, "--out", out, memory=2 * 2 ** 30)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert line.startswith(f"evalcore: error: {npz}: key qf: the .npy header claims shape (1000000000000, 4)"), line
    assert not out.exists()


def test_the_header_check_against_numpy_save(tmp_path):
    """Every array numpy.save writes passes (its data is exactly what the header claims); one byte short fails."""
    from evalcore.io.npy import check_npy_file

    for array in (np.ones((5, 3), np.float32), np.arange(7), np.zeros((0, 4)), np.ones((2, 3), order="F"),
                  np.array(3.5), np.ones((2, 2), ">f8")):
        path = tmp_path / "a.npy"
        np.save(path, array)
        header = check_npy_file("a.npy", path)
        assert header is not None and header.shape == array.shape and header.dtype == array.dtype
        assert header.offset + header.data_bytes == path.stat().st_size
        if array.size:
            path.write_bytes(path.read_bytes()[:-1])
            with pytest.raises(InputError, match=r"^a\.npy: the \.npy header claims"):
                check_npy_file("a.npy", path)
