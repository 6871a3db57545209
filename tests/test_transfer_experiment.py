"""experiments/transfer.py: CLI, end-to-end results + figure, vmapped seeds, resume."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_experiment():
    spec = importlib.util.spec_from_file_location("transfer_experiment",
                                                  ROOT / "experiments" / "transfer.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


T = _load_experiment()

TINY = ["--train-size", "8", "--val-size", "4", "--test-size", "4", "--epsilon", "0.1",
        "--beta", "1", "--adjacency", "sym", "--seeds", "0,1", "--no-progress"]


def tiny_config(tmp: Path, **changes) -> T.TransferConfig:
    cfg = T.TransferConfig(sizes=(8, 4, 4), epsilon=(0.1,), beta=(1.0,), adjacency=("sym",),
                           seeds=(0, 1), epochs=4, patience=None, progress=False,
                           cache_dir=tmp / "cache", results_dir=tmp / "results")
    return dataclasses.replace(cfg, **changes)


def losses(result, run=None):
    """Per-epoch (train loss, val metric) of every run, or of one run."""
    pick = (lambda v: v) if run is None else (lambda v: v[run])
    return [(pick(h["train_loss"]), pick(h["val"])) for h in result.history]


def test_cli_needs_a_cell_or_all_and_all_is_the_paper_grid():
    with pytest.raises(SystemExit):
        T.parse_args(["--topology", "ring"])
    cfg = T.parse_args(["--all"])
    assert cfg.topologies == ("line", "ring", "crossed-ring")
    assert cfg.distances == (3, 5, 10, 50)
    assert cfg.models == ("swan", "adgn", "gcn", "gin", "sage", "gat")
    assert (cfg.epochs, cfg.patience, cfg.lr, cfg.seeds) == (2000, 100, (1e-3,), (0, 1, 2, 3))
    quick = T.parse_args(["--all", "--distances", "3,5", "--models", "swan,gcn", "--epochs",
                          "7", "--train-size", "50"])
    assert (quick.distances, quick.models, quick.epochs, quick.sizes[0]) == (
        (3, 5), ("swan", "gcn"), 7, 50)
    # SWAN: one program per A_hat with 2 epsilons x 4 betas; ADGN no beta; baselines lr only.
    assert [(a, len(g)) for a, g in T.model_grids("swan", cfg)] == [("adj", 8), ("sym", 8)]
    assert [(a, len(g)) for a, g in T.model_grids("adgn", cfg)] == [("adj", 2), ("sym", 2)]
    assert T.model_grids("gat", cfg) == [(None, [{"learning_rate": 1e-3}])]


@pytest.mark.slow
def test_end_to_end_writes_results_and_figure_and_skips_done_cells(tmp_path):
    argv = ["--topology", "line", "--distance", "3", "--model", "swan,gcn", "--epochs", "3",
            "--results-dir", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"),
            *TINY]
    assert T.main(argv) == 0
    payload = json.loads((tmp_path / "out" / "results.json").read_text())
    records = payload["records"]
    assert [(r["topology"], r["distance"], r["model"]) for r in records] == [
        ("line", 3, "swan"), ("line", 3, "gcn")]
    for r in records:
        assert math.isfinite(r["test_mse_mean"]) and r["test_mse_std"] >= 0
        assert r["seeds"] == [0, 1] and r["epochs_completed"] == 3
        assert r["wall_time_s"] > 0 and "machine" in r
    assert records[0]["best_config"] == {"adjacency": "sym", "beta": 1.0, "epsilon": 0.1,
                                         "gamma": 0.1, "learning_rate": 1e-3}
    png = (tmp_path / "out" / "transfer.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SystemExit, match="exists; pass --resume"):
        T.main(argv)
    assert T.main([*argv, "--resume"]) == 0  # both cells done: nothing trains
    assert json.loads((tmp_path / "out" / "results.json").read_text())["records"] == records


@pytest.fixture(scope="module")
def together(tmp_path_factory):
    """The SWAN cell with seeds 0 and 1 in one vmapped program, 4 epochs, no checkpoints."""
    tmp = tmp_path_factory.mktemp("together")
    return T.run_cell(tiny_config(tmp), "ring", 3, "swan"), tmp


@pytest.mark.slow
def test_vmapped_seeds_equal_seeds_one_by_one(together):
    cell, tmp = together
    both = cell.results["sym"]
    for run, seed in enumerate((0, 1)):
        alone = T.run_cell(tiny_config(tmp, seeds=(seed,)), "ring", 3, "swan").results["sym"]
        np.testing.assert_allclose([h["train_loss"][run] for h in both.history],
                                   [h["train_loss"][0] for h in alone.history], rtol=1e-5)
        assert both.runs[run]["test"] == pytest.approx(alone.runs[0]["test"], rel=1e-4)


@pytest.mark.slow
def test_interrupted_and_resumed_cell_ends_where_an_uninterrupted_one_does(together, tmp_path):
    cell, _ = together
    ck = tmp_path / "ck"
    first = T.run_cell(tiny_config(tmp_path, epochs=2, checkpoint_dir=ck), "ring", 3, "swan")
    assert first.record["epochs_completed"] == 2
    resumed = T.run_cell(tiny_config(tmp_path, checkpoint_dir=ck, resume=True), "ring", 3,
                         "swan")
    assert losses(resumed.results["sym"]) == losses(cell.results["sym"])
    assert resumed.results["sym"].runs == cell.results["sym"].runs
    keys = ("best_config", "test_mse_mean", "test_mse_std", "val_mse_mean", "epochs_run",
            "epochs_completed")
    assert {k: resumed.record[k] for k in keys} == {k: cell.record[k] for k in keys}
