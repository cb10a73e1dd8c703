"""InputError's kinds: code can tell a missing dataset, a bad array and a bad option apart without the message."""
import pickle

import numpy as np
import pytest

import evalcore
from evalcore.errors import (
    ArrayError,
    DatasetNotFoundError,
    InputError,
    Mention,
    OptionError,
    Text,
    UnknownNameError,
    first_problem,
    input_error,
    mention,
    rows_text,
)


@pytest.mark.parametrize("made, kind, name, message", [
    (lambda: OptionError("--ks", "0 must list positive integers"), OptionError, "--ks", "--ks: 0 must list positive integers"),
    (lambda: input_error("max_rank", "0 must be a positive integer"), OptionError, "max_rank",
     "max_rank: 0 must be a positive integer"),
    (lambda: input_error("gallery/label", "chunk 2 (rows 2000-2999) is missing from the store"), ArrayError,
     "gallery/label", "gallery/label: chunk 2 (rows 2000-2999) is missing from the store"),
    (lambda: ArrayError("query/emb", "rows 3, 7, 9 contain NaN or Inf", rows=[3, 7, 9]), ArrayError, "query/emb",
     "query/emb: rows 3, 7, 9 contain NaN or Inf"),
    (lambda: DatasetNotFoundError("dataset x.zarr", "no Zarr group found there"), DatasetNotFoundError, None,
     "dataset x.zarr: no Zarr group found there"),
    (lambda: InputError("output x.zarr: already exists (pass --overwrite to replace it)"), InputError, None,
     "output x.zarr: already exists (pass --overwrite to replace it)"),
    (lambda: input_error("output x.zarr", "already exists"), InputError, None, "output x.zarr: already exists"),
    (lambda: UnknownNameError("--metrics", "mapp", "unknown metric 'mapp'"), UnknownNameError, "--metrics",
     "--metrics: unknown metric 'mapp'"),
])
def test_an_input_error_has_the_kind_and_fields_it_was_raised_with(made, kind, name, message):
    exc = made()
    assert type(exc) is kind and str(exc) == message and isinstance(exc, ValueError)
    if issubclass(kind, OptionError):
        assert exc.option == name
    if kind is ArrayError:
        assert exc.array == name
    back = pickle.loads(pickle.dumps(exc))  # errors travel back from Dask workers
    assert type(back) is kind and str(back) == message
    assert (back.subject, back.detail, back.rows) == (exc.subject, exc.detail, exc.rows)
    if kind is UnknownNameError:
        assert back.name == "mapp"


def test_the_message_never_chooses_the_class():
    # a free-text error that happens to start like an option or an array stays what it was raised as
    assert type(InputError("--ks: looks like an option")) is InputError
    assert type(InputError("query/emb: looks like an array")) is InputError
    assert InputError("query/emb: rows 3, 7 contain NaN").rows == []


def test_array_errors_carry_the_rows_they_were_given():
    assert ArrayError("query/emb", "rows 3, 7, 9 contain NaN or Inf", rows=np.array([3, 7, 9])).rows == [3, 7, 9]
    bad = range(10, 40)
    exc = ArrayError("gallery/emb", f"rows {rows_text(bad)} are all-zero vectors", rows=bad)
    assert exc.rows == list(bad) and str(exc) == "gallery/emb: rows 10, 11, 12, 13, 14, ... (30 rows) are all-zero vectors"
    assert ArrayError("ranking/item", "missing").rows == []


def test_reworded_looks_up_the_subject_and_each_mention_and_leaves_the_text_alone():
    exc = ArrayError("gallery/emb", "rows 2 contain NaN (see " + mention("--max-rank") + "; not --max-rank)", rows=[2])
    words = {"gallery/emb": "gallery", "--max-rank": "max_rank"}
    shown = exc.reworded(lambda word: words.get(word, word))
    assert type(shown) is ArrayError and shown.array == "gallery" and shown.rows == [2]
    # the mention is looked up whole; the same characters in plain text are not searched for
    assert str(shown) == "gallery: rows 2 contain NaN (see max_rank; not --max-rank)"
    assert str(exc) == "gallery/emb: rows 2 contain NaN (see --max-rank; not --max-rank)"   # exc itself unchanged
    assert shown.text.mentions() == ["max_rank"] and exc.text.mentions() == ["--max-rank"]
    assert first_problem([exc, OptionError("--ks", "bad")]).detail == ("rows 2 contain NaN (see --max-rank; not "
                                                                       "--max-rank) (and 1 more problem(s))")
    assert first_problem([exc]) is exc


