"""`benchmarks.epoch_anatomy --grid`'s authors' column: its settings are checked in one line
before any program is built."""

from __future__ import annotations

import pytest

from benchmarks import epoch_anatomy


@pytest.mark.parametrize("argv, message", [
    (["--authors-python", "python"], "--authors-python and --ref go together"),
    (["--ref", "."], "--authors-python and --ref go together"),
    (["--authors-python", "python", "--ref", "."], "no graph_property_prediction/models/swan.py"),
])
def test_the_authors_column_needs_a_python_and_a_checkout(argv, message, capsys, monkeypatch):
    monkeypatch.setattr(epoch_anatomy, "grid", lambda *a, **k: pytest.fail("ran"))
    with pytest.raises(SystemExit) as err:
        epoch_anatomy.main(["--grid", *argv])
    assert err.value.code == 2
    assert message in capsys.readouterr().err
