"""The graph-property experiment end to end on tiny data: results.json, table.md, resume,
flags."""

from __future__ import annotations

import json
import math

import pytest

from swan_jax.experiments import graphprop as gp
from swan_jax.experiments import sweep

TINY = ["--hidden", "4", "--layers", "2", "--epsilon", "0.1", "--gamma", "0.1", "--beta", "1",
        "--adjacency", "sym", "--epochs", "2", "--seeds", "0,1", "--per-size", "6,3,3",
        "--node-counts", "6,7", "--no-progress"]


def test_tiny_sweep_writes_results_and_table_and_resumes(tmp_path, monkeypatch):
    calls = []
    real_loader = gp.graphprop.load_graphprop

    def spy(task, labels="paper", **kwargs):
        calls.append((task, labels, kwargs))
        return real_loader(task, labels=labels, **kwargs)

    monkeypatch.setattr(gp.graphprop, "load_graphprop", spy)
    out = tmp_path / "results"
    argv = ["--task", "sssp,diameter", "--labels", "swan-code", "--variant", "swan",
            "--results-dir", str(out), "--cache-dir", str(tmp_path / "cache"), *TINY]
    assert gp.main(argv) == 0

    # The label-setting flag and the reduced sizes reach the loader (the constant
    # predictor's reference row loads every cell once more).
    assert {(t, lc) for t, lc, _ in calls} == {("sssp", "swan-code"),
                                               ("diameter", "swan-code")}
    assert calls[0][2]["per_size"] == {"train": 6, "val": 3, "test": 3}
    assert calls[0][2]["nodes"]["test"] == (6, 7)

    payload = json.loads((out / "results.json").read_text())
    assert len(payload["records"]) == 2
    cells = {c["task"]: c for c in payload["cells"]}
    assert set(cells) == {"sssp", "diameter"}
    for cell in cells.values():
        assert cell["labels"] == "swan-code" and cell["model"] == "swan"
        assert isinstance(cell["test_mean"], float) and cell["test_mean"] == cell["test_mean"]
        best = cell["best_hparams"]
        assert best["num_layers"] == 2 and best["adjacency"] == "sym"
        assert cell["paper"] is None  # the paper's numbers are the "paper" setting's only
    record = payload["records"][0]
    assert len(record["runs"]) == 2 and {r["seed"] for r in record["runs"]} == {0, 1}
    # Node-level readout for sssp, pooled graph-level readout for diameter: both trained.
    assert all(r["epochs_run"] == 2 for rec in payload["records"] for r in rec["runs"])
    # The authors' batch-averaged score of each run's best parameters: with every split in
    # one batch (3 graphs, batch 128) it is the pooled score, run by run (seeds differ).
    for rec in payload["records"]:
        assert rec["runs"][0]["test"] != rec["runs"][1]["test"]
        for run in rec["runs"]:
            assert run["authors_test"] == pytest.approx(run["test"], abs=1e-5)
            assert run["authors_val"] == pytest.approx(run["val_at_best"], abs=1e-5)
    for cell in cells.values():
        assert cell["authors_test_mean"] == pytest.approx(cell["test_mean"], abs=1e-5)
        assert cell["authors_test_std"] == pytest.approx(cell["test_std"], abs=1e-5)

    # The constant predictor's reference row, scored as the cells are.
    constant = {row["task"]: row for row in payload["constant_predictor"]}
    assert set(constant) == {"sssp", "diameter"}
    assert all(row["labels"] == "swan-code" and math.isfinite(row["test"])
               for row in constant.values())
    node_task = gp.EXPERIMENT.task_for(gp.parse_config(argv), cells["sssp"])
    assert (node_task.loss, node_task.metric) == ("graph_mean_mse", "graph_mean_log10_mse")

    table = (out / "table.md").read_text()
    assert "## Label setting `swan-code`" in table
    sssp = cells["sssp"]
    assert f"{sssp['test_mean']:.4f} ± {sssp['test_std']:.4f}" in table
    assert list((out / "checkpoints" / "sssp" / "swan-code" / "swan").iterdir())

    # A second invocation without --resume / --overwrite refuses to clobber the results...
    with pytest.raises(SystemExit, match="exists; pass --resume"):
        gp.main(argv)

    # ...and with --resume it trains nothing and rewrites the same table.
    def no_training(*args, **kwargs):
        raise AssertionError("resume retrained a finished point")

    monkeypatch.setattr(sweep, "train", no_training)
    assert gp.main([*argv, "--resume"]) == 0
    assert (out / "table.md").read_text() == table


