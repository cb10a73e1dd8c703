"""``faiss-json``: FAISS place-recognition results, an index file per side and a results file per query."""
from __future__ import annotations

import json
import math
import os

import numpy as np

from evalcore.core.coordinates import DEGREES
from evalcore.errors import InputError, foreign_reason, input_error, mention
from evalcore.io.importers.checks import check_coordinates
from evalcore.types import LIST_ITEMS, LIST_SCORES


def _load_json(path):
    name = str(path)
    if not os.path.isfile(path):
        raise input_error(name, "no such file")
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise input_error(name, f"line {exc.lineno}, column {exc.colno}: invalid JSON ({exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise input_error(name, f"cannot be read ({foreign_reason(exc)})") from None


def _json_id(value, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"{where}, field id: {value!r} is not a string")
    value = str(value)
    if not value:
        raise InputError(f"{where}, field id: empty id")
    return value


def _json_number(value, where: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}, field {field}: {value!r} is not a number")
    return float(value)


def _read_index(path, wrapper: str):
    """ids, lat, lon of a query or reference index file."""
    name = str(path)
    data = _load_json(path)
    if isinstance(data, dict):
        if wrapper not in data:
            raise input_error(name, f"expected a list of entries or an object with key {wrapper!r}")
        data = data[wrapper]
    if not isinstance(data, list):
        raise input_error(name, "expected a list of {\"id\", \"lat\", \"lon\"} entries")
    if not data:
        raise input_error(name, "no entries")
    ids, lat, lon = [], [], []
    seen: dict[str, int] = {}
    for i, entry in enumerate(data):
        where = f"{name}: entry {i}"
        if not isinstance(entry, dict):
            raise input_error(where, f"{entry!r} is not an object with id, lat, lon")
        for field in ("id", "lat", "lon"):
            if field not in entry:
                raise InputError(f"{where}, field {field}: missing")
        ident = _json_id(entry["id"], where)
        if ident in seen:
            raise InputError(f"{where}, field id: duplicate id {ident!r} (also entry {seen[ident]})")
        seen[ident] = i
        lat.append(_json_number(entry["lat"], where, "lat"))
        lon.append(_json_number(entry["lon"], where, "lon"))
        ids.append(ident)
    for field, values in (("lat", lat), ("lon", lon)):
        check_coordinates(values, f"{name}: field {field}", DEGREES[field], record="entry")
    return ids, np.asarray(lat, dtype=np.float64), np.asarray(lon, dtype=np.float64), seen


def _read_results(path, query_id: str, ref_pos: dict[str, int], n_ref: int, ref_name: str):
    """Gallery positions and scores (higher is better) of one results file, best first."""
    name = str(path)
    data = _load_json(path)
    if not isinstance(data, dict):
        raise input_error(name, "expected an object with \"results\" (or \"neighbors\" and \"scores\")")
    if "query" in data and str(data["query"]) != query_id:
        raise input_error(name, f"field query: {data['query']!r} differs from the file's query id {query_id!r}")
    items, scores = [], []
    if "results" in data:
        results = data["results"]
        if not isinstance(results, list):
            raise input_error(name, "field results: expected a list of {\"id\", \"score\"}")
        for j, entry in enumerate(results):
            where = f"{name}: results entry {j}"
            if not isinstance(entry, dict):
                raise input_error(where, f"{entry!r} is not an object with id and score")
            for field in ("id", "score"):
                if field not in entry:
                    raise InputError(f"{where}, field {field}: missing")
            ref = _json_id(entry["id"], where)
            if ref not in ref_pos:
                raise InputError(f"{where}, field id: unknown reference {ref!r} (not in {ref_name})")
            items.append(ref_pos[ref])
            scores.append((_json_number(entry["score"], where, "score"), where, "score"))
    elif "neighbors" in data:
        neighbors = data["neighbors"]
        which = [k for k in ("scores", "distances") if k in data]
        if len(which) != 1:
            raise input_error(name, "field " + mention("scores/distances") + ": give exactly one of \"scores\" or "
                             "\"distances\" with \"neighbors\"")
        field = which[0]
        values = data[field]
        if not isinstance(neighbors, list) or not isinstance(values, list):
            raise input_error(name, f"fields neighbors and {field} must be lists")
        if len(neighbors) != len(values):
            raise input_error(name, f"field {field}: {len(values)} values, but neighbors has {len(neighbors)}")
        sign = -1.0 if field == "distances" else 1.0
        for j, (ref, value) in enumerate(zip(neighbors, values)):
            where = f"{name}: neighbors entry {j}"
            if isinstance(ref, bool) or not isinstance(ref, (int, str)):
                raise InputError(f"{where}, field neighbors: {ref!r} is neither a reference position nor an id")
            if isinstance(ref, int):
                if ref == -1:  # FAISS pads missing neighbours with -1
                    continue
                if not 0 <= ref < n_ref:
                    raise InputError(f"{where}, field neighbors: position {ref} outside [0, {n_ref}) "
                                     f"of {ref_name}")
                items.append(ref)
            else:
                if ref not in ref_pos:
                    raise InputError(f"{where}, field neighbors: unknown reference {ref!r} (not in {ref_name})")
                items.append(ref_pos[ref])
            scores.append((sign * _json_number(value, f"{name}: {field} entry {j}", field),
                           f"{name}: {field} entry {j}", field))
    else:
        raise input_error(name, "field results missing (or give \"neighbors\" with \"scores\"/\"distances\")")
    for value, where, field in scores:
        if not math.isfinite(value):
            raise InputError(f"{where}, field {field}: {value!r} is not a finite number")
    seen: dict[int, int] = {}
    for j, item in enumerate(items):
        if item in seen:
            raise input_error(name, f"entry {j}: reference at position {item} listed twice "
                             f"(also entry {seen[item]})")
        seen[item] = j
    return items, [s[0] for s in scores]


def read_faiss_json(folder=None, *, query_index=None, reference_index=None, results_dir=None,
                    ) -> tuple[dict[str, np.ndarray], dict]:
    """FAISS place-recognition results: query/reference index JSON plus one results JSON per query."""
    if folder is None and not (query_index and reference_index and results_dir):
        raise InputError("faiss-json: give a folder, or all of " + mention("--query-index") + ", "
                         + mention("--reference-index") + ", " + mention("--results-dir"))
    if folder is not None and not os.path.isdir(folder):
        raise input_error(folder, "no such folder")
    query_index = query_index or os.path.join(folder, "query_index.json")
    reference_index = reference_index or os.path.join(folder, "reference_index.json")
    results_dir = results_dir or os.path.join(folder, "results")
    if not os.path.isdir(results_dir):
        raise input_error(results_dir, "no such folder (expected results/<query id>.json files)")
    qids, qlat, qlon, qpos = _read_index(query_index, "queries")
    gids, glat, glon, gpos = _read_index(reference_index, "references")
    ref_name = os.path.basename(str(reference_index))
    for entry in sorted(os.listdir(results_dir)):
        if entry.endswith(".json") and entry[:-5] not in qpos:
            raise input_error(os.path.join(results_dir, entry), f"no query {entry[:-5]!r} in {query_index}")
    rankings = []
    for i, qid in enumerate(qids):
        path = os.path.join(results_dir, qid + ".json")
        if os.sep in qid or (os.altsep and os.altsep in qid) or not os.path.isfile(path):
            raise input_error(path, f"no results file for query {qid!r} ({query_index} entry {i})")
        rankings.append(_read_results(path, qid, gpos, len(gids), ref_name))
    k = max(1, max(len(items) for items, _ in rankings))
    item = np.full((len(qids), k), -1, dtype=np.int64)
    score = np.full((len(qids), k), np.nan, dtype=np.float32)
    for i, (items, scores) in enumerate(rankings):
        item[i, :len(items)] = items
        score[i, :len(scores)] = scores
    arrays = {
        "query/key": np.asarray(qids, dtype=object), "query/lat": qlat, "query/lon": qlon,
        "gallery/key": np.asarray(gids, dtype=object), "gallery/lat": glat, "gallery/lon": glon,
        LIST_ITEMS: item, LIST_SCORES: score,
    }
    return arrays, {"protocol": "geo"}
