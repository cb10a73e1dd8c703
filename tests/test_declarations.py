"""Options declared once (evalcore.declarations): the command line, the job file, the API and run.json agree.

The names are checked across four independent surfaces (the evaluate parser's
actions, the job file's allowed keys, ``evalcore.evaluate``'s signature,
``Options``' fields) against the declarations, with the exceptions the
declarations themselves state (execution-only and Python-only options). The
compare warning is checked on real runs, made by ``evalcore.evaluate``, that
differ only in one option.
"""
from __future__ import annotations

import dataclasses
import inspect
import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest

import evalcore
from evalcore import api, declarations
from evalcore.cli.main import build_parser
from evalcore.declarations import DECLARATIONS
from evalcore.engine.options import Options
from evalcore.errors import InputError
from evalcore.io import dataset as ds
from evalcore.jobs import nightly

# the evaluate command's own flags (where its report goes, how it talks), not evaluation options
EVALUATE_OWN = {"--out", "--overwrite", "--quiet", "--help"}
# the job file's own keys (what it runs and how it gates), not evaluation options
JOB_OWN_EVALUATION = {"name", "dataset", "gates"}
JOB_OWN_TOP = {"reports", "history", "trend_metrics", "evaluation", "gates", "baseline"}


def evaluate_parser():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices["evaluate"]


def evaluate_parameters() -> dict[str, inspect.Parameter]:
    """evalcore.evaluate's keyword options: its parameters less the data (a dataset or the arrays)."""
    # the data: arrays, or judgements matched to them by id where the API takes them (BEIR's layout)
    data = {"source", *api.ARRAY_PARAMETERS, api.DISTANCES, *getattr(api, "QRELS_PARAMETERS", ())}
    return {n: p for n, p in inspect.signature(evalcore.evaluate).parameters.items() if n not in data}


# --------------------------------------------------------------------------- one list of names


def test_command_line_job_file_api_and_declarations_name_the_same_options():
    flags = {s for a in evaluate_parser()._actions for s in a.option_strings if s.startswith("--")} - EVALUATE_OWN
    assert flags == {d.flag for d in DECLARATIONS if d.flag}
    assert set(evaluate_parameters()) == {d.name for d in DECLARATIONS if d.api}
    assert nightly.EVALUATION_KEYS - JOB_OWN_EVALUATION == {d.name for d in DECLARATIONS if d.job == "evaluation"}
    assert nightly.TOP_KEYS - JOB_OWN_TOP == {d.name for d in DECLARATIONS if d.job == "top"}
    # the exceptions, as declared: Python alone (a client, callbacks), the command line alone (a scheduler address),
    # not in a job file (the intervals, gallery shards)
    assert {d.name for d in DECLARATIONS if not d.flag} == {"client", "on_chunk", "on_progress"}
    assert {d.name for d in DECLARATIONS if not d.api} == {"scheduler"}
    assert {d.name for d in DECLARATIONS if d.job is None} == {"client", "on_chunk", "on_progress", "ci",
                                                                 "resamples", "seed", "gallery_shards"}
    # every engine option is declared, and declared as an evaluation option
    engine = {f.name for f in dataclasses.fields(Options)}
    assert engine <= {d.name for d in DECLARATIONS if d.part == "evaluation"}


def test_every_parameter_of_evaluate_is_documented_and_the_options_from_their_declarations():
    doc = evalcore.evaluate.__doc__
    undocumented = [n for n in inspect.signature(evalcore.evaluate).parameters if f"``{n}" not in doc]
    assert undocumented == []
    # each declared option with a help text is one entry of the generated section: default, flag and help
    for d in DECLARATIONS:
        if d.api and d.help:
            entry = " ".join(doc[doc.index(f"- ``{d.name}={d.default!r}``"):].split("\n    - ")[0].split())
            assert entry.startswith(f"- ``{d.name}={d.default!r}`` (``{d.flag}``): {' '.join(d.help.split())}"), d.name


def test_the_signature_of_evaluate_writes_each_option_s_declared_type():
    parameters = evaluate_parameters()
    assert {n: p.annotation for n, p in parameters.items()} == {d.name: d.type for d in DECLARATIONS if d.api}
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values())


