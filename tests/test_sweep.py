"""The one sweep: a new experiment is a few lines; node splits of one graph fit too.

`Toy` below is a complete experiment: it declares its cell, data, model, grid (through
its config) and task, and the shared sweep does the rest: plan, programs, checkpoints,
history, results, summaries, table, figure, resolved config; `load_run` reopens any run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import swan_jax as sj
from swan_jax.data import GraphDataset
from swan_jax.experiments import (
    Experiment,
    NodeSplit,
    SweepConfig,
    Task,
    load_run,
    load_toml,
    plot_curves,
    read_history,
    run_sweep,
    sweep,
)
from swan_jax.train import TrainConfig, train
from tests.train_script import line_swap_dataset, splits


class Toy(Experiment):
    """Swap two node values along a path: one cell, `hidden` static, `epsilon` vmapped."""

    name, cell_axes, static_axes = "toy", ("task",), ("hidden",)
    task = Task(loss="mse", metric="mse", level="node")

    def cells(self, cfg):
        return [{"task": "swap"}]

    def load_data(self, cfg, cell):
        return splits(line_swap_dataset())

    def model_fn(self, cfg, cell, static):
        return lambda hp: sj.Model(sj.LinearEncoder(static["hidden"]), sj.SWANBlock(
            sj.SWANConfig(num_layers=2, epsilon=hp["epsilon"])), sj.NodeReadout((1,)))


def toy_config(tmp: Path, **changes) -> SweepConfig:
    grid = {"hidden": (4,), "epsilon": (0.1, 0.5), "learning_rate": (1e-2,)}
    return SweepConfig(**{"grid": grid, "seeds": (0, 1), "epochs": 2, "batch_size": 4,
                          "progress": False, "results_dir": tmp / "res",
                          "cache_dir": tmp / "cache", **changes})


def test_a_toy_experiment_runs_through_the_shared_sweep(tmp_path, capsys, monkeypatch):
    cfg = toy_config(tmp_path)
    written, write_outputs = [], sweep.write_outputs
    monkeypatch.setattr(sweep, "write_outputs",
                        lambda *args: written.append(args) or write_outputs(*args))
    outcome = run_sweep(Toy(), cfg)
    assert len(written) == 1  # results, table and figure once: after the program only
    out = capsys.readouterr().out
    assert out.startswith("toy plan: 1 program(s), 0 already done, 1 to train; runs per "
                          "program (grid points x 2 seed(s)): 4; up to 2 epoch(s) each")
    [cell] = outcome.cells
    assert cell["task"] == "swap" and cell["seeds"] == [0, 1] and len(cell["per_seed"]) == 2
    assert cell["best_hparams"]["hidden"] == 4 and cell["best_hparams"]["epsilon"] in (0.1, 0.5)
    assert cell["grid_points"] == 2 and np.isfinite(cell["test_mean"])
    res = tmp_path / "res"
    payload = json.loads((res / "results.json").read_text())
    assert payload["experiment"] == "toy" and payload["cells"] == outcome.cells
    assert payload["programs"] == {"planned": 1, "done": 1}
    [record] = payload["records"]
    assert len(record["runs"]) == 4 and record["epochs_completed"] == 2
    # What the report needs to say where and on what a number was measured.
    train_data = Toy().load_data(cfg, {"task": "swap"})["train"]
    assert record["data_sizes"]["train"] == {"graphs": len(train_data),
                                             "nodes": int(np.sum(train_data.n_node))}
    assert record["machine"]["cpu_count"] >= 1 and record["machine"]["device_count"] >= 1
    assert payload["notes"] == Toy().notes(cfg)
    assert "| swap | MSE |" in (res / "table.md").read_text()
    assert (res / "toy.png").read_bytes()[:4] == b"\x89PNG"
    # The resolved configuration is written beside the results and reads back equal.
    assert load_toml(SweepConfig, res / "config.toml") == cfg
    # The program's folder: run.json, history.jsonl (one line per epoch), checkpoints.
    folder = Path(record["checkpoint_dir"])
    assert folder.parent == res / "checkpoints" / "swap"
    assert folder.name.startswith("hidden=4-")
    history = read_history(folder)
    assert [h["epoch"] for h in history] == [0, 1]
    # The learning curves, in the program's folder and in the results folder.
    for curves in (folder / "curves.png", res / "curves.png"):
        assert curves.read_bytes()[:4] == b"\x89PNG"
    for h in history:
        assert {"train_loss", "val", "test", "lr", "seconds", "train_seconds",
                "eval_seconds"} <= set(h)
        assert len(h["train_loss"]) == len(h["val"]) == len(h["test"]) == 4
    # load_run: the model, variables and configuration of run 3 (epsilon 0.5, seed 1).
    model, variables, info = load_run(folder, 3)
    assert info["hparams"] == {"hidden": 4, "epsilon": 0.5, "learning_rate": 1e-2}
    assert info["seed"] == 1 and info["config"] == cfg and info["cell"] == {"task": "swap"}
    assert model.processor.cfg.epsilon == np.float32(0.5)
    graph = sj.data.make_batch(line_swap_dataset(), np.arange(1),
                               sj.data.budget_for(line_swap_dataset(), 1)).graph
    assert model.apply(variables, graph).shape == (graph.nodes.shape[0], 1)
    # The curves of the results folder.
    assert plot_curves(res).read_bytes()[:4] == b"\x89PNG"

    # Again with --resume: the program is done, nothing trains, the same cells come back.
    def no_training(*args, **kwargs):
        raise AssertionError("resume retrained a finished program")

    monkeypatch.setattr(sweep, "train", no_training)
    again = run_sweep(Toy(), toy_config(tmp_path, resume=True))
    assert again.cells == outcome.cells and len(written) == 2  # nothing trained: written once


def test_a_sweep_stopped_between_programs_says_how_many_of_its_programs_are_done(
        tmp_path, monkeypatch):
    """Its cells summarise the finished program only: the campaign must not take them for
    the cell's result (`reproduce.campaign.carry.finished`)."""
    real, calls = sweep.run_program, []

    def stopped_in_the_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep, "run_program", stopped_in_the_second)
    cfg = toy_config(tmp_path, epochs=1,
                     grid={"hidden": (4, 6), "epsilon": (0.1,), "learning_rate": (1e-2,)})
    with pytest.raises(KeyboardInterrupt):
        run_sweep(Toy(), cfg)
    payload = json.loads((tmp_path / "res" / "results.json").read_text())
    assert payload["programs"] == {"planned": 2, "done": 1} and payload["cells"]


