"""EvalAI's evaluation script entry point: ``evaluate(test_annotation_file, user_submission_file,
phase_codename, **kwargs)``, as EvalAI's remote or hosted worker calls it.

``test_annotation_file`` is the truth bundle (a Zarr folder, or a .zip of one
is not accepted: give the folder); ``user_submission_file`` the participant's
upload: a .zip or .npz holding query.npy and gallery.npy, or a folder /
Zarr group. The return value is EvalAI's layout: one entry per split,
``{"result": [{split: {"mAP": ...}}, ...], "submission_result": {...}}``,
the ``public`` split first; EvalAI's challenge configuration decides which
split's column participants see. A bad submission raises ``InputError`` (a
``ValueError``) whose one line EvalAI shows as the failure, with no server
path in it (``ledger.public_reason``). An archive is bounded before it is
unpacked (``archive.unpack``).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from evalcore.challenge.archive import submission_limit, unpack
from evalcore.errors import InputError
from evalcore.io import ledger as lg
from evalcore.jobs import service


def result_layout(split_maps, n_evaluated: int, codenames: dict | None = None) -> dict:
    """EvalAI's dict from (split, mAP) pairs: the public split first, then the others sorted."""
    codenames = codenames or {}
    ordered = sorted(split_maps, key=lambda pair: (pair[0] != lg.PUBLIC, pair[0]))
    result = [{codenames.get(split, split): {"mAP": value}} for split, value in ordered]
    first = next(iter(result[0].values())) if result else {}
    return {"result": result, "submission_result": dict(first),
            "metadata": {"n_evaluated": n_evaluated}}


def evaluate(test_annotation_file, user_submission_file, phase_codename, **kwargs) -> dict:
    """Score one submission against the truth; ``kwargs["split_codenames"]`` may map evalcore's split names
    (``public``, ``private``) to the challenge's split codenames. ``phase_codename`` is recorded only: the
    phase is the truth given."""
    truth = service.load_truth(str(test_annotation_file))
    path = Path(user_submission_file)
    try:
        if path.is_dir():
            scored = service.score_path(truth, path)
        else:
            with tempfile.TemporaryDirectory(prefix="evalcore-evalai-") as tmp:
                limit = submission_limit(truth.n_query, truth.n_gallery, truth.dims)
                scored = service.score_path(truth, unpack(path, Path(tmp), limit))
    except InputError as exc:  # EvalAI shows it to the participant: no server path in it
        raise exc.redacted(lg.public_reason).with_traceback(None) from None
    out = result_layout(scored.split_maps, scored.n_evaluated, kwargs.get("split_codenames"))
    out["metadata"]["phase"] = phase_codename
    return out