def test_both_adjacencies_train_in_one_program(tmp_path):
    """The adjacency is traced: one program trains the sym and adj runs (each as its own
    program would: `test_gather.py`'s per-run codes and `test_transfer_experiment.py`'s
    merged cell, the same model code), and its record names each run's adjacency."""
    argv = [*TINY, "--task", "sssp", "--labels", "paper", "--variant", "swan", "--results-dir",
            str(tmp_path / "results"), "--cache-dir", str(tmp_path / "cache")]
    argv[argv.index("--adjacency") + 1] = "sym,adj"
    assert gp.main(argv) == 0
    (record,) = json.loads((tmp_path / "results" / "results.json").read_text())["records"]
    assert [r["hparams"]["adjacency"] for r in record["runs"]] == ["sym"] * 2 + ["adj"] * 2
    assert record["runs"][0]["test"] != record["runs"][2]["test"]  # they trained apart


def test_cli_builds_the_paper_grid_and_model_lists():
    cfg = gp.parse_config(["--all"])
    assert cfg.tasks == ("diameter", "sssp", "eccentricity")
    assert cfg.labels == ("paper", "faithful", "swan-code")
    assert {"swan", "swan-learn", "swan-ld", "swan-beta0", "swan-ne", "swan-learn-ne",
            "adgn"} <= set(cfg.models)
    assert (cfg.epochs, cfg.patience, cfg.grid["weight_decay"], cfg.grid["learning_rate"]) == (
        1500, 100, (1e-6,), (0.003,))

    def plan(model):
        return gp.EXPERIMENT.plan(cfg, [{"task": "sssp", "labels": "paper",
                                         "model": model}])

    # A_hat x epsilon x gamma x beta: both A_hat traced in one program
    assert {len(p.grid) for p in plan("swan")} == {2 * 3 * 2 * 6}
    assert {len(p.grid) for p in plan("adgn")} == {2 * 3 * 2}  # no Psi: beta collapses
    assert len(plan("swan")) == 12  # hidden x layers: one program each
    assert {tuple(sorted(p.grid[0])) for p in plan("gcn")} == {("learning_rate",
                                                                "weight_decay")}

    ld = gp.parse_config(
        ["--variant", "swan,swan-learn", "--layer-dependent", "--labels", "swan-code"])
    assert ld.models == ("swan-ld", "swan-learn-ld") and ld.labels == ("swan-code",)
    with pytest.raises(SystemExit):
        gp.parse_config(["--variant", "adgn", "--layer-dependent"])


def test_the_cpu_protocol_behind_results_md_loads_as_documented():
    from swan_jax.experiments.config import CONFIG_DIR

    cfg = gp.parse_config(["--config", str(CONFIG_DIR / "graphprop-cpu.toml")])
    assert [(c["task"], c["model"]) for c in gp.EXPERIMENT.cells(cfg)] == [
        (t, m) for t in ("diameter", "sssp", "eccentricity") for m in ("swan", "gcn")]
    assert (cfg.labels, cfg.epochs, cfg.seeds, cfg.per_size, cfg.batch_size) == (
        ("paper",), 60, (0, 1), (128, 32, 64), 512)
    assert all(len(v) == 1 for v in cfg.grid.values())
