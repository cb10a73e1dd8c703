"""The TREC import on two threads: a reader thread tokenises the next piece while the main thread codes the
last (``trec._ahead``), and ``fill_rows`` places and finishes the rankings in two halves. Each must give
what one thread gives, codes included, and still name the first bad line in the file."""
import numpy as np
import pytest

from evalcore.core import result_lists
from evalcore.errors import InputError
from evalcore.io.importers import trec


def test_ahead_keeps_the_order_and_raises_where_the_items_stop():
    def items():
        yield from range(5)
        raise ValueError("piece 5")

    got = []
    with pytest.raises(ValueError, match="piece 5"):
        for item in trec._ahead(items()):
            got.append(item)
    assert got == list(range(5))
    assert list(trec._ahead(iter([]))) == []


def write_run(tmp_path, rng, queries=7, lines=400) -> None:
    """A run whose queries are interleaved and whose docnos repeat across queries, and its qrels."""
    out = []
    for k in range(lines):
        out.append(f"q{rng.integers(0, queries)} Q0 d{k % 97}-{k} 0 {rng.integers(-4, 5) / 4} t\n")
    (tmp_path / "run").write_text("".join(out))
    (tmp_path / "qrels").write_text("".join(f"q{q} 0 d{d}-{d} {d % 3}\n" for q in range(queries)
                                            for d in range(0, lines, 7)))


def same_lines(a: trec.TrecLines, b: trec.TrecLines) -> None:
    assert a.qkeys.equals(b.qkeys) and a.dkeys.equals(b.dkeys)
    for name in ("qcode", "dcode", "value", "qline", "line"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            np.testing.assert_array_equal(x, y, err_msg=name)


@pytest.mark.parametrize("piece", [40, 301, 1 << 24])
def test_pieces_coded_on_two_threads_equal_one_thread(tmp_path, monkeypatch, piece):
    """The docno codes are first-seen per piece, so a table fed out of order would give other codes."""
    write_run(tmp_path, np.random.default_rng(piece))
    monkeypatch.setattr(trec, "PIECE_BYTES", piece)
    threaded = trec.read_run_lines(tmp_path / "run"), trec.read_qrels_lines(tmp_path / "qrels")
    monkeypatch.setattr(trec, "_ahead", lambda items: items)   # one thread: each piece coded as it is read
    alone = trec.read_run_lines(tmp_path / "run"), trec.read_qrels_lines(tmp_path / "qrels")
    for a, b in zip(threaded, alone):
        same_lines(a, b)


def run_lines(count: int) -> list[str]:
    return [f"q{k % 3} Q0 d{k} 0 {1000 - k} t\n" for k in range(count)]


@pytest.mark.parametrize("piece", [64, 1 << 24])
def test_a_bad_line_in_a_later_piece_is_named(tmp_path, monkeypatch, piece):
    monkeypatch.setattr(trec, "PIECE_BYTES", piece)
    lines = run_lines(300)
    lines[249] = "q1 Q0 dX 1\n"
    (tmp_path / "run").write_text("".join(lines))
    (tmp_path / "qrels").write_text("q1 0 d1 1\n")
    with pytest.raises(InputError, match=rf"^{tmp_path}/run: line 250: 4 fields, expected at least 6 \(qid"):
        trec.read_trec_run(tmp_path / "run", qrels=tmp_path / "qrels")


@pytest.mark.parametrize("piece", [64, 1 << 24])
@pytest.mark.parametrize("first, later, message", [
    ("q1 Q0 dX 1 1_5 t\n", "q1 Q0 dY 1\n", r"line 31, field score: '1_5' is not a plain decimal"),
    ("q1 Q0 dX 1\n", "q1 Q0 dY 1 nan t\n", r"line 31: 4 fields, expected at least 6 \(qid"),
    ("q1 Q0 dX\n", "q1 Q0 dY 1\n", r"line 31: 3 fields, expected at least 6 \(qid"),
    ("q1 Q0 dX 1 nan t\n", "q1 Q0 dY 1 1_5 t\n", r"line 31, field score: 'nan' is not a finite number"),
    ("q1 Q0 dX 1 1e999 t\n", "q1 Q0 dY 1 inf t\n", r"line 31, field score: '1e999' is not a finite number"),
])
def test_the_first_bad_line_wins_when_two_pieces_have_one(tmp_path, monkeypatch, piece, first, later, message):
    monkeypatch.setattr(trec, "PIECE_BYTES", piece)
    lines = run_lines(300)
    lines[30], lines[269] = first, later
    (tmp_path / "run").write_text("".join(lines))
    (tmp_path / "qrels").write_text("q1 0 d1 1\n")
    with pytest.raises(InputError, match=rf"^{tmp_path}/run: {message}"):
        trec.read_trec_run(tmp_path / "run", qrels=tmp_path / "qrels")


def fill(qcode, dcode, score, n_rows, by_item, split):
    row_of_query = np.arange(n_rows, dtype=np.int64)
    row_of_query[-1] = -1                                   # a query left out
    counts = result_lists.row_counts(qcode, row_of_query, n_rows)
    item = np.empty((n_rows, int(counts.max())), dtype=np.int64)
    value = np.empty(item.shape, dtype=np.float64)
    result_lists.fill_rows(qcode, dcode, score, row_of_query, np.arange(dcode.size)[::-1].copy(), by_item, item,
                           value, split=split)
    return item, value


@pytest.mark.parametrize("by_item", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_fill_rows_on_two_threads_equals_one(by_item, seed):
    """Rows split across the two halves, some listed best first and some not, ties among them."""
    rng = np.random.default_rng(seed)
    n = 3000
    qcode = np.sort(rng.integers(0, 9, size=n)) if seed % 2 else rng.integers(0, 9, size=n)
    qcode = qcode.astype(np.int32)
    dcode = rng.permutation(n).astype(np.int32)
    score = np.round(rng.normal(size=n), 1)
    if seed < 2:   # best first within each query: only the halves' seam can make a row unsorted
        order = np.lexsort((-score, qcode))
        qcode, dcode, score = qcode[order], dcode[order], score[order]
    one = fill(qcode, dcode, score, 9, by_item, split=n + 1)
    two = fill(qcode, dcode, score, 9, by_item, split=0)
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])


@pytest.mark.parametrize("by_item", [False, True])
def test_a_row_unsorted_only_at_the_seam_is_sorted(by_item):
    """Each half lists the row best first; the second half's first record ranks above the first's last."""
    qcode = np.zeros(4, dtype=np.int32)
    dcode = np.arange(4, dtype=np.int32)
    score = np.array([3.0, 2.0, 5.0, 1.0]) if not by_item else np.array([2.0, 2.0, 2.0, 2.0])
    row_of_query = np.zeros(1, dtype=np.int64)
    item = np.empty((1, 4), dtype=np.int64)
    value = np.empty((1, 4), dtype=np.float64)
    result_lists.fill_rows(qcode, dcode, score, row_of_query, np.array([3, 1, 2, 0]), by_item, item, value,
                           split=0)
    assert item[0].tolist() == ([2, 3, 1, 0] if not by_item else [3, 2, 1, 0])