def test_the_reference_table_of_evalcore_readme_has_a_row_for_each_declared_flag():
    # evalcore/README.md, Command line: the table under the usage block, one row a flag (or two: --resamples, --seed)
    text = (Path(evalcore.__file__).parent / "README.md").read_text()
    rows = itertools.takewhile(lambda line: line.startswith("|"),
                               text[text.index("| option | meaning |"):].splitlines()[2:])
    flags = {flag for row in rows for flag in re.findall(r"--[a-z][a-z-]*", row.split("|")[1])}
    assert flags - EVALUATE_OWN == {d.flag for d in DECLARATIONS if d.flag}


def test_each_flag_is_written_as_declared():
    actions = {a.option_strings[-1]: a for a in evaluate_parser()._actions if a.option_strings}
    for d in DECLARATIONS:
        if not d.flag:
            continue
        a = actions[d.flag]
        assert a.help == d.help, d.name
        assert a.metavar == d.metavar, d.name
        expected_default = False if d.action == "store_true" else d.cli_default
        assert a.default == expected_default, d.name
        choices = d.constraint.values if isinstance(d.constraint, declarations.Choice) else None
        assert (tuple(a.choices) if a.choices else None) == choices, d.name


#: a value other than the default for the options whose constraint does not say how its text reads (Checked):
#: (flag text, the value the engine gets); the others' samples come from their constraints below
CHECKED_SAMPLES = {"ks": ("2,4", (2, 4)), "metrics": ("map,recall@5", ("map", "recall@5")),
                   "rerank": ("", (20, 6, 0.3)), "query_expansion": ("2,3", (2, 3.0)),
                   "database_augmentation": ("1,0.5", (1, 0.5)), "ci": ("0.9", 0.9), "resamples": ("100", 100),
                   "seed": ("5", 5)}


def sample(d: declarations.Declaration) -> tuple[list[str], object]:
    """The command-line words giving ``d`` a value other than its default, and that value, from its declaration."""
    if d.name in CHECKED_SAMPLES:
        text, value = CHECKED_SAMPLES[d.name]
        return [f"{d.flag}={text}"] if d.nargs == "?" else [str(d.flag), text], value
    c = d.constraint
    if isinstance(c, declarations.Switch):
        return [str(d.flag)], True
    if isinstance(c, declarations.Choice):
        value = next(v for v in reversed(c.values) if v != d.default)
        return [str(d.flag), value], value
    if isinstance(c, declarations.PositiveInteger):
        return [str(d.flag), "7"], 7
    if isinstance(c, (declarations.Number, declarations.Fraction)):
        return [str(d.flag), "0.25"], 0.25
    raise AssertionError(f"{d.name}: no sample; add one to CHECKED_SAMPLES")


@pytest.mark.parametrize("d", [d for d in DECLARATIONS if d.part == "evaluation" and d.flag],
                         ids=lambda d: d.name)
def test_every_declared_flag_reaches_the_evaluation_with_its_value(d):
    # the command line's options are read from the declarations (jobs.common.spec_from_args), so an option
    # declared with a flag arrives in evaluate's keyword arguments without a line of its own there
    from evalcore.jobs.common import spec_from_args

    words, value = sample(d)
    args = evaluate_parser().parse_args(["dataset.zarr", "--out", "report", *words])
    kwargs = spec_from_args(args).evaluate_kwargs()
    assert kwargs[d.name] == value
    # and the others keep their declared defaults
    defaults = spec_from_args(evaluate_parser().parse_args(["dataset.zarr", "--out", "report"])).evaluate_kwargs()
    for other in kwargs:
        if other != d.name:
            assert kwargs[other] == defaults[other] == _engine_default(other), other


def _engine_default(name: str) -> object:
    default = declarations.declared(name).default
    return tuple(default) if isinstance(default, list) else default


def test_api_defaults_are_the_declared_defaults():
    for name, p in evaluate_parameters().items():
        assert p.kind is inspect.Parameter.KEYWORD_ONLY, name
        assert p.default == declarations.declared(name).default, name


