"""Inference and export: `swan-predict` and `export_run` / `load_model` round-trip a trained
toy run (a `train()` call described with `describe_models`, and an experiment's run)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest

from swan_jax.data import GraphDataset
from swan_jax.experiments import predict as predict_cli
from swan_jax.experiments.runs import export_run
from swan_jax.runs.export import (
    ExportError,
    build_model,
    describe_models,
    load_model,
    model_spec,
)
from swan_jax.runs.inference import predict
from swan_jax.train import TrainConfig, train
from tests.train_script import GRID, line_swap_dataset, model_fn, splits

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """Two grid points x two seeds, two epochs, on 24 six-node paths."""
    tmp = tmp_path_factory.mktemp("toy")
    cfg = TrainConfig(epochs=2, batch_size=4, seeds=(0, 1), checkpoint_dir=str(tmp / "run"),
                      progress=False)
    data = splits(line_swap_dataset())
    result = train(model_fn, data, cfg, GRID, describe=describe_models(model_fn, GRID))
    data["test"].save(tmp / "test.npz")
    return tmp, result, data["test"]


def test_predict_cli_reproduces_the_best_runs_test_metric(toy_run):
    tmp, result, test = toy_run
    out = tmp / "pred.npz"
    assert predict_cli.main([str(tmp / "run"), "--data", str(tmp / "test.npz"),
                             "--out", str(out)]) == 0
    with np.load(out) as f:
        predictions, run, level = f["predictions"], int(f["run"]), str(f["level"])
        np.testing.assert_array_equal(f["n_node"], test.n_node)
    best = int(np.argmin([r["best_val"] for r in result.runs]))
    assert run == best and level == "node"
    assert predictions.shape == test.node_targets.shape
    # The best epoch's parameters: the test MSE train() reported for that run.
    mse = float(np.mean((predictions - test.node_targets) ** 2))
    np.testing.assert_allclose(mse, result.runs[best]["test"], rtol=1e-5)


def test_predict_cli_as_a_subprocess_and_a_chosen_run(toy_run):
    tmp, result, test = toy_run
    out = tmp / "pred_run0.npz"
    done = subprocess.run([sys.executable, "-m", "swan_jax.experiments.predict",
                           str(tmp / "run"), "--data", str(tmp / "test.npz"), "--out", str(out),
                           "--run", "0"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    with np.load(out) as f:
        assert int(f["run"]) == 0
        mse = float(np.mean((f["predictions"] - test.node_targets) ** 2))
    np.testing.assert_allclose(mse, result.runs[0]["test"], rtol=1e-5)
    # An existing output is not replaced without --overwrite (one line, exit 1).
    again = subprocess.run([sys.executable, "-m", "swan_jax.experiments.predict",
                            str(tmp / "run"), "--data", str(tmp / "test.npz"), "--out",
                            str(out)], capture_output=True, text=True, cwd=ROOT)
    assert again.returncode == 1 and "--overwrite" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1


def test_export_opens_with_swan_jax_alone_and_predicts_the_same(toy_run):
    tmp, _, test = toy_run
    path = export_run(tmp / "run", tmp / "export")
    spec = json.loads((path / "model.json").read_text())
    assert spec["task_level"] == "node" and spec["model"]["module"] == "swan_jax.models.Model"
    # A fresh interpreter that imports no experiment module opens the export.
    code = ("import sys, numpy as np; from swan_jax.runs.export import load_model; "
            "from swan_jax.runs.inference import predict; from swan_jax.data import GraphDataset; "
            f"m = load_model({str(path)!r}); d = GraphDataset.read({str(tmp / 'test.npz')!r}); "
            "np.save(sys.argv[1], predict(m.model, m.variables, d, level=m.task_level)); "
            "bad = [k for k in sys.modules if k.startswith('swan_jax.experiments')]; "
            "assert not bad, bad")
    done = subprocess.run([sys.executable, "-c", code, str(tmp / "exported.npy")],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    direct, _ = predict_cli.predict_run(tmp / "run", test)
    np.testing.assert_array_equal(np.load(tmp / "exported.npy"), direct)
    # swan-predict takes the export folder as well.
    out = tmp / "from_export.npz"
    assert predict_cli.main([str(path), "--data", str(tmp / "test.npz"), "--out", str(out)]) == 0
    with np.load(out) as f:
        np.testing.assert_array_equal(f["predictions"], direct)


def test_model_spec_round_trip_keeps_every_field():
    module = model_fn({"epsilon": np.float32(0.5), "beta": np.float32(-1.0)})
    rebuilt = build_model(json.loads(json.dumps(model_spec(module))))
    assert rebuilt == module  # Flax modules compare by their fields


def test_spec_refuses_code_outside_swan_jax(tmp_path):
    with pytest.raises(ExportError, match="outside swan_jax"):
        build_model({"module": "os.system", "fields": {}})
    with pytest.raises(ExportError, match="lambda|only functions"):
        from swan_jax.models import MLP

        model_spec(MLP((2,), activation=lambda x: x))
    with pytest.raises(FileNotFoundError, match="not a swan-jax export"):
        load_model(tmp_path)


def test_predict_errors_are_one_line(toy_run, tmp_path, capsys):
    tmp, _, _ = toy_run
    assert predict_cli.main([str(tmp_path), "--data", str(tmp / "test.npz"),
                             "--out", str(tmp_path / "p.npz")]) == 1
    assert "not a program folder" in capsys.readouterr().err
    (tmp_path / "junk.npz").write_bytes(b"no")
    assert predict_cli.main([str(tmp / "run"), "--data", str(tmp_path / "junk.npz"),
                             "--out", str(tmp_path / "p.npz")]) == 1
    err = capsys.readouterr().err.strip()
    assert "--data" in err and len(err.splitlines()) == 1
    with pytest.raises(ValueError, match="level"):
        predict(None, None, line_swap_dataset(4), level="edge")


def test_graphs_of_another_feature_width_are_one_line(toy_run, tmp_path, capsys):
    """Issue 41: was Flax's and XLA's 25-line shape error from inside the model."""
    tmp, _, test = toy_run
    wide = dataclasses.replace(test, nodes=np.ones((test.nodes.shape[0], 3), np.float32))
    wide.save(tmp_path / "wide.npz")
    assert predict_cli.main([str(tmp / "run"), "--data", str(tmp_path / "wide.npz"),
                             "--out", str(tmp_path / "p.npz")]) == 1
    [line] = capsys.readouterr().err.splitlines()
    edges = "no" if test.edges is None else test.edges.shape[1]
    assert line.startswith(f"swan-predict: these graphs do not fit the model: 3 node "
                           f"feature(s) and {edges} edge feature(s) per row, and applying it "
                           f"fails (")
    assert line.endswith("give graphs featurised as its training data were")
    assert not (tmp_path / "p.npz").exists()


def test_an_experiment_run_predicts_its_own_test_metric(tmp_path):
    """A sweep's program folder (here graph transfer, tiny): run.json names the experiment."""
    from swan_jax.data.transfer import load_transfer
    from swan_jax.experiments.transfer import main as transfer_main

    code = transfer_main(["--topology", "line", "--distance", "3", "--model", "swan",
                          "--hidden", "4", "--train-size", "8", "--val-size", "4",
                          "--test-size", "4", "--epochs", "2", "--seeds", "0", "--lr", "0.01",
                          "--epsilon", "0.5", "--gamma", "0.1", "--beta", "1",
                          "--adjacency", "sym", "--results-dir", str(tmp_path / "res"),
                          "--cache-dir", str(tmp_path / "cache"), "--no-progress"])
    assert code == 0
    [folder] = [p.parent for p in (tmp_path / "res").rglob("run.json")]
    results = json.loads((tmp_path / "res" / "results.json").read_text())
    [record] = results["records"]
    test = load_transfer("line", 3, cache_dir=tmp_path / "cache", sizes=(8, 4, 4))["test"]
    predictions, opened = predict_cli.predict_run(folder, test)
    assert opened.task_level == "node"
    mse = float(np.mean((predictions - test.node_targets) ** 2))
    np.testing.assert_allclose(mse, record["runs"][0]["test"], rtol=1e-5)
    # ... and exports: the experiment rebuilds the model, the export holds it as a spec
    loaded = load_model(export_run(folder, tmp_path / "export"))
    np.testing.assert_array_equal(
        predict(loaded.model, loaded.variables, test, level=loaded.task_level), predictions)


def test_console_scripts_point_at_functions():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for name in ("swan-predict", "swan-results"):
        module, _, function = scripts[name].partition(":")
        assert callable(getattr(__import__(module, fromlist=[function]), function))


def test_dataset_round_trip_through_save_and_read(tmp_path):
    data = line_swap_dataset(3)
    data.save(tmp_path / "d.npz")
    loaded = GraphDataset.read(tmp_path / "d.npz")
    with zipfile.ZipFile(tmp_path / "d.npz") as archive:  # caches stay small on disk
        assert {m.compress_type for m in archive.infolist()} == {zipfile.ZIP_DEFLATED}
    for field in ("nodes", "senders", "receivers", "n_node", "n_edge", "node_targets"):
        np.testing.assert_array_equal(getattr(loaded, field), getattr(data, field))
    with pytest.raises(FileNotFoundError, match="GraphDataset.save"):
        GraphDataset.read(tmp_path / "nothing.npz")
