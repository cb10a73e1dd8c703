"""The compiled TREC tokenizer (``trec_scan``) against plain Python: error messages and their lines, the
UTF-8 check done piece by piece, and runs whose queries are split or listed out of order."""
import numpy as np
import pytest

from evalcore.errors import InputError
from evalcore.io.importers import trec

QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d1 2\n"


def run_it(tmp_path, run: str, qrels: str = QRELS, **options):
    (tmp_path / "run").write_bytes(run.encode("utf-8") if isinstance(run, str) else run)
    (tmp_path / "qrels").write_bytes(qrels.encode("utf-8") if isinstance(qrels, str) else qrels)
    return trec.read_trec_run(tmp_path / "run", qrels=tmp_path / "qrels", **options)


@pytest.mark.parametrize("piece", [7, 64, 1 << 24])
@pytest.mark.parametrize("text, message", [
    ("# c\nq1 Q0 d1 1 2 t\n\nq1 Q0 d2 1 1_5 t\n", r"run: line 4, field score: '1_5' is not a plain decimal"),
    ("q1 Q0 d1 1 0.5abc t\n", r"run: line 1, field score: '0.5abc' is not a plain decimal"),
    ("q1 Q0 d1 1 2 t\r\nq1 Q0 d2 1 nan t\r\n", r"run: line 2, field score: 'nan' is not a finite number"),
    ("q1 Q0 d1 1 inf t\n", r"run: line 1, field score: 'inf' is not a finite number"),
    ("q1 Q0 d1 1 1e999 t\n", r"run: line 1, field score: '1e999' is not a finite number"),
    ("q1 Q0 d1 1 2 t\nq1\tQ0 d2 1\n", r"run: line 2: 4 fields, expected at least 6"),
    ("q1 Q0 d1 1 2 t\nq2 Q0 d1 1 2 t\nq1 Q0 d2 1 1 t\nq1  Q0 d1 9 0 t\n",
     r"run: line 4, field docno: 'd1' listed twice for query 'q1' \(also line 1\)"),
    ("q1 Q0 d1 1 2 t\nq1 Q0 d1 2 1 t\nq1 Q0 dX 3 x t\n", r"run: line 2, field docno: 'd1' listed twice"),
])
def test_run_errors_name_file_and_line(tmp_path, monkeypatch, piece, text, message):
    monkeypatch.setattr(trec, "PIECE_BYTES", piece)
    with pytest.raises(InputError, match=rf"^{tmp_path}/{message}"):
        run_it(tmp_path, text)


@pytest.mark.parametrize("piece", [7, 1 << 24])
def test_conflicting_qrels_grade_names_both_lines(tmp_path, monkeypatch, piece):
    monkeypatch.setattr(trec, "PIECE_BYTES", piece)
    with pytest.raises(InputError, match=r"qrels: line 3, field rel: \(q1, d1\) judged 0 here but differently "
                                         r"on line 1$"):
        run_it(tmp_path, "q1 Q0 d1 1 2 t\n", "q1 0 d1 1\n\nq1 0 d1 0\n")


@pytest.mark.parametrize("piece", [5, 64, 1 << 24])
def test_non_utf8_message_is_the_whole_file_decode_message(tmp_path, monkeypatch, piece):
    monkeypatch.setattr(trec, "PIECE_BYTES", piece)
    for bad in (b"\xff", b"\xc3(", b"\xe2\x82"):
        data = (b"q1 Q0 d1 1 x\n"   # a bad line first: the UTF-8 error is still the one reported
                + "q1 Q0 d1 1 2 t\nq1 Q0 \u00e9t\u00e9 1 1 t\n".encode() * 3 + b"q1 Q0 d" + bad + b" 1 1 t\n")
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            want = f"{tmp_path / 'run'}: not UTF-8 text ({exc})"
        with pytest.raises(InputError) as caught:
            run_it(tmp_path, data)
        assert str(caught.value) == want


@pytest.mark.parametrize("piece", [7, 64, 1 << 24])
@pytest.mark.parametrize("order", ["score", "trec_eval"])
def test_split_and_unsorted_queries_rank_as_a_plain_sort(tmp_path, monkeypatch, piece, order):
    monkeypatch.setattr(trec, "PIECE_BYTES", piece)
    rng = np.random.default_rng(5)
    lines, listed = [], {}
    for _ in range(300):
        q = f"q{rng.integers(1, 4)}"
        d = f"d{rng.integers(0, 400)}"
        if d in listed.setdefault(q, {}):
            continue
        listed[q][d] = float(rng.integers(0, 6)) / 4 * (-1 if rng.random() < 0.2 else 1)
        lines.append(f"{q}\tQ0 {d} 0 {listed[q][d]!r} t extra")
    qrels = "".join(f"{q} 0 d{i} {i % 3}\n" for q in ("q1", "q2", "q3") for i in range(0, 400, 37))
    got, _ = run_it(tmp_path, "\n".join(lines), qrels, order=order)
    gallery = got["gallery/key"].tolist()
    for row, q in enumerate(got["query/key"].tolist()):
        results = list(listed[q].items())   # in file order
        if order == "trec_eval":
            results.sort(key=lambda r: r[0].encode(), reverse=True)
        results.sort(key=lambda r: -r[1])
        items = got["ranking/item"][row]
        assert [gallery[i] for i in items[items >= 0]] == [d for d, _ in results]
        if order == "score":
            np.testing.assert_array_equal(got["ranking/score"][row][:len(results)], [s for _, s in results])


