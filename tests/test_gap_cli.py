"""``evalcore gap SOLUTION PREDICTIONS``: GLDv2's CSV files (issue 38 / CONTRACT §18).

The files hold the GLDv2 reference's own test data (tensorflow/models,
research/delf/delf/python/datasets/google_landmarks_dataset/metrics_test.py,
_CreateRecognitionSolution/_CreateRecognitionPredictions), written in the
challenge's CSV layout (dataset_file_io.py's ReadSolution/ReadPredictions);
expected: its GAP 0.166667, 0.333333 ignoring non-landmark images, top-1 0.333333.
"""
from __future__ import annotations

import pytest

from evalcore.cli.main import main

SOLUTION = """id,landmarks,Usage
0123456789abcdef,0 12,Public
0223456789abcdef,100 200 300,Public
0323456789abcdef,1,Public
0423456789abcdef,,Public
0523456789abcdef,,Public
0623456789abcdef,5,Ignored
0723456789abcdef,7,Private
"""
PREDICTIONS = """id,landmarks
0223456789abcdef,0 0.01
0323456789abcdef,1 10.0
0423456789abcdef,150 15.0
0623456789abcdef,5 99.0
0723456789abcdef,7 0.5
0123456789abcdef,
"""


def files(tmp_path, solution=SOLUTION, predictions=PREDICTIONS):
    s, p = tmp_path / "solution.csv", tmp_path / "predictions.csv"
    s.write_text(solution)
    p.write_text(predictions)
    return str(s), str(p)


def test_published_values_per_subset(tmp_path, capsys):
    assert main(["gap", *files(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["public", "gap", "0.166667", "top1_accuracy", "0.333333", "images", "5",
                                "landmark_images", "3"]
    assert lines[1].split()[:5] == ["private", "gap", "1.000000", "top1_accuracy", "1.000000"]


def test_published_value_ignoring_non_landmark_images(tmp_path, capsys):
    assert main(["gap", *files(tmp_path), "--ignore-non-landmark"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split()[2] == "0.333333"


@pytest.mark.parametrize("solution, predictions, says", [
    (SOLUTION, PREDICTIONS + "0323456789abcdef,1 3.0\n", "predictions.csv: line 8: image '0323456789abcdef' is repeated"),
    (SOLUTION, PREDICTIONS + "ffff,1 3.0\n", "predictions.csv: line 8: image 'ffff' is not in the solution"),
    (SOLUTION, "id,landmarks\n0323456789abcdef,1 nan\n", "predictions.csv: line 2: score 'nan' is not a finite"),
    (SOLUTION, "id,landmarks\n0323456789abcdef,1\n", "predictions.csv: line 2: 1 values in landmarks"),
    (SOLUTION, "id,landmarks\n0323456789abcdef,x 1.0\n", "predictions.csv: line 2: landmark 'x' is not an integer"),
    (SOLUTION.replace("Private", "Secret"), PREDICTIONS, "solution.csv: line 8: Usage 'Secret' is not"),
    ("id,landmarks,Usage\na,,Public\n", "id,landmarks\n", "solution.csv: no Public or Private image has a landmark"),
    ("id,landmarks,Usage\na,1\n", "id,landmarks\n", "solution.csv: line 2: 2 fields"),
    ("id,landmarks,Usage\na,\"" + "1" * 200_000 + "\",Public\n", "id,landmarks\n", "solution.csv: not a readable CSV"),
])
def test_bad_files_are_one_line_naming_the_file(tmp_path, capsys, solution, predictions, says):
    assert main(["gap", *files(tmp_path, solution, predictions)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and says in err and err.startswith("evalcore: error: " + str(tmp_path))


def test_the_csv_field_limit_is_put_back(tmp_path, capsys):
    import csv
    before = csv.field_size_limit(1 << 24)
    try:
        assert main(["gap", *files(tmp_path)]) == 0
        assert csv.field_size_limit() == 1 << 24
    finally:
        csv.field_size_limit(before)


def test_a_missing_file(tmp_path, capsys):
    assert main(["gap", str(tmp_path / "none.csv"), str(tmp_path / "p.csv")]) == 2
    assert "none.csv: cannot be read" in capsys.readouterr().err
