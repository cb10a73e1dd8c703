"""evalcore bench --shape first-run: its option checks (the figures themselves are measured, never timed in tests)."""
from __future__ import annotations

import pytest

from evalcore.cli.main import main
from evalcore.jobs import bench_first_run


def test_first_run_installs_the_checkout_the_command_runs_from():
    root = bench_first_run.checkout()
    assert (root / "pyproject.toml").is_file() and (root / "evalcore" / "jobs" / "bench_first_run.py").is_file()


@pytest.mark.parametrize("repeat", ["0", "-1", "x"])
def test_a_bad_repeat_is_refused_before_anything_is_installed(repeat, capsys, tmp_path, monkeypatch):
    made = []
    monkeypatch.setattr(bench_first_run, "timed_install", lambda *a: made.append(a) or 0.0)
    assert main(["bench", "--shape", "first-run", "--repeat", repeat]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("evalcore: error: --repeat") and not made
