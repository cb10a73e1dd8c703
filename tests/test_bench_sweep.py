"""``evalcore bench --sweep`` end to end on tiny sizes: the table, its CSV and SVG, and bad options (exit 2).

No timing is asserted: only that every row is there, numeric, and
self-consistent (the ratio is the row's own evaluate / floor).
"""
import csv
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

CLI = [str(Path(sys.executable).with_name("evalcore"))]
TINY = ["--sizes", "2000,4000", "--queries", "200", "--dims", "16", "--workers-list", "1"]
HEADINGS = ["Q", "G", "D", "workers", "shards", "evaluate s", "floor s", "ratio", "peak MiB", "sum MiB"]
SVG = "{http://www.w3.org/2000/svg}"


def run(*args, env=None, timeout=120):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "EVALCORE_DEBUG": "", **(env or {})})


def table_rows(stdout: str) -> list[list[float]]:
    """The cost table's rows as numbers: the lines under the heading, up to the blank line."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:3] == ["Q", "G", "D"])
    assert lines[start].replace("evaluate s", "evaluate_s").replace("floor s", "floor_s").replace(
        "peak MiB", "peak_MiB").replace("sum MiB", "sum_MiB").split() == [h.replace(" ", "_") for h in HEADINGS]
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        cells = line.split()
        assert len(cells) == len(HEADINGS), line
        rows.append([float(c.replace(",", "")) for c in cells])
    return rows


def close(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b))


@pytest.mark.cluster
def test_sweep_prints_one_row_per_size_and_writes_matching_csv_and_svg(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out_csv, out_svg = tmp_path / "sweep.csv", tmp_path / "sweep.svg"
    done = run("bench", "--sweep", *TINY, "--csv", out_csv, "--plot", out_svg, env={"TMPDIR": str(scratch)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr

    rows = table_rows(done.stdout)
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [(200, 2000, 16, 1), (200, 4000, 16, 1)]
    for *_, shards, t_eval, t_floor, ratio, peak, total in rows:
        assert shards >= 1 and t_eval > 0 and t_floor > 0 and peak > 0 and total >= peak
        # both seconds printed to 4 significant digits, the ratio to 2 decimals
        assert abs(ratio - t_eval / t_floor) <= 2e-3 * ratio + 0.01, (ratio, t_eval, t_floor)

    with open(out_csv, newline="") as f:
        records = list(csv.DictReader(f))
    assert len(records) == len(rows)
    for record, row in zip(records, rows):
        assert [int(record[k]) for k in ("queries", "gallery", "dims", "workers", "gallery_shards")] == row[:5]
        t_eval, t_floor, ratio = (float(record[k]) for k in ("evaluate_s", "floor_s", "ratio"))
        assert t_eval > 0 and t_floor > 0
        assert close(ratio, t_eval / t_floor, 1e-4)
        assert close(t_eval, row[5], 1e-3) and close(t_floor, row[6], 1e-3) and close(ratio, row[7], 1e-3)
        assert int(record["qgd"]) == 200 * int(record["gallery"]) * 16
        assert 0 <= float(record["map"]) <= 1 and float(record["generate_s"]) >= 0

    root = ET.parse(out_svg).getroot()
    assert root.tag == f"{SVG}svg"
    assert len(root.findall(f".//{SVG}polyline")) == 3  # the ratio, evaluate's seconds and the floor's
    # the generated datasets went with the temporary folder (dask keeps its own scratch space there)
    assert [p.name for p in scratch.iterdir() if p.name.startswith("evalcore")] == []

    bars = done.stdout.split("evaluate / floor (the full bar is", 1)[1].splitlines()[1:3]
    assert all("#" in line for line in bars)


@pytest.mark.cluster
def test_sweep_reuses_the_datasets_in_data_dir(tmp_path):
    args = ["bench", "--sweep", "--sizes", "2000", "--queries", "200", "--dims", "16", "--workers", "1",
            "--data-dir", tmp_path]
    first = run(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "generated clustered data" in first.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep-q200-g2000-d16.zarr"]
    again = run(*args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"reusing {tmp_path / 'sweep-q200-g2000-d16.zarr'}" in again.stdout
    assert len(table_rows(again.stdout)) == 1


@pytest.mark.parametrize("args, option", [
    (["--sweep", "--sizes", "100k,lots"], "--sizes"),
    (["--sweep", "--sizes", "0"], "--sizes"),
    (["--sweep", "--sizes", "1000,,2000"], "--sizes"),
    (["--sizes", "1000"], "--sizes"),                      # a sweep option without --sweep
    (["--sweep", "--workers-list", "1,x"], "--workers-list"),
    (["--sweep", "--queries", "1,2"], "--queries"),
    (["--sweep", "--plot", "chart.png"], "--plot"),
    (["--sweep", "--memory-limit", "lots"], "--memory-limit"),
    (["--workers", "1,2"], "--workers"),                  # one shape: one worker count
])
def test_a_bad_option_exits_2_with_one_line_naming_it(tmp_path, args, option):
    done = run("bench", *args, "--data-dir", tmp_path / "data")
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"evalcore: error: {option}:"), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not (tmp_path / "data").exists()  # refused before any work
