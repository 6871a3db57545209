"""reproductions/graphprop-plateau/study.py: where a curve leaves the plateau, the tail a
stopped run leaves, and the repeat check (issue 37's measurement)."""

from __future__ import annotations

import importlib

import pytest

gpp = importlib.import_module("reproductions.graphprop-plateau.study")


def test_a_run_leaves_the_plateau_at_the_first_epoch_below_the_threshold():
    assert gpp.exit_epoch([0.8, 0.6, 0.45, 0.5, 0.3], 0.49) == 2
    assert gpp.exit_epoch([0.8, 0.6, 0.55], 0.49) is None  # never: the claim can fail
    level = {"val": 0.59, "test": 0.64}
    run = {"model": "adgn", "point": {"epsilon": 1.0}, "seed": 0, "source": "x",
           "val": [0.8, 0.6, 0.45, 0.2], "test": [0.9, 0.7, 0.5, 0.25]}
    summary = gpp.summarise(run, level)
    assert (summary["exit_epoch"], summary["exit_step"]) == (2, 30)  # 10 steps an epoch
    assert (summary["best_epoch"], summary["test_at_best_val"]) == (3, 0.25)


def test_a_stopped_runs_repeated_tail_is_cut_and_repeats_are_checked():
    assert gpp._until_stopped([3.0, 2.0, 1.0, 1.0, 1.0]) == [3.0, 2.0, 1.0]
    assert gpp._until_stopped([3.0, 2.0, 1.0]) == [3.0, 2.0, 1.0]
    point = {"num_layers": 5, "hidden": 30, "adjacency": "sym", "epsilon": 1.0,
             "gamma": 0.1}
    earlier = {"model": "swan", "seed": 0, "point": point, "source": "f.csv", "earlier": True,
               "val": [0.8, 0.7, 0.6], "test": [0.8, 0.7, 0.6]}
    repeat = {**earlier, "source": "program", "earlier": False, "val": [0.8, 0.75]}
    other = {**repeat, "point": {**point, "gamma": 1.0}}
    kept, checks = gpp.split_repeats([repeat, other, earlier])
    assert kept == [other, earlier]
    assert checks[0]["epochs"] == 2
    assert checks[0]["max_abs_val_difference"] == pytest.approx(0.05)
