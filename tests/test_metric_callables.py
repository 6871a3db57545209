"""A caller's own metric (issue 22, item 2): `TrainConfig(metric=Metric(fn, ...))`.

A function metric scores and selects like the built-in name it re-implements, on both
pipelines, on the device (jitted) or on the host (NumPy); its direction drives the best
epoch, early stopping, the plateau schedule and `best_run`; an unusable one is refused in
one line before anything compiles. The one-Dense-layer model and configuration of
`test_trackers_and_optimizers` keep every program small (and shared with those tests).
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from swan_jax.compiles import CompileCounter
from swan_jax.experiments.runs import best_run
from swan_jax.runs.inference import predict
from swan_jax.train import RUN_FILE, Metric, TrainConfig, get_metric, train
from tests.test_trackers_and_optimizers import NodeDense, model_fn, tiny
from tests.train_script import line_swap_dataset, splits


@pytest.fixture(scope="module")
def data():
    return splits(line_swap_dataset(num_graphs=14))  # as test_trackers_and_optimizers


@pytest.fixture(scope="module")
def mse_runs(data):
    """The built-in "mse" on the device pipeline (the programs of
    `test_trackers_and_optimizers`' plain-line test: the same configuration)."""
    return train(model_fn, data, tiny(epochs=3, seeds=(0, 1), pipeline="device"))


def device_mse(pred, target, mask):
    """The built-in "mse" written as a caller would, in jax.numpy (padding masked out)."""
    err = jnp.where(mask[:, None], (pred - target) ** 2, 0.0)
    return err.sum() / jnp.maximum(mask.sum() * pred.shape[1], 1)


def host_mse(pred, target, mask):
    """The same in NumPy, on the host (the real rows: `mask` is all True there)."""
    return np.mean((pred[mask] - target[mask]) ** 2)


def median_error(pred, target, mask):
    """A host-only score (NumPy's median has no sum to reduce on the device)."""
    return float(np.median(np.abs(pred[mask] - target[mask])))


def val_of(result) -> np.ndarray:
    return np.asarray([h["val"] for h in result.history])  # [epochs, runs]


@pytest.mark.parametrize("pipeline", ["device", "host"])
def test_a_metric_function_scores_and_selects_as_its_builtin_name(data, mse_runs, pipeline):
    cfg = tiny(epochs=3, seeds=(0, 1), pipeline=pipeline)
    named = mse_runs if pipeline == "device" else train(model_fn, data, cfg)
    for fn, on_device in ((device_mse, True), (host_mse, False)):
        metric = Metric(fn, higher_is_better=False, on_device=on_device)
        mine = train(model_fn, data, TrainConfig(**{**cfg.__dict__, "metric": metric}))
        np.testing.assert_allclose(val_of(mine), val_of(named), rtol=1e-6)
        np.testing.assert_allclose([r["test"] for r in mine.runs],
                                   [r["test"] for r in named.runs], rtol=1e-6)
        assert [r["best_epoch"] for r in mine.runs] == [r["best_epoch"] for r in named.runs]
        if pipeline == "host" and not on_device:  # the built-in's own NumPy mean
            assert val_of(mine).tolist() == val_of(named).tolist()


def test_the_builtin_names_are_metrics_of_the_same_kind():
    mse, ap = get_metric("mse"), get_metric("ap")
    assert isinstance(mse, Metric) and (mse.higher_is_better, ap.higher_is_better) == (
        False, True)
    assert get_metric(mse) is mse and tiny(metric=mse).identity() == tiny().identity()
    pred, target = np.asarray([[0.0], [1.0], [5.0]]), np.asarray([[0.0], [3.0], [0.0]])
    assert mse.fn(pred, target, np.asarray([True, True, False])) == pytest.approx(2.0)


def test_a_host_metric_scores_the_best_parameters_and_names_itself_in_run_json(data,
                                                                              tmp_path):
    metric = Metric(median_error, higher_is_better=False)
    folder = tmp_path / "run"
    result = train(model_fn, data, tiny(epochs=2, seeds=(0, 1), metric=metric,
                                        checkpoint_dir=str(folder), save_checkpoints=False))
    for r, record in enumerate(result.runs):
        variables = jax.tree_util.tree_map(lambda x, r=r: x[r], result.best_params)
        pred = predict(NodeDense(), variables, data["test"], level="node")
        everyone = np.ones(len(pred), bool)
        assert record["test"] == median_error(pred, data["test"].node_targets, everyone)
    described = json.loads((folder / RUN_FILE).read_text())["train"]["metric"]
    assert described == {"name": f"custom {__name__}.median_error",
                         "higher_is_better": False, "on_device": False}
    assert best_run(folder) == int(np.argmin(val_of(result).min(0)))


def test_the_direction_decides_the_best_epoch_early_stopping_and_the_plateau(data, mse_runs,
                                                                             tmp_path):
    """The validation error falls every epoch: read as an error the last epoch is best;
    read as a score to maximise (`higher_is_better=True`), epoch 0 is best, the plateau
    schedule halves the rate after one epoch without a rise and patience stops the runs."""
    assert np.all(np.diff(val_of(mse_runs), axis=0) < 0)  # the premise
    assert [r["best_epoch"] for r in mse_runs.runs] == [2, 2]
    assert [h["lr"] for h in mse_runs.history] == [mse_runs.history[0]["lr"]] * 3
    folder = tmp_path / "score"
    cfg = tiny(epochs=4, seeds=(0, 1), patience=2, schedule="plateau", plateau_patience=1,
               metric=Metric(host_mse, higher_is_better=True), checkpoint_dir=str(folder),
               save_checkpoints=False)
    score = train(model_fn, data, cfg)
    # the same numbers until the halved rate (epoch 2) trains differently
    np.testing.assert_allclose(val_of(score)[:2], val_of(mse_runs)[:2], rtol=1e-6)
    assert [(r["best_epoch"], r["epochs_run"]) for r in score.runs] == [(0, 3), (0, 3)]
    assert len(score.history) == 3  # every run stopped: the fourth epoch never ran
    lr = np.asarray([h["lr"] for h in score.history])
    np.testing.assert_allclose(lr[2], lr[0] * cfg.plateau_factor, rtol=1e-6)
    assert best_run(folder) == int(np.argmax(val_of(score).max(0)))


def _scalar(pred, target, mask):
    return jnp.mean(pred)


@pytest.mark.parametrize("make, message", [
    (lambda: tiny(metric=_scalar), "a bare function has no direction"),
    (lambda: Metric(_scalar), "missing 1 required keyword-only argument: 'higher_is_better'"),
    (lambda: Metric(_scalar, higher_is_better="max"), "higher_is_better must be True or"),
    (lambda: Metric(lambda p, t: 0.0, higher_is_better=False),
     "must take (pred, target, mask), its signature is (p, t)"),
    (lambda: tiny(metric="rmse"), "unknown metric 'rmse'"),
])
def test_an_unusable_metric_is_refused_in_one_line(make, message):
    with pytest.raises((TypeError, ValueError)) as err:
        make()
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("metric, message", [
    (Metric(lambda p, t, m: p - t, higher_is_better=False, on_device=True),
     "must return one real number (a scalar), got an array of shape ("),
    (Metric(lambda p, t, m: p - t, higher_is_better=False),
     "must return one real number (a scalar), got ndarray of shape ("),
    (Metric(lambda p, t, m: float(np.mean(p)), higher_is_better=False, on_device=True),
     "is on_device but does not trace with jax.numpy (Concretization"),
])
def test_a_metric_that_cannot_score_is_refused_before_anything_compiles(data, metric,
                                                                        message):
    with CompileCounter() as counter, pytest.raises(TypeError) as err:
        train(model_fn, data, tiny(metric=metric))
    assert message in str(err.value) and "\n" not in str(err.value)
    # eager helpers may compile (placing the first batch); the model's programs must not
    program = {"jit(init_one)", "jit(_train_chunk)", "jit(_eval_split)", "jit(_eval_scores)"}
    assert not program & set(counter.compiled), counter.compiled
