"""An out-of-memory error names only options the command that ran has (issue 35, finding 15: compare and the
importers printed "raise --memory-limit or lower --chunk-rows", options they do not take)."""
from __future__ import annotations

import pytest

from evalcore.cli import main as cli


@pytest.fixture
def out_of_memory(monkeypatch):
    """compare and evaluate raise MemoryError, as a huge allocation would."""
    def fail(args):
        raise MemoryError("Unable to allocate 7.28 TiB")
    monkeypatch.setattr(cli, "cmd_compare", fail)
    monkeypatch.setattr(cli, "cmd_evaluate", fail)


def test_compare_is_not_told_to_raise_an_option_it_does_not_have(out_of_memory, capsys, tmp_path):
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("evalcore: error: out of memory (Unable to allocate 7.28 TiB)")
    assert "--memory-limit" not in err and "--chunk-rows" not in err
    assert len(err.splitlines()) == 1


def test_evaluate_is_told_which_of_its_options_to_change(out_of_memory, capsys, tmp_path):
    assert cli.main(["evaluate", str(tmp_path / "ds.zarr"), "--out", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.endswith("; raise --memory-limit or lower --chunk-rows")
