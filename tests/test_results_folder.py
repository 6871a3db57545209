"""`swan-results FOLDER`: a results folder at a glance, for a user of the installed package
(this repository's RESULTS.md tooling is `reproduce/`, not installed)."""

from __future__ import annotations

import json

import pytest

from swan_jax.experiments import results


def cell(topology: str, distance: int, test: float, *, diverged=(False, False)) -> dict:
    """A cell as `sweep.summarise_cells` writes it: its axes first, then "metric"."""
    return {"topology": topology, "distance": distance, "model": "swan", "metric": "mse",
            "best_hparams": {"learning_rate": 0.001, "epsilon": 0.5}, "val_mean": test,
            "val_std": 0.0, "test_mean": test, "test_std": test / 10, "seeds": [0, 1],
            "diverged": list(diverged), "epochs_run": [5, 5]}


def folder(tmp_path, name: str, cells: list[dict], **extra) -> None:
    path = tmp_path / name
    path.mkdir(parents=True)
    (path / "results.json").write_text(json.dumps({
        "experiment": "transfer", "machine": {"device_kind": "cpu", "date": "2026-01-01"},
        "cells": cells, "records": [], **extra}))
    (path / "table.md").write_text("| cell | ours | paper |\n")


def test_one_folder_prints_one_line_per_cell(tmp_path, capsys):
    folder(tmp_path, "transfer", [cell("line", 3, 2.5e-5), cell("ring", 5, 1e-3,
                                                                 diverged=(True, False))],
           not_run=["line/50 (no data)"])
    assert results.main([str(tmp_path / "transfer")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"{tmp_path / 'transfer'}: transfer, 2 cell(s), measured on cpu, 2026-01-01",
        "  line / 3 / swan: test mse 2.5e-05 ± 2.5e-06 over 2 seed(s) at "
        "learning_rate=0.001, epsilon=0.5",
        "  ring / 5 / swan: test mse 0.001 ± 0.0001 over 2 seed(s) at learning_rate=0.001, "
        "epsilon=0.5; 1 run(s) diverged",
        "  not run: line/50 (no data)",
        f"  table beside the paper: {tmp_path / 'transfer' / 'table.md'}"]


def test_a_folder_above_several_lists_each(tmp_path, capsys):
    folder(tmp_path, "a", [cell("line", 3, 1.0)])
    folder(tmp_path, "b", [])
    (tmp_path / "a" / "checkpoints").mkdir()
    (tmp_path / "a" / "checkpoints" / "results.json").write_text("not a sweep's")
    assert results.main([str(tmp_path)]) == 0
    heads = [line for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")]
    assert heads == [f"{tmp_path / 'a'}: transfer, 1 cell(s), measured on cpu, 2026-01-01",
                     f"{tmp_path / 'b'}: transfer, 0 cell(s), measured on cpu, 2026-01-01"]


def test_a_folder_without_results_or_with_a_bad_file_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match=r"^swan-results: .* holds no results.json: give a "
                                         r"folder a swan-<experiment> command wrote"):
        results.main([str(tmp_path)])
    (tmp_path / "results.json").write_text("{truncated")
    with pytest.raises(SystemExit, match=r"results.json: not a results file a sweep wrote "
                                         r"\(JSONDecodeError\)$"):
        results.main([str(tmp_path)])
