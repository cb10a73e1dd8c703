"""InputError's kinds: code can tell a missing dataset, a bad array and a bad option apart without the message."""
import pickle

import numpy as np
import pytest

import evalcore
from evalcore.errors import (
    ArrayError,
    DatasetNotFoundError,
    InputError,
    OptionError,
    UnknownNameError,
    first_problem,
    input_error,
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


def test_reworded_keeps_the_class_and_the_rows_and_words_each_field():
    exc = ArrayError("gallery/emb", "rows 2 contain NaN (see --max-rank)", rows=[2])
    shown = exc.reworded(lambda text: text.replace("gallery/emb", "gallery").replace("--max-rank", "max_rank"))
    assert type(shown) is ArrayError and shown.array == "gallery" and shown.rows == [2]
    assert str(shown) == "gallery: rows 2 contain NaN (see max_rank)"
    assert first_problem([exc, OptionError("--ks", "bad")]).detail == "rows 2 contain NaN (see --max-rank) (and 1 more problem(s))"
    assert first_problem([exc]) is exc


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
    assert word("--storage-option 'x' is not KEY=VALUE") == "storage_options 'x' is not KEY=VALUE"
    assert word("--max-rank: 0 must be a positive integer") == "max_rank: 0 must be a positive integer"
