"""InputError's kinds: code can tell a missing dataset, a bad array and a bad option apart without the message."""
import pickle

import numpy as np
import pytest

import evalcore
from evalcore.errors import ArrayError, DatasetNotFoundError, InputError, OptionError, rows_text


@pytest.mark.parametrize("message, kind, name", [
    ("--ks: 0 must list positive integers", OptionError, "--ks"),
    ("max_rank: 0 must be a positive integer", OptionError, "max_rank"),
    ("gallery/label: chunk 2 (rows 2000-2999) is missing from the store", ArrayError, "gallery/label"),
    ("query/emb: rows 3, 7, 9 contain NaN or Inf", ArrayError, "query/emb"),
    ("dataset x.zarr: no Zarr group found there", DatasetNotFoundError, None),
    ("output x.zarr: already exists (pass --overwrite to replace it)", InputError, None),
])
def test_an_input_error_becomes_the_kind_its_message_names(message, kind, name):
    exc = InputError(message)
    assert type(exc) is kind and str(exc) == message and isinstance(exc, ValueError)
    if kind is OptionError:
        assert exc.option == name
    if kind is ArrayError:
        assert exc.array == name
    back = pickle.loads(pickle.dumps(exc))  # errors travel back from Dask workers
    assert type(back) is kind and str(back) == message


def test_array_errors_carry_the_rows_they_name():
    assert InputError("query/emb: rows 3, 7, 9 contain NaN or Inf").rows == [3, 7, 9]
    assert InputError(f"gallery/emb: rows {rows_text(range(10, 40))} are all-zero vectors").rows == [10, 11, 12, 13, 14]
    assert InputError("ranking/item: missing").rows == []


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