def test_engine_options_default_to_the_declared_defaults():
    # protocol and similarity: declared None (the dataset's attribute); the engine's fallback is class, cosine
    for f in dataclasses.fields(Options):
        if f.name not in ("protocol", "similarity"):
            assert f.default == declarations.declared(f.name).default, f.name


def test_which_protocols_take_an_option_is_what_the_protocols_say():
    from evalcore.core import protocols

    for name, attribute in (("radius", "takes_radius"), ("judged_only", "takes_judged_only")):
        taking = tuple(p for p in protocols.names() if getattr(protocols.get(p), attribute))
        assert declarations.declared(name).protocols == taking


# --------------------------------------------------------------------------- checks generated from the constraints


INTEGER_OPTIONS = [d for d in DECLARATIONS if isinstance(d.constraint, declarations.PositiveInteger)]


@pytest.mark.parametrize("d", INTEGER_OPTIONS, ids=lambda d: d.name)
@pytest.mark.parametrize("bad, word", [(0, "must be a positive integer"), (2.5, "must be a positive integer"),
                                       (2 ** 31, "is too large: at most 2,147,483,647")])
def test_integer_options_are_refused_alike_everywhere(tmp_path, d, bad, word):
    if d.name in {f.name for f in dataclasses.fields(Options)}:
        with pytest.raises(InputError, match=f"^{d.flag}: {bad} {word}$"):
            Options(**{d.name: bad}).checked()
    if d.job == "evaluation":
        job = tmp_path / "job.toml"
        job.write_text(f'reports = "r"\nhistory = "h"\n[[evaluation]]\nname = "a"\ndataset = "d.zarr"\n'
                       f'{d.name} = {bad}\n')
        expected = word if bad != 2.5 else "must be a positive integer"
        with pytest.raises(InputError, match=f"evaluation 'a': {d.name} {bad} {expected}$"):
            nightly.load_job(job)


@pytest.mark.parametrize("d", [d for d in DECLARATIONS if isinstance(d.constraint, declarations.Choice)],
                         ids=lambda d: d.name)
def test_choice_options_are_refused_by_the_parser_and_the_job_file(tmp_path, d):
    with pytest.raises(InputError, match=f"^{d.flag}: unknown value 'nope'; choose from "
                                         f"{', '.join(d.constraint.values)}$"):
        build_parser().parse_args(["evaluate", "d.zarr", "--out", "o", d.flag, "nope"])
    job = tmp_path / "job.toml"
    job.write_text(f'reports = "r"\nhistory = "h"\n[[evaluation]]\nname = "a"\ndataset = "d.zarr"\n{d.name} = "nope"\n')
    with pytest.raises(InputError, match=f"{d.name} 'nope' is not one of {', '.join(d.constraint.values)}$"):
        nightly.load_job(job)


def test_number_options_are_refused_as_declared():
    for name, bad in (("threshold", math.inf), ("radius", -1.0), ("radius", math.nan)):
        flag = declarations.declared(name).flag
        with pytest.raises(InputError, match=f"^{flag}: {bad} must be a finite number"):
            Options(protocol="geo", **{name: bad}).checked()


# --------------------------------------------------------------------------- compare and run.json


def _class_arrays(seed=0):
    rng = np.random.default_rng(seed)
    gallery = rng.normal(size=(40, 8)).astype(np.float32)
    labels = np.arange(40) % 8
    query = gallery[::4] + rng.normal(scale=0.8, size=(10, 8)).astype(np.float32)
    return dict(query=query, gallery=gallery, query_labels=labels[::4], gallery_labels=labels)


def _warning_names(baseline, run) -> list[str]:
    result = evalcore.compare(baseline, run, resamples=200, permutations=200)
    return [w for w in result.warnings if "different options" in w]


@pytest.mark.parametrize("option, value", [("depth", 3), ("rerank", (4, 2, 0.3)), ("query_expansion", (2, 3.0)),
                                           ("database_augmentation", (2, 3.0)), ("threshold", 0.5)])
