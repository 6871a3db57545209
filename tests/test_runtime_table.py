"""`python -m benchmarks.runtime_table` (the paper's runtime table): its refusals come before any
compute, in one line. (The table it feeds is tested in test_results_md.py; the timings
themselves run on a GPU slice or by hand: they take minutes.)"""

from __future__ import annotations

import pytest

from benchmarks import runtime_table as runtime


@pytest.mark.parametrize(("argv", "message"), [
    (["--epochs", "1"], "--epochs must be at least 2 (the first epoch compiles)"),
    (["--ref", "no/such/swan.py"], "--ref no/such/swan.py: no such file"),
])
def test_bad_settings_are_refused_before_training(argv, message, capsys, monkeypatch):
    monkeypatch.setattr(runtime, "results", lambda *a: pytest.fail("it trained"))
    with pytest.raises(SystemExit) as exit_:
        runtime.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1]