@pytest.mark.parametrize("parts", [1, 4])
def test_key_table_codes_each_key_once_through_growth(parts):
    """Keys of 1-40 bytes (long ones compared past the slot's 16 bytes, some sharing those 16), fed in
    batches that make every region grow: each distinct key gets one code, and the code names the key."""
    from evalcore.io.importers import trec_scan

    rng = np.random.default_rng(5)
    words = [bytes(rng.integers(97, 100, size=n).astype(np.uint8)) for n in rng.integers(1, 41, size=3000)]
    words += [b"x" * 16 + w for w in words[:50]]                    # same first 16 bytes, different tails
    table = trec_scan.KeyTable(4, 16, parts=parts)
    seen: dict[bytes, int] = {}
    for batch in np.array_split(rng.integers(0, len(words), size=20000), 7):
        keys = [words[i] for i in batch]
        buf = np.frombuffer(b"".join(keys), dtype=np.uint8)
        ends = np.cumsum([len(k) for k in keys])
        starts = ends - np.array([len(k) for k in keys])
        codes = np.empty(len(keys), dtype=np.int32)
        lines = np.arange(len(keys), dtype=np.int64)
        if parts == 1:
            table.reserve(len(keys), int(buf.size))
            table.count, _ = trec_scan.encode_keys(buf, starts, ends, lines, codes, table.slots, table.offsets,
                                                   table.first_line, table.arena, table.count)
        else:
            trec_scan.code_keys(table, buf, starts, ends, lines, codes)
        offsets, data = table.keys()
        for key, code in zip(keys, codes.tolist()):
            assert seen.setdefault(key, code) == code
            assert data[offsets[code]:offsets[code + 1]].tobytes() == key
    assert table.count == len(seen) == len(set(seen.values()))
    assert table.slots.shape[0] > 4 * parts                            # it grew


def test_a_problem_in_the_qrels_is_reported_before_one_in_the_run(tmp_path):
    """The two files are read at once on two threads; the qrels' problem still comes first, as when they were
    read first, and the run's own problem is reported when the qrels are fine."""
    with pytest.raises(InputError, match=r"qrels: line 2, field rel: 'x' is not an integer"):
        run_it(tmp_path, "q1 Q0 d1 1 1_5 t\n", "q1 0 d1 1\nq1 0 d2 x\n")
    with pytest.raises(InputError, match=r"run: line 1, field score: '1_5' is not a plain decimal"):
        run_it(tmp_path, "q1 Q0 d1 1 1_5 t\n")


@pytest.mark.parametrize("piece", [1, 3, 7, 64, 1 << 24])
def test_pieces_are_the_file_cut_after_a_newline(tmp_path, piece):
    """Read straight into arrays: joined they are the file, each at its offset, each but the last ending at a
    ``\\n`` (lines longer than a piece too); one read holding it all cuts after its last ``\\n``."""
    data = b"".join(b"x" * int(n) + b"\n" for n in np.random.default_rng(piece).integers(0, 30, size=60)) + b"tail"
    (tmp_path / "f").write_bytes(data)
    pieces = list(trec._pieces(tmp_path / "f", piece))
    assert b"".join(p.tobytes() for _, p in pieces) == data
    assert [offset for offset, _ in pieces] == np.cumsum([0] + [p.size for _, p in pieces[:-1]]).tolist()
    assert all(p[-1] == 10 for _, p in pieces[:-1]) and pieces[-1][1].tobytes().endswith(b"tail")
    if piece == 1 << 24:
        assert len(pieces) == 2


@pytest.mark.parametrize("seed", range(6))
def test_byte_order_sorts_as_arrow_sorts_bytes(seed):
    """Packed words (up to 15 bytes) and Arrow's sort (longer) against Python's sort of the UTF-8 bytes:
    prefixes, NUL bytes (which the packing pads with), non-ASCII, the 15/16-byte edge and sliced arrays."""
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    alphabet = ["a", "b", "\x00", "\x01", "\u00e9", "z", "\x7f", "9"]
    longest = 15 if seed % 2 else 17   # even seeds take the Arrow path too
    words = ["".join(rng.choice(alphabet, rng.integers(0, longest + 1))) for _ in range(600)]
    words = [w for w in words if len(w.encode("utf-8")) <= longest][:400]   # bytes, not characters
    words += ["ab\x00\x00", "ab\x00", "ab", "a", "", "x" * 14 + "\x00", "x" * 14] + words[:50]  # NUL-padded prefixes first
    strings = pa.array(["pad"] + words, pa.string()).slice(1)
    expected = sorted(range(len(words)), key=lambda i: (words[i].encode("utf-8"), i))
    assert trec.byte_order(strings).tolist() == expected
    assert trec.byte_order(pa.array([], pa.large_string())).tolist() == []