def test_compare_warns_about_runs_made_with_different_options(option, value):
    arrays = _class_arrays()
    baseline = evalcore.evaluate(**arrays)
    run = evalcore.evaluate(**arrays, **{option: value})
    warned = _warning_names(baseline, run)
    assert len(warned) == 1 and f"({option} " in warned[0], warned
    assert _warning_names(baseline, evalcore.evaluate(**arrays)) == []  # the same options: no warning


def _qrels_dataset(path):
    rng = np.random.default_rng(1)
    pairs = [(q, g, int(rng.integers(1, 4))) for q in range(6) for g in rng.choice(30, 5, replace=False)]
    q, g, r = (np.array(x) for x in zip(*pairs))
    ds.write_dataset(path, {"query/emb": rng.normal(size=(6, 4)).astype(np.float32),
                            "gallery/emb": rng.normal(size=(30, 4)).astype(np.float32),
                            "qrels/query": q.astype(np.int64), "qrels/item": g.astype(np.int64),
                            "qrels/rel": r.astype(np.int8)}, {"protocol": "qrels"})
    return str(path)


def _geo_dataset(path):
    rng = np.random.default_rng(2)
    ds.write_dataset(path, {"query/emb": rng.normal(size=(6, 4)).astype(np.float32),
                            "gallery/emb": rng.normal(size=(30, 4)).astype(np.float32),
                            "query/lat": rng.uniform(45, 45.1, 6), "query/lon": rng.uniform(7, 7.1, 6),
                            "gallery/lat": rng.uniform(45, 45.1, 30), "gallery/lon": rng.uniform(7, 7.1, 30)},
                     {"protocol": "geo"})
    return str(path)


@pytest.mark.parametrize("option, values, make", [("rel_level", (1, 2), _qrels_dataset),
                                                  ("radius", (2000.0, 5000.0), _geo_dataset)])
def test_compare_warns_about_relevance_options(tmp_path, option, values, make):
    path = make(tmp_path / "ds.zarr")
    baseline, run = (evalcore.evaluate(path, **{option: v}) for v in values)
    warned = _warning_names(baseline, run)
    assert len(warned) == 1 and f"({option} {values[0]} vs {values[1]})" in warned[0], warned


def test_run_json_records_the_declared_options():
    arrays = _class_arrays()
    engine = [f.name for f in dataclasses.fields(Options)]
    plain = evalcore.evaluate(**arrays).run["options"]
    # left out when not given: what the declarations say is recorded only when given or with ci
    assert list(plain) == [n for n in engine if declarations.declared(n).recorded == "always"]
    full = evalcore.evaluate(**arrays, rerank=True, metrics=["map"], ci=0.9, resamples=100).run["options"]
    assert list(full) == [n for n in engine if n not in ("query_expansion", "database_augmentation")]
    assert declarations.recorded_options({**plain, "metrics": None, "rerank": None, "query_expansion": None,
                                          "database_augmentation": None, "ci": None, "resamples": 1,
                                          "seed": 0}) == plain


# --------------------------------------------------------------------------- the help did not move


