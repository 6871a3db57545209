"""The graph-property experiment end to end on tiny data: results.json, table.md, resume,
flags."""

from __future__ import annotations

import json

import pytest

from swan_jax.experiments import graphprop as gp
from swan_jax.experiments import sweep

TINY = ["--hidden", "4", "--layers", "2", "--epsilon", "0.1", "--gamma", "0.1", "--beta", "1",
        "--adjacency", "sym", "--epochs", "2", "--seeds", "0,1", "--per-size", "6,3,3",
        "--node-counts", "6,7", "--no-progress"]


def test_tiny_sweep_writes_results_and_table_and_resumes(tmp_path, monkeypatch):
    calls = []
    real_loader = gp.graphprop.load_graphprop

    def spy(task, label_columns="paper", **kwargs):
        calls.append((task, label_columns, kwargs))
        return real_loader(task, label_columns=label_columns, **kwargs)

    monkeypatch.setattr(gp.graphprop, "load_graphprop", spy)
    out = tmp_path / "results"
    argv = ["--task", "sssp,diameter", "--label-columns", "adgn", "--variant", "swan",
            "--results-dir", str(out), "--cache-dir", str(tmp_path / "cache"), *TINY]
    assert gp.main(argv) == 0

    # The label-columns flag and the reduced sizes reach the loader.
    assert [(t, lc) for t, lc, _ in calls] == [("sssp", "adgn"), ("diameter", "adgn")]
    assert calls[0][2]["per_size"] == {"train": 6, "val": 3, "test": 3}
    assert calls[0][2]["nodes"]["test"] == (6, 7)

    payload = json.loads((out / "results.json").read_text())
    assert len(payload["records"]) == 2
    cells = {c["task"]: c for c in payload["cells"]}
    assert set(cells) == {"sssp", "diameter"}
    for task, cell in cells.items():
        assert cell["label_columns"] == "adgn" and cell["model"] == "swan"
        assert isinstance(cell["test_mean"], float) and cell["test_mean"] == cell["test_mean"]
        best = cell["best_hparams"]
        assert best["num_layers"] == 2 and best["adjacency"] == "sym"
        assert cell["paper"] == list(gp.PAPER["swan"][gp.TASKS.index(task)])
    record = payload["records"][0]
    assert len(record["runs"]) == 2 and {r["seed"] for r in record["runs"]} == {0, 1}
    # Node-level readout for sssp, pooled graph-level readout for diameter: both trained.
    assert all(r["epochs_run"] == 2 for rec in payload["records"] for r in rec["runs"])

    table = (out / "table.md").read_text()
    assert "## Label setting `adgn`" in table and "-3.2370 ± 0.0834" in table
    sssp = cells["sssp"]
    assert f"{sssp['test_mean']:.4f} ± {sssp['test_std']:.4f}" in table
    assert list((out / "checkpoints" / "sssp" / "adgn" / "swan").iterdir())

    # A second invocation without --resume / --overwrite refuses to clobber the results...
    with pytest.raises(SystemExit, match="exists; pass --resume"):
        gp.main(argv)

    # ...and with --resume it trains nothing and rewrites the same table.
    def no_training(*args, **kwargs):
        raise AssertionError("resume retrained a finished point")

    monkeypatch.setattr(sweep, "train", no_training)
    assert gp.main([*argv, "--resume"]) == 0
    assert (out / "table.md").read_text() == table


def test_cli_builds_the_paper_grid_and_model_lists():
    cfg = gp.parse_config(["--all"])
    assert cfg.tasks == ("diameter", "sssp", "eccentricity")
    assert cfg.label_columns == ("paper", "adgn")
    assert {"swan", "swan-learn", "swan-ld", "swan-beta0", "swan-ne", "swan-learn-ne",
            "adgn"} <= set(cfg.models)
    assert (cfg.epochs, cfg.patience, cfg.grid["weight_decay"], cfg.grid["learning_rate"]) == (
        1500, 100, (1e-6,), (0.003,))

    def plan(model):
        return gp.EXPERIMENT.plan(cfg, [{"task": "sssp", "label_columns": "paper",
                                         "model": model}])

    assert {len(p.grid) for p in plan("swan")} == {3 * 2 * 6}
    assert {len(p.grid) for p in plan("adgn")} == {3 * 2}  # no Psi: beta collapses
    assert len(plan("swan")) == 24  # hidden x layers x A_hat: one program each

    ld = gp.parse_config(
        ["--variant", "swan,swan-learn", "--layer-dependent", "--label-columns", "adgn"])
    assert ld.models == ("swan-ld", "swan-learn-ld") and ld.label_columns == ("adgn",)
    with pytest.raises(SystemExit):
        gp.parse_config(["--variant", "adgn", "--layer-dependent"])
