"""The node-classification experiment (the paper's scalability table) end to end on a tiny
synthetic graph in the Tolokers file format: plan, training, pooled summary, timings,
missing data, resume. (That a split's non-training labels cannot affect training is
`test_sweep.test_a_node_split_trains_on_its_own_nodes_only`.)"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from swan_jax.experiments import node_classification as nce
from swan_jax.experiments import sweep
from tests.test_node_classification import make_arxiv


def write_tolokers(root: Path, n: int = 40, splits: int = 10) -> Path:
    """`root/tolokers/tolokers.npz` in the heterophily layout: a ring with chords (each
    undirected edge stored once), label = first feature > 0.5, 10 splits of 20/10/10."""
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(n, 4)).astype(np.float32)
    nodes = np.arange(n)
    edges = np.concatenate([np.stack([nodes, (nodes + 1) % n], 1),
                            np.stack([nodes, (nodes + 5) % n], 1)])
    masks = {k: np.zeros((splits, n), bool) for k in ("train", "val", "test")}
    for s in range(splits):
        order = np.random.default_rng(10 + s).permutation(n)
        for name, part in zip(masks, np.split(order, [n // 2, 3 * n // 4]), strict=True):
            masks[name][s, part] = True
    folder = root / "tolokers"
    folder.mkdir(parents=True)
    np.savez(folder / "tolokers.npz", node_features=x, node_labels=(x[:, 0] > 0.5).astype(int),
             edges=edges, **{f"{k}_masks": m for k, m in masks.items()})
    return root


def flags(tmp_path: Path, data: Path, *more: str) -> list[str]:
    # one layer: what these tests check (formats, splits, timings, resume, refusals) does
    # not depend on the depth, and the (unrolled) layers are what a program compiles
    return ["--data-dir", str(data), "--cache-dir", str(tmp_path / "cache"),
            "--results-dir", str(tmp_path / "res"), "--hidden", "8", "--layers", "1",
            "--no-verify-md5", "--no-download", "--no-progress", *more]


def test_the_plan_is_every_official_split_times_every_model(tmp_path):
    cfg = nce.parse_config(["--data-dir", str(tmp_path)])
    assert cfg.dataset == "tolokers" and cfg.results_dir == Path("results/tolokers")
    programs = nce.EXPERIMENT.plan(cfg)
    assert len(programs) == 30  # 10 official splits x GCN, SWAN, SWAN-learn
    assert [(p.cell["split"], p.cell["model"]) for p in programs[:4]] == [
        (0, "gcn"), (0, "swan"), (0, "swan-learn"), (1, "gcn")]  # split-major
    gcn, swan = programs[0], programs[1]
    assert set(gcn.static) == {"hidden", "num_layers"} and "epsilon" not in gcn.grid[0]
    assert swan.static["adjacency"] == "sym" and {"epsilon", "gamma", "beta"} <= set(swan.grid[0])
    assert nce.EXPERIMENT.paper(gcn.cell) == (83.64, 0.67)
    assert nce.EXPERIMENT.task_for(cfg, gcn.cell) == sweep.Task("bce", "roc_auc", "node")
    two = nce.parse_config(["--splits", "3,7", "--models", "swan"])
    assert [p.cell["split"] for p in nce.EXPERIMENT.plan(two)] == [3, 7]
    with pytest.raises(SystemExit):  # ogbn-arxiv has one official split
        nce.parse_config(["--dataset", "ogbn-arxiv", "--splits", "1"])


def test_tolokers_format_end_to_end_timings_and_resume(tmp_path, capsys, monkeypatch):
    data = write_tolokers(tmp_path / "data")
    common = flags(tmp_path, data, "--epochs", "2", "--models", "gcn,swan-learn")
    assert nce.main([*common, "--splits", "0"]) == 0
    # --resume with one more split: split 0 is skipped, split 1 trains, both pool
    capsys.readouterr()
    assert nce.main([*common, "--splits", "0,1", "--resume"]) == 0
    out = capsys.readouterr().out
    assert out.count("already in") == 2 and "0 already done" not in out
    payload = json.loads((tmp_path / "res/results.json").read_text())
    records, cells = payload["records"], payload["cells"]
    assert sorted((r["model"], r["split"]) for r in records) == [
        ("gcn", 0), ("gcn", 1), ("swan-learn", 0), ("swan-learn", 1)]
    for r in records:
        [run] = r["runs"]
        assert 0.0 <= run["test"] <= 1.0 and 0.0 <= run["val_at_best"] <= 1.0
        assert r["metric"] == "roc_auc" and r["epochs_completed"] == 2
        assert r["train_ms_per_epoch"] > 0 and r["eval_ms_per_epoch"] > 0
    assert [c["model"] for c in cells] == ["gcn", "swan-learn"]
    for c in cells:  # the splits pool into one row per model
        assert sorted(s["split"] for s in c["per_seed"]) == [0, 1]
        tests = [s["test"] for s in c["per_seed"]]
        assert c["test_mean"] == pytest.approx(np.mean(tests))
        assert c["test_std"] == pytest.approx(np.std(tests))
        assert c["train_ms_per_epoch"] > 0 and c["eval_ms_per_epoch"] > 0
    table = (tmp_path / "res/table.md").read_text()
    assert "| tolokers | gcn | ROC_AUC |" in table and "| 83.64 ± 0.67 |" in table
    assert "planned: 2 of its 10 split(s) (NOT every split)" in table
    assert "## Runtime per epoch (ms)" in table and "| 141.98 | 81.87 |" in table
    assert "| tolokers | swan-learn | 2 | " in table  # the splits each row pools
    # a history line per epoch, with the step and evaluation seconds apart
    history = Path(records[0]["checkpoint_dir"]) / "history.jsonl"
    lines = [json.loads(line) for line in history.read_text().splitlines()]
    assert [h["epoch"] for h in lines] == [0, 1]
    assert all(h["train_seconds"] > 0 and h["eval_seconds"] > 0 for h in lines)

    # everything done: a rerun trains nothing
    def no_training(*args, **kwargs):
        raise AssertionError("--resume retrained a finished program")

    monkeypatch.setattr(sweep, "train", no_training)
    assert nce.main([*common, "--splits", "0,1", "--resume"]) == 0


def test_missing_data_is_refused_before_training_or_skipped(tmp_path, capsys, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("trained without data")

    monkeypatch.setattr(sweep, "train", no_training)
    empty = tmp_path / "nothing"
    with pytest.raises(SystemExit) as refused:
        nce.main(flags(tmp_path, empty, "--dataset", "questions", "--splits", "0,1"))
    message = str(refused.value)
    assert message.startswith("missing data, nothing was trained:")
    assert ("questions / gcn / 0, questions / swan / 0, questions / swan-learn / 0, "
            "questions / gcn / 1") in message
    assert "questions/questions.npz" in message and "heterophilous-graphs" in message
    assert "--skip-missing" in message and not (tmp_path / "res").exists()
    # --skip-missing with no data at all: nothing could run, so still refused (issue 41)
    with pytest.raises(SystemExit) as refused:
        nce.main(flags(tmp_path, empty, "--dataset", "questions", "--skip-missing"))
    assert str(refused.value).startswith("no cell has its data, nothing was trained:\n  "
                                         "questions / gcn / 0")
    assert not (tmp_path / "res").exists()


def test_ogbn_arxiv_format_trains_with_accuracy(tmp_path):
    data = tmp_path / "data"
    make_arxiv(data)
    assert nce.main(flags(tmp_path, data, "--dataset", "ogbn-arxiv", "--models", "gcn",
                          "--epochs", "2")) == 0
    [cell] = json.loads((tmp_path / "res/results.json").read_text())["cells"]
    assert cell["metric"] == "accuracy" and 0.0 <= cell["test_mean"] <= 1.0
    assert cell["paper"] == [71.74, 2.90]
