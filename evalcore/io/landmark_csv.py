"""The Google Landmark Recognition challenge's CSV files, read into the mappings ``evalcore.gap`` takes.

Solution: a header, then ``id,landmarks,Usage`` rows; ``landmarks`` is empty
(a non-landmark image) or landmark ids separated by spaces; ``Usage`` is
Public, Private or Ignored (left out of scoring). Predictions: a header, then
``id,landmarks`` rows with ``landmarks`` = "LANDMARK SCORE" or empty (no
prediction). As the GLDv2 reference reads them: landmark ids are integers; a
repeated or unknown prediction id is an error. Every problem is an InputError
naming the file and line; files are bounded before they are read.
"""
from __future__ import annotations

import csv
import math
import os

from evalcore.errors import foreign_reason, input_error

#: the largest file read (GLDv2's solution is ~10 MB; a submission ~5 MB)
MAX_FILE_BYTES = 1 << 30
#: the longest field (a landmark list); csv's own default
MAX_FIELD_CHARS = 131072
USAGES = ("Public", "Private", "Ignored")


def _rows(path: str):
    """(line number, row) after the header; the file's size checked before reading."""
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise input_error(path, f"cannot be read ({exc.strerror or exc})") from None
    if size > MAX_FILE_BYTES:
        raise input_error(path, f"{size:,} bytes, more than the {MAX_FILE_BYTES:,} evalcore reads")
    previous = csv.field_size_limit(MAX_FIELD_CHARS)  # a process-wide setting: put back when done
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            next(reader, None)  # the header
            for row in reader:
                yield reader.line_num, row
    except csv.Error as exc:
        raise input_error(path, f"not a readable CSV file ({foreign_reason(exc)})") from None
    except UnicodeDecodeError:
        raise input_error(path, "not UTF-8 text") from None
    except OSError as exc:
        raise input_error(path, f"cannot be read ({exc.strerror or exc})") from None
    finally:
        csv.field_size_limit(previous)


def _landmark(path: str, line: int, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise input_error(path, f"line {line}: landmark {text[:40]!r} is not an integer") from None


def read_solution(path: str) -> tuple[dict[str, dict[str, set[int]]], set[str]]:
    """({"Public": {id: landmarks}, "Private": {...}}, ignored ids)."""
    subsets: dict[str, dict[str, set[int]]] = {"Public": {}, "Private": {}}
    ignored: set[str] = set()
    for line, row in _rows(path):
        if not row:
            continue
        if len(row) < 3:
            raise input_error(path, f"line {line}: {len(row)} fields; expected id,landmarks,Usage")
        image, landmarks, usage = row[0], row[1], row[2]
        if usage not in USAGES:
            raise input_error(path, f"line {line}: Usage {usage[:40]!r} is not Public, Private or Ignored")
        if image in ignored or any(image in s for s in subsets.values()):
            raise input_error(path, f"line {line}: image {image[:40]!r} is repeated")
        if usage == "Ignored":
            ignored.add(image)
        else:
            subsets[usage][image] = {_landmark(path, line, t) for t in landmarks.split()}
    return subsets, ignored


def read_predictions(path: str, known: set[str], ignored: set[str]) -> dict[str, tuple[int, float]]:
    """{id: (landmark, score)} for the images of ``known``; ignored images' rows are skipped."""
    out: dict[str, tuple[int, float]] = {}
    seen: set[str] = set()
    for line, row in _rows(path):
        if not row:
            continue
        image = row[0]
        if image in seen:
            raise input_error(path, f"line {line}: image {image[:40]!r} is repeated")
        seen.add(image)
        if image in ignored:
            continue
        if image not in known:
            raise input_error(path, f"line {line}: image {image[:40]!r} is not in the solution")
        fields = row[1].split() if len(row) > 1 else []
        if not fields:
            continue
        if len(fields) != 2:
            raise input_error(path, f"line {line}: {len(fields)} values in landmarks; expected 'LANDMARK SCORE'")
        try:
            score = float(fields[1])
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise input_error(path, f"line {line}: score {fields[1][:40]!r} is not a finite number")
        out[image] = (_landmark(path, line, fields[0]), score)
    return out