def test_a_checkpoint_folder_without_resume_is_one_clear_line(tmp_path):
    run_sweep(Toy(), toy_config(tmp_path, epochs=1))
    (tmp_path / "res" / "results.json").unlink()  # as if killed before the results were saved
    with pytest.raises(sweep.SweepRefused, match=r"hidden=4-\w+ already holds checkpoints of "
                                                 r"swap/hidden=4: pass --resume to continue "
                                                 r"it, or --overwrite to start it again"):
        run_sweep(Toy(), toy_config(tmp_path, epochs=1))


# --- a node-classification experiment on one graph (the Tolokers shape) ----------------


def one_graph(num_nodes: int = 40, flip_outside: np.ndarray | None = None) -> GraphDataset:
    """A ring with a chord per node; label = sign of the first feature (learnable)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(num_nodes, 3)).astype(np.float32)
    y = (x[:, :1] > 0).astype(np.int32)
    if flip_outside is not None:
        y = np.where(flip_outside[:, None], y, 1 - y)
    s = np.arange(num_nodes)
    senders = np.concatenate([s, (s + 1) % num_nodes, s, (s + 7) % num_nodes])
    receivers = np.concatenate([(s + 1) % num_nodes, s, (s + 7) % num_nodes, s])
    return GraphDataset.from_graphs([dict(nodes=x, senders=senders, receivers=receivers,
                                          node_targets=y)])


def official_masks(split: int, num_nodes: int = 40) -> dict[str, np.ndarray]:
    order = np.random.default_rng(100 + split).permutation(num_nodes)
    parts = {"train": order[:20], "val": order[20:30], "test": order[30:]}
    return {name: np.isin(np.arange(num_nodes), idx) for name, idx in parts.items()}


class Nodes(Experiment):
    """Node classification on ONE graph with official splits (masks), pooled in the summary."""

    name, cell_axes, pooled_axes = "nodes", ("split",), ("split",)
    task = Task(loss="ce", metric="roc_auc", level="node")

    def cells(self, cfg):
        return [{"split": s} for s in range(2)]

    def load_data(self, cfg, cell):
        graph = one_graph()
        return {name: NodeSplit(graph, mask) for name, mask in
                official_masks(cell["split"]).items()}

    def model_fn(self, cfg, cell, static):
        return lambda hp: sj.Model(sj.LinearEncoder(8), sj.SWANBlock(
            sj.SWANConfig(num_layers=2, epsilon=hp["epsilon"])), sj.NodeReadout((2,)))


def test_node_splits_of_one_graph_train_full_batch_and_pool_over_splits(tmp_path):
    cfg = toy_config(tmp_path, grid={"epsilon": (0.5,), "learning_rate": (1e-2,)},
                     batch_size=1, epochs=3)
    outcome = run_sweep(Nodes(), cfg)
    [cell] = outcome.cells  # the two official splits pool into one row
    assert cell["metric"] == "roc_auc" and 0.0 <= cell["test_mean"] <= 1.0
    assert sorted((s["split"], s["seed"]) for s in cell["per_seed"]) == [
        (0, 0), (0, 1), (1, 0), (1, 1)]
    records = json.loads((tmp_path / "res" / "results.json").read_text())["records"]
    assert [r["split"] for r in records] == [0, 1]
    # A node split counts its own nodes, not the whole graph's.
    masks = official_masks(0)
    assert records[0]["data_sizes"] == {name: {"graphs": 1, "nodes": int(mask.sum())}
                                        for name, mask in masks.items()}
    assert int(masks["train"].sum()) < int(np.sum(one_graph().n_node))
    timing = read_history(records[0]["checkpoint_dir"])[0]
    assert timing["train_seconds"] > 0 and timing["eval_seconds"] > 0


def test_a_node_split_trains_on_its_own_nodes_only():
    masks = official_masks(0)
    tcfg = TrainConfig(epochs=2, batch_size=1, loss="ce", metric="roc_auc", seeds=(0,),
                       progress=False)

    def model_fn(hp):
        return sj.Model(sj.LinearEncoder(8), sj.SWANBlock(sj.SWANConfig(num_layers=2)),
                        sj.NodeReadout((2,)))

    def fit(graph):
        return train(model_fn, {k: NodeSplit(graph, m) for k, m in masks.items()}, tcfg)

    plain = fit(one_graph())
    # Labels outside the training nodes flipped: training is bit for bit the same, and the
    # validation metric (scored on the flipped nodes) changes.
    other = fit(one_graph(flip_outside=masks["train"]))
    assert [h["train_loss"] for h in plain.history] == [h["train_loss"] for h in other.history]
    assert plain.history[-1]["val"] != other.history[-1]["val"]
    with pytest.raises(ValueError, match=r"node_mask must be bool of shape \(40,\)"):
        NodeSplit(one_graph(), np.ones(39, bool))


# --- one configuration form -----------------------------------------------------------


@pytest.mark.parametrize("name", ["lrgb", "transfer", "graphprop"])
def test_every_experiments_configuration_round_trips_through_toml(name, tmp_path):
    import importlib

    from swan_jax.experiments import dump_toml

    module = importlib.import_module(f"swan_jax.experiments.{name}")
    cfg = module.EXPERIMENT.default_config()
    path = tmp_path / "run.toml"
    path.write_text(dump_toml(cfg, name))
    assert load_toml(module.EXPERIMENT.Config, path) == cfg


def test_config_files_are_checked_and_flags_override_them(tmp_path, capsys):
    from swan_jax.experiments import transfer

    path = tmp_path / "run.toml"
    path.write_text('topologies = ["line"]\ndistances = [5]\nmodels = ["gcn"]\nepochs = 9\n'
                    'patience = "none"\n[grid]\nepsilon = [0.25]\n')
    cfg = transfer.parse_config(["--config", str(path), "--epochs", "3"])
    assert (cfg.topologies, cfg.distances, cfg.models) == (("line",), (5,), ("gcn",))
    assert cfg.epochs == 3 and cfg.patience is None  # the flag wins; "none" is None
    assert cfg.grid["epsilon"] == (0.25,) and cfg.grid["beta"] == (1.0, 0.1, 0.01, -1.0)
    for text, message in [(None, rf"--config {tmp_path}/missing.toml: no such file"),
                          ("epochs = [", r"not valid TOML"),
                          ("epochz = 3", r"unknown setting\(s\) epochz; valid: grid, seeds")]:
        target = tmp_path / "missing.toml"
        if text is not None:
            target = tmp_path / "bad.toml"
            target.write_text(text)
        capsys.readouterr()
        with pytest.raises(SystemExit) as err:
            transfer.parse_config(["--all", "--config", str(target)])
        assert err.value.code == 2
        assert re.search(message, capsys.readouterr().err.strip().splitlines()[-1])