# `COLUMNS=80 evalcore evaluate --help`, captured at c1d7670, before the flags were generated from the declarations;
# recaptured when --ties took average and its help (issue 38): those lines alone changed
EVALUATE_HELP_BEFORE = """\
usage: evalcore evaluate [-h] --out OUT [--overwrite] [--quiet]
                         [--protocol {reid,class,qrels,geo,xy}]
                         [--similarity {cosine,dot,euclidean}] [--ks KS]
                         [--max-rank MAX_RANK]
                         [--ties {pessimistic,optimistic,average}]
                         [--threshold THRESHOLD] [--map-at MAP_AT]
                         [--metrics NAMES] [--judged-only]
                         [--empty-queries {skip,zero}] [--rel-level REL_LEVEL]
                         [--depth DEPTH] [--radius RADIUS]
                         [--rerank [K1,K2,LAMBDA]] [--query-expansion K,ALPHA]
                         [--database-augmentation K,ALPHA] [--sweep]
                         [--target-fpir TARGET_FPIR]
                         [--scheduler ADDRESS | --workers WORKERS]
                         [--memory-limit MEMORY_LIMIT]
                         [--stall-timeout SECONDS]
                         [--storage-option KEY=VALUE]
                         [--chunk-rows CHUNK_ROWS]
                         [--gallery-shards GALLERY_SHARDS] [--ci LEVEL]
                         [--resamples RESAMPLES] [--seed SEED]
                         dataset

positional arguments:
  dataset               Zarr dataset: a folder or any fsspec URL (s3://...)

options:
  -h, --help            show this help message and exit
  --out OUT             report folder (local or URL)
  --overwrite           replace an existing report folder
  --quiet               no progress and no printed summary
  --protocol {reid,class,qrels,geo,xy}
                        who is relevant (default: the dataset's evalcore
                        attribute, else class)
  --similarity {cosine,dot,euclidean}
                        default cosine
  --ks KS               cut-offs for hit/recall/precision (default 1,3,5,10)
  --max-rank MAX_RANK   length of the CMC curve (default 50)
  --ties {pessimistic,optimistic,average}
                        order of equal scores: pessimistic (default; non-
                        relevant items first), optimistic (relevant first) or
                        average (tied items share their gains: the expected
                        value over every order, for the measures evalcore
                        metrics --ties average lists)
  --threshold THRESHOLD
                        open-set acceptance threshold on the rank-1 score
  --map-at MAP_AT       also report ap_at_K / map_at_K
  --metrics NAMES       compute only these metrics, comma-separated
                        (map,recall@5; evalcore metrics lists them; default:
                        the usual set)
  --judged-only         qrels: rank each query among its judged items
  --empty-queries {skip,zero}
                        qrels: a judged query with no relevant item is left
                        out of the means (skip, default) or counted with every
                        metric 0 (zero, as trec_eval does)
  --rel-level REL_LEVEL
                        qrels grades: relevant for the binary measures when
                        the grade is at least this (trec_eval -l; default 1);
                        nDCG keeps every grade
  --depth DEPTH         cut every ranking at this rank before every measure
                        (trec_eval -M)
  --radius RADIUS       geo/xy: every gallery item within this distance is
                        relevant
  --rerank [K1,K2,LAMBDA]
                        k-reciprocal re-ranking (Zhong et al. 2017) with these
                        parameters; alone: 20,6,0.3
  --query-expansion K,ALPHA
                        alpha query expansion: each query replaced by the
                        normalised sum of itself and its K nearest gallery
                        vectors weighted by similarity^ALPHA
  --database-augmentation K,ALPHA
                        DBA: each gallery vector replaced likewise with its K
                        nearest other gallery vectors (before --query-
                        expansion)
  --sweep               write threshold_sweep.parquet (open-set trade-off)
  --target-fpir TARGET_FPIR
                        report the lowest threshold whose FPIR is at most this
  --scheduler ADDRESS   join an existing Dask cluster (tcp://HOST:PORT)
  --workers WORKERS     worker processes of the local cluster (default: the
                        cores)
  --memory-limit MEMORY_LIMIT
                        memory limit per local worker (default auto)
  --stall-timeout SECONDS
                        restart a worker that holds a task this long (or 10 x
                        the longest task so far, if longer) so the task runs
                        elsewhere; with no other worker, fail (default 180)
  --storage-option KEY=VALUE
                        fsspec storage option for s3:// and other URLs
                        (repeatable)
  --chunk-rows CHUNK_ROWS
                        queries per task (default: the Zarr chunks of
                        query/emb)
  --gallery-shards GALLERY_SHARDS
                        split the gallery into N shards per chunk (default:
                        only when the gallery exceeds a third of a worker's
                        memory limit)
  --ci LEVEL            confidence level of the bootstrap intervals, in (0, 1)
                        (default none)
  --resamples RESAMPLES
                        bootstrap resamples (default 10000)
  --seed SEED           seed of the resamples and sign flips (default 0)
"""


def test_evaluate_help_is_unchanged(monkeypatch):
    """A guard, not a fix: the flags, their order, defaults, metavars and help read as before."""
    monkeypatch.setenv("COLUMNS", "80")
    assert evaluate_parser().format_help() == EVALUATE_HELP_BEFORE
