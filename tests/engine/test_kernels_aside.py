"""The kernels load on a thread of their own while an in-process run reads its gallery (``load_kernels_aside``)."""
import threading

import numpy as np

import evalcore
from evalcore.core import kernels
from evalcore.engine.schedule import load_kernels_aside


def test_a_failed_load_aside_is_silent_and_left_to_the_run(monkeypatch, capfd):
    def broken():
        raise RuntimeError("cache unreadable")

    monkeypatch.setattr(kernels, "warm_up", broken)
    seen = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args))
    thread = load_kernels_aside()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert seen == []                     # nothing escaped the thread
    assert capfd.readouterr().err == ""   # and nothing was printed


def test_an_in_process_run_starts_the_load_aside_and_gives_the_same_numbers(monkeypatch):
    started = []
    import evalcore.engine.evaluate as engine_evaluate

    real = engine_evaluate.load_kernels_aside
    monkeypatch.setattr(engine_evaluate, "load_kernels_aside", lambda *scan: started.append(real(*scan)))
    rng = np.random.default_rng(0)
    gallery = rng.standard_normal((300, 16)).astype(np.float32)
    labels = rng.integers(0, 20, 300)
    query = gallery[:40] + 0.3 * rng.standard_normal((40, 16)).astype(np.float32)
    result = evalcore.evaluate(query=query, gallery=gallery, query_labels=labels[:40], gallery_labels=labels)
    assert len(started) == 1
    started[0].join(timeout=60)
    # brute force: each query's own gallery row is relevant and the nearest by construction or not; count ranks
    q = query / np.linalg.norm(query, axis=1, keepdims=True)
    g = gallery / np.linalg.norm(gallery, axis=1, keepdims=True)
    scores = q @ g.T
    first = []
    for i in range(40):
        rel = labels == labels[i]
        best_rel = scores[i][rel].max()
        first.append(int(np.sum(scores[i][~rel] >= best_rel)) + 1)
    assert result.per_query.column("first_rank").to_pylist() == first