def test_words_join_text_and_mentions_in_order():
    words = "needs " + mention("--similarity") + " cosine, with " + mention("query/emb") + mention("!")
    assert isinstance(words, Text)
    assert words.parts == ("needs ", Mention("--similarity"), " cosine, with ", Mention("query/emb"), Mention("!"))
    assert str(words) == "needs --similarity cosine, with query/emb!"
    assert words.shown(str.upper) == "needs --SIMILARITY cosine, with QUERY/EMB!"
    assert (mention("a") + "b").parts == (Mention("a"), "b") and Text.of("x").parts == ("x",)
    assert (Text.of("a") + Text.of("b") + mention("c")).shown(lambda w: f"<{w}>") == "ab<c>"


def test_redacted_changes_the_plain_text_and_keeps_the_mentions():
    exc = OptionError("--truth", "/srv/a/truth.npz: needs " + mention("query/emb"))
    cut = exc.redacted(lambda text: text.replace("/srv/a/", ""))
    assert str(cut) == "--truth: truth.npz: needs query/emb" and cut.text.mentions() == ["query/emb"]
    assert type(cut) is OptionError


@pytest.mark.parametrize("kind", ["pickle", "worker"])
def test_mentions_cross_processes_and_are_worded_there_after(kind, tmp_path):
    exc = UnknownNameError("--metrics", "mapp", "unknown; see " + mention("--ks") + " and " + mention("query/emb"))
    if kind == "pickle":
        back = pickle.loads(pickle.dumps(exc))
    else:  # a real spawned process raises it, and it comes back pickled
        import concurrent.futures
        import multiprocessing

        with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            with pytest.raises(UnknownNameError) as caught:
                pool.submit(_raise, exc).result()
        back = caught.value
    assert type(back) is UnknownNameError and back.name == "mapp" and back.text == exc.text
    from evalcore.api import python_names

    assert str(back.reworded(python_names(from_arrays=True))) == "metrics: unknown; see ks and query"


def _raise(exc):
    raise exc


def test_rows_text_shows_a_few_rows_and_the_count():
    assert rows_text([3, 7]) == "3, 7"
    assert rows_text(np.arange(8)) == "0, 1, 2, 3, 4, ... (8 rows)"


def test_a_missing_dataset_is_also_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError) as caught:
        evalcore.evaluate(str(tmp_path / "nowhere.zarr"))
    assert isinstance(caught.value, DatasetNotFoundError) and isinstance(caught.value, evalcore.InputError)


def test_the_api_names_parameters_in_each_kind():
    gallery = np.eye(4, dtype=np.float32)
    with pytest.raises(OptionError) as caught:
        evalcore.evaluate(query=gallery, gallery=gallery, query_labels=[0, 1, 2, 3], gallery_labels=[0, 1, 2, 3],
                          ks=(0,))
    assert caught.value.option == "ks"
    bad = gallery.copy()
    bad[2] = np.nan
    with pytest.raises(ArrayError) as caught:
        evalcore.evaluate(query=gallery, gallery=bad, query_labels=[0, 1, 2, 3], gallery_labels=[0, 1, 2, 3])
    assert caught.value.array == "gallery" and caught.value.rows == [2]


@pytest.mark.parametrize("given", [5, "anon=true", ["anon", True]])
def test_storage_options_that_are_not_a_mapping_name_the_parameter(given):
    with pytest.raises(evalcore.OptionError) as caught:
        evalcore.evaluate("s3://bucket/ds.zarr", storage_options=given)
    assert caught.value.option == "storage_options" and "mapping" in caught.value.detail


def test_a_flag_is_shown_to_python_as_its_declared_parameter():
    # the declarations' name, not the flag's words: --storage-option is storage_options
    from evalcore.api import python_names

    word = python_names(from_arrays=False)
    assert word("--storage-option") == "storage_options" and word("--max-rank") == "max_rank"
    assert word("query/emb") == "query/emb"               # a dataset's arrays keep their names
    assert python_names(from_arrays=True)("query/emb") == "query"
    assert python_names(from_arrays=True, distances=True)("scores/value") == "distances"
    assert word("--max-rank: 0") == "--max-rank: 0"       # a whole word only, never a search of text


def test_python_reads_mentions_in_its_parameters_words():
    # raised in the command line's words deep in the engine; Python sees its own parameters' names
    gallery = np.eye(4, dtype=np.float32)
    with pytest.raises(OptionError) as caught:
        evalcore.evaluate(query=gallery, gallery=gallery, query_labels=[0, 1, 2, 3], gallery_labels=[0, 1, 2, 3],
                          similarity="dot", rerank=True)
    assert caught.value.option == "rerank" and caught.value.detail.startswith("needs similarity cosine")
    with pytest.raises(evalcore.OptionError) as caught:
        evalcore.evaluate(query=gallery, gallery=gallery, query_labels=[0, 1, 2, 3], gallery_labels=[0, 1, 2, 3],
                          ties="average", metrics=["map"])
    assert "not defined under ties average" in caught.value.detail and "--" not in caught.value.detail
