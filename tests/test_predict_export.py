"""Inference and export: `swan-predict` and `export_run` / `load_model` round-trip a trained
toy run (a `train()` call described with `describe_models`, and an experiment's run);
exports and checkpoints of swan-jax 0.1.0's formation of V', Z' predict as they did."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import swan_jax as sj
from swan_jax import field as swan_field
from swan_jax.data import GraphDataset
from swan_jax.experiments import predict as predict_cli
from swan_jax.experiments.runs import export_run
from swan_jax.models import formation
from swan_jax.runs.checkpoint import load_run_variables
from swan_jax.runs.export import (
    PARAMS_FILE,
    SPEC_FILE,
    ExportError,
    build_model,
    describe_models,
    load_model,
    model_spec,
    save_model,
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


def test_predict_cli_as_a_subprocess_and_a_chosen_run(toy_run, capsys):
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
    # An existing output is not replaced without --overwrite (one line, exit 1). In this
    # process: the subprocess above already showed that `-m` exits with main()'s code.
    capsys.readouterr()
    assert predict_cli.main([str(tmp / "run"), "--data", str(tmp / "test.npz"),
                             "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "--overwrite" in err and len(err.strip().splitlines()) == 1


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


# ---- parameters of swan-jax 0.1.0's formation: V' = V - V^T, Z' = Z + Z^T (full raw) ----


@pytest.fixture
def old_formation(monkeypatch):
    """Inside: the field forms V', Z' as swan-jax 0.1.0 did, to compute what it computed."""
    def old():
        monkeypatch.setattr(swan_field, "antisymmetric_weight",
                            lambda v: v - jnp.matrix_transpose(v))
        monkeypatch.setattr(swan_field, "symmetric_weight", lambda z: z + jnp.matrix_transpose(z))
    return old


@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3), (4, 2, 3, 3)])
def test_the_old_formations_weights_come_back_exactly(shape):
    """`antisymmetric_weight(triu(V - V^T, 1)) = V - V^T` and `symmetric_weight(triu(Z +
    Z^T, 1) + diag(Z)) = Z + Z^T` bit for bit, on the last two axes, NumPy and JAX."""
    rng = np.random.default_rng(0)
    v, z = (rng.normal(size=shape).astype(np.float32) for _ in range(2))
    for xp in (np, jnp):
        new_v = formation.antisymmetric_from_old(xp.asarray(v))
        new_z = formation.symmetric_from_old(xp.asarray(z))
        assert type(new_v) is type(xp.asarray(v)) and new_v.shape == shape
        np.testing.assert_array_equal(swan_field.antisymmetric_weight(new_v),
                                      v - np.swapaxes(v, -1, -2))
        np.testing.assert_array_equal(swan_field.symmetric_weight(new_z),
                                      z + np.swapaxes(z, -1, -2))


def _tiny_model(variant: str, weight_sharing: bool = True):
    cfg = sj.SWANConfig(variant=variant, num_layers=2, epsilon=0.5, beta=0.7,
                        weight_sharing=weight_sharing)
    return sj.Model(sj.LinearEncoder(4), sj.SWANBlock(cfg), sj.NodeReadout((2,)))


def _write_old_export(path: Path, model, variables) -> Path:
    """An export as swan-jax 0.1.0 wrote it: the same files, format 1."""
    save_model(path, model, variables, task_level="node")
    spec = json.loads((path / SPEC_FILE).read_text())
    (path / SPEC_FILE).write_text(json.dumps({**spec, "format": 1}))
    return path


@pytest.mark.parametrize("variant,weight_sharing,changed", [
    ("swan", False, True), ("swan-ne", True, True), ("swan-beta0", True, True),
    ("adgn", True, False)])
def test_an_old_export_predicts_what_it_predicted(tmp_path, old_formation, variant,
                                                  weight_sharing, changed):
    """A format-1 export (0.1.0's V - V^T, Z + Z^T) loads converted: today's field gives
    the function 0.1.0 gave with its raw V, Z. adgn's loads unchanged."""
    model = _tiny_model(variant, weight_sharing)
    rng = np.random.default_rng(1)
    graph = sj.graph.undirected_graph([(0, 1), (1, 2), (2, 3), (1, 4)], 5,
                                      nodes=rng.normal(size=(5, 3)).astype(np.float32))
    variables = jax.tree_util.tree_map(np.asarray, model.init(jax.random.PRNGKey(0), graph))
    loaded = load_model(_write_old_export(tmp_path / "old", model, variables))
    today = np.asarray(model.apply(variables, graph))
    old_formation()
    before = np.asarray(jax.jit(model.apply)(variables, graph))
    assert np.abs(before - today).max() > 1e-4 if changed else np.array_equal(before, today)
    np.testing.assert_allclose(np.asarray(jax.jit(loaded.model.apply)(loaded.variables, graph)),
                               before, rtol=1e-6, atol=1e-7)
    if not changed:
        jax.tree_util.tree_map(np.testing.assert_array_equal, loaded.variables, variables)


def test_an_old_export_its_model_cannot_tell_is_one_line(tmp_path):
    """Two SWAN blocks, one Phi antisymmetric and one not: which field is whose is not
    in the spec, so a format-1 export of it is refused, not guessed."""
    blocks = {"W": np.zeros((2, 2), np.float32), "V": np.ones((2, 2), np.float32),
              "b": np.zeros(2, np.float32)}
    model = sj.Model(sj.LinearEncoder(2), sj.SWANBlock(sj.SWANConfig(variant="adgn")),
                     sj.SWANBlock(sj.SWANConfig(variant="swan-beta0")))
    path = _write_old_export(tmp_path / "old", model,
                             {"params": {"processor": {"field": blocks},
                                         "readout": {"field": blocks}}})
    with pytest.raises(ExportError) as err:
        load_model(path)
    assert str(err.value) == (
        f"{path} was saved by swan-jax 0.1.0, whose field formed V - V^T and Z + Z^T from "
        f"the full raw V, Z, and its model does not say which of its 2 SWAN block(s) form "
        f"Phi's weight as V - V^T: open it with swan-jax 0.1.0")
    assert (path / PARAMS_FILE).is_file()


def _as_old_checkpoints(run: Path, copy: Path) -> Path:
    """A copy of a program folder whose checkpoints say fingerprint format 2 (0.1.0's)."""
    import shutil

    shutil.copytree(run, copy)
    for meta in copy.glob("[0-9]*/meta/metadata"):
        payload = json.loads(meta.read_text())
        meta.write_text(json.dumps({**payload, "fingerprint_format": 2}))
    return copy


def test_an_old_checkpoint_opens_as_the_function_it_trained(toy_run, tmp_path, old_formation,
                                                            capsys):
    """`load_run_variables(model=)`, `open_run` and `swan-predict` on a program folder of
    0.1.0's formation convert its parameters exactly (its predictions as 0.1.0 made them);
    without the model, one line (tests/test_train.py: a baseline's opens as it is)."""
    tmp, _, test = toy_run
    old = _as_old_checkpoints(tmp / "run", tmp_path / "old")
    opened = predict_cli.open_model(tmp / "run", run=1)
    raw = load_run_variables(tmp / "run", 1)  # format 3: as saved
    with pytest.raises(formation.OldFormation,
                       match=r"^the checkpoint .+ was saved by swan-jax 0\.1\.0, whose field "
                             r"formed V - V\^T and Z \+ Z\^T from the full raw V, Z; "
                             r"today's field reads them as another function: pass model="):
        load_run_variables(old, 1)
    today = predict(opened.model, raw, test, level="node")
    predicted, _ = predict_cli.predict_run(old, test, run=1)
    converted = load_run_variables(old, 1, model=opened.model)
    from swan_jax import analysis  # the notebooks' loader: the same conversion, or one line

    with pytest.raises(formation.OldFormation, match="pass model="):
        analysis.load_checkpoint_params(old, 1)
    jax.tree_util.tree_map(np.testing.assert_array_equal, converted,
                           analysis.load_checkpoint_params(old, 1, model=opened.model))
    assert predict_cli.main([str(old), "--data", str(tmp / "test.npz"), "--run", "1",
                             "--out", str(tmp_path / "p.npz")]) == 0
    old_formation()
    before = predict(opened.model, raw, test, level="node")
    assert np.abs(before - today).max() > 1e-6  # the two formations differ here
    np.testing.assert_allclose(predicted, before, rtol=1e-6, atol=1e-7)
    with np.load(tmp_path / "p.npz") as f:
        np.testing.assert_array_equal(f["predictions"], predicted)
    np.testing.assert_allclose(predict(opened.model, converted, test, level="node"), before,
                               rtol=1e-6, atol=1e-7)
    capsys.readouterr()


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
