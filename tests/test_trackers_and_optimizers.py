"""Logs a cluster can read, experiment trackers, and a caller's own optimiser or loss
(issue 22, items 2 and 4).

Plain per-epoch lines on stderr when nobody watches a terminal (tqdm bars only on one),
`quiet` for silence; `history.csv` and TensorBoard event files written per epoch, never
duplicating an epoch on resume; `TrainConfig.optimizer` as a function of the run's
hyper-parameters (a grid still vmaps) or a fixed optax transformation; `TrainConfig.loss`
as a function. The model is one Dense layer on the node features: it compiles in well
under a second, and one full-batch step of SGD is checkable by hand.
"""

from __future__ import annotations

import re
import struct
import sys
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from swan_jax.data.batching import budget_for, iterate_batches
from swan_jax.losses import mse
from swan_jax.train import TrainConfig, train
from swan_jax.train._trackers import CSV_FILE, TENSORBOARD_DIR
from tests.train_script import line_swap_dataset, splits

LINE = re.compile(r"^epoch (\d+)/(\d+)  loss \S+  val \S+  best \S+ \(epoch \d+\)  "
                  r"active \d+/\d+  \S+ s/epoch  ETA \S+ (s|min|h|days)(  \(.+\))?$")


class NodeDense(nn.Module):
    """One Dense layer on every node's features: `[rows, 1]` predictions."""

    @nn.compact
    def __call__(self, graph):
        return nn.Dense(1)(graph.nodes)


def model_fn(hp):
    return NodeDense()


def make_sgd(hp):
    """A caller's optimiser: plain SGD at the run's (traced) learning rate."""
    return optax.sgd(hp["learning_rate"])


@pytest.fixture(scope="module")
def data():
    return splits(line_swap_dataset(num_graphs=14))  # 6 train, 4 val, 4 test graphs


def tiny(**kwargs) -> TrainConfig:
    return TrainConfig(**{"epochs": 2, "batch_size": 3, "progress": False, **kwargs})


def lines_of(err: str) -> list[str]:
    """The plain epoch lines of stderr."""
    return [line for line in err.splitlines() if LINE.match(line)]


@pytest.fixture
def not_a_notebook(monkeypatch):
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)


# ------------------------------------------------------------------ lines and bars


@pytest.mark.parametrize("progress", [True, False])
def test_without_a_terminal_each_epoch_is_one_plain_line(progress, data, capsys,
                                                         not_a_notebook):
    capsys.readouterr()
    train(model_fn, data, tiny(epochs=3, progress=progress, seeds=(0, 1)))
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = lines_of(err)
    assert [LINE.match(line).group(1, 2) for line in lines] == [("1", "3"), ("2", "3"),
                                                                ("3", "3")], err
    assert all("active 2/2" in line for line in lines)
    assert not any(line.endswith(")") and "  (" in line.split("ETA")[1] for line in lines)
    train(model_fn, data, tiny(epochs=1, progress=progress, description="cell/swan"))
    [named] = lines_of(capsys.readouterr().err)  # a sweep's program says which it is
    assert named.endswith("  (cell/swan)")


def test_quiet_prints_no_epoch_and_a_terminal_keeps_the_bars(data, capsys, monkeypatch,
                                                             not_a_notebook):
    capsys.readouterr()
    train(model_fn, data, tiny(quiet=True))
    assert lines_of(capsys.readouterr().err) == []
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    train(model_fn, data, tiny(progress=True))
    err = capsys.readouterr().err
    assert "\r" in err and lines_of(err) == []  # tqdm redraws; no plain line


# ------------------------------------------------------------------------ trackers


def read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    header, *rows = [line.split(",") for line in path.read_text().splitlines()]
    return header, rows


def test_csv_has_one_row_per_epoch_and_resume_does_not_duplicate(data, tmp_path):
    folder = tmp_path / "program"
    cfg = tiny(seeds=(0, 1), trackers=("csv",), checkpoint_dir=str(folder),
               checkpoint_seconds=0)
    first = train(model_fn, data, cfg)
    header, rows = read_csv(folder / CSV_FILE)
    assert header[:5] == ["epoch", "train_loss", "val", "test", "lr"]
    assert {"train_loss/run0", "val/run1", "seconds"} <= set(header)
    assert [row[0] for row in rows] == ["0", "1"]
    np.testing.assert_allclose([float(r[header.index("val/run1")]) for r in rows],
                               [h["val"][1] for h in first.history])
    # A session that died after writing epoch 2 but before checkpointing it:
    with open(folder / CSV_FILE, "a") as f:
        f.write("2" + ",0" * (len(header) - 1) + "\n")
    resumed = train(model_fn, data, tiny(seeds=(0, 1), trackers=("csv",), epochs=4,
                                         checkpoint_dir=str(folder), resume=True))
    header2, rows = read_csv(folder / CSV_FILE)
    assert header2 == header and [row[0] for row in rows] == ["0", "1", "2", "3"]
    np.testing.assert_allclose([float(r[1]) for r in rows],
                               [np.mean(h["train_loss"]) for h in resumed.history])


def read_events(path: Path) -> list:
    """The events of one TFRecord file (length, its crc, the Event, the Event's crc)."""
    from tensorboardX.proto.event_pb2 import Event

    events, blob, at = [], path.read_bytes(), 0
    while at < len(blob):
        (length,) = struct.unpack("<Q", blob[at:at + 8])
        events.append(Event.FromString(blob[at + 12:at + 12 + length]))
        at += 12 + length + 4
    return events


def test_tensorboard_events_hold_each_epochs_scalars(data, tmp_path):
    folder = tmp_path / "program"
    result = train(model_fn, data, tiny(trackers=("tensorboard",),
                                        checkpoint_dir=str(folder)))
    [first] = (folder / TENSORBOARD_DIR).glob("events.out.tfevents.*")
    events = read_events(first)
    scalars = {(v.tag, e.step): v.simple_value for e in events for v in e.summary.value}
    assert {tag for tag, _ in scalars} == {"train_loss", "val", "test", "lr", "seconds"}
    for h in result.history:
        assert scalars["train_loss", h["epoch"]] == pytest.approx(h["train_loss"][0])
        assert scalars["val", h["epoch"]] == pytest.approx(h["val"][0])
    # A resumed session writes its own file, which starts with a purge at the resume
    # epoch (TensorBoard drops the older events from there on) and holds only new epochs.
    train(model_fn, data, tiny(trackers=("tensorboard",), checkpoint_dir=str(folder),
                               epochs=3, resume=True))
    files = set((folder / TENSORBOARD_DIR).glob("events.out.tfevents.*"))
    [second] = files - {first}
    events = read_events(second)
    assert [e.step for e in events if e.HasField("session_log")] == [2]
    assert {e.step for e in events if e.summary.value} == {2}


def test_tracker_refusals_come_before_any_compute(monkeypatch, capsys):
    with pytest.raises(ValueError, match=r"write into the program's folder: set "
                                         r"checkpoint_dir"):
        train(model_fn, {}, tiny(trackers=("csv",)))  # no data needed to refuse
    with pytest.raises(ValueError, match=r"unknown tracker 'cvs'; valid: csv, tensorboard"):
        TrainConfig(trackers=("cvs",))
    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # as if not installed
    expected = ('the tensorboard tracker needs the tensorboardX package: '
                'pip install "swan-jax[tensorboard]"')
    with pytest.raises(ValueError, match=re.escape(expected)):
        TrainConfig(trackers=("tensorboard",))
    from swan_jax.experiments import lrgb

    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        lrgb.main(["--all", "--tracker", "csv,tensorboard", "--dry-run"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and err[-1] == f"swan-lrgb: error: {expected}", err


# ---------------------------------------------------------------------- optimisers


def sgd_by_hand(data, seed: int, lr: float):
    """The parameters after one full-batch SGD step, computed without `train`."""
    train_split = data["train"]
    batch = next(iterate_batches(train_split, len(train_split),
                                 budget_for(list(data.values()), len(train_split))))
    params = NodeDense().init(jax.random.PRNGKey(seed), batch.graph)

    def loss(p):
        pred = NodeDense().apply(p, batch.graph)
        return mse(pred, jnp.asarray(batch.node_targets), jnp.asarray(batch.node_mask))

    grads = jax.grad(loss)(params)
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)


def run_params(result, run: int):
    return jax.tree_util.tree_map(lambda x: np.asarray(x[run]), result.best_params)


def test_a_function_optimizer_vmaps_a_grid_and_equals_sgd_by_hand(data):
    grid = ({"learning_rate": 0.5}, {"learning_rate": 0.05})
    one_step = tiny(epochs=1, batch_size=len(data["train"]), optimizer=make_sgd)
    result = train(model_fn, data, one_step, grid)
    for run, point in enumerate(grid):
        want = sgd_by_hand(data, 0, point["learning_rate"])
        jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5,
                                                                       atol=1e-7),
                               run_params(result, run), want)
    kernels = [run_params(result, run)["params"]["Dense_0"]["kernel"] for run in (0, 1)]
    assert not np.allclose(*kernels)  # each run stepped at its own rate
    # The fingerprint names the function, never its memory address.
    assert one_step.identity()["optimizer"] == f"custom {__name__}.make_sgd"


def test_a_fixed_transformation_trains_and_refuses_what_cannot_reach_it(data):
    fixed = train(model_fn, data, tiny(epochs=1, optimizer=optax.sgd(0.5)))
    by_fn = train(model_fn, data, tiny(epochs=1, optimizer=make_sgd, learning_rate=0.5))
    assert [h["train_loss"] for h in fixed.history] == [h["train_loss"]
                                                        for h in by_fn.history]
    message = r"optimizer is a fixed optax.GradientTransformation, .* a learning_rate grid axis"
    with pytest.raises(ValueError, match=message):
        train(model_fn, data, tiny(optimizer=optax.sgd(0.5)), ({"learning_rate": 0.1},))
    with pytest.raises(ValueError, match=r"the plateau schedule cannot reach it"):
        TrainConfig(optimizer=optax.sgd(0.5), schedule="plateau")
    with pytest.raises(ValueError, match=r"unknown optimizer 'adm'; valid: adam, adamw; "
                                         r"did you mean 'adam'\?"):
        TrainConfig(optimizer="adm")


def test_a_function_loss_is_the_one_trained_and_reported(data):
    one_step = tiny(epochs=1, batch_size=len(data["train"]), optimizer=make_sgd,
                    learning_rate=0.5)
    named = train(model_fn, data, one_step)
    doubled = train(model_fn, data, TrainConfig(**{
        **{f: getattr(one_step, f) for f in ("epochs", "batch_size", "optimizer")},
        "learning_rate": 0.25, "progress": False,
        "loss": lambda p, t, m: 2.0 * mse(p, t, m)}))
    # The step's loss is the function's (twice the named one) and so is its gradient:
    # SGD at half the rate lands on the same parameters.
    np.testing.assert_allclose(doubled.history[0]["train_loss"],
                               2.0 * np.asarray(named.history[0]["train_loss"]), rtol=1e-6)
    jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5),
                           run_params(doubled, 0), run_params(named, 0))
    with pytest.raises(ValueError, match=r"unknown loss 'mes'.*did you mean 'mse'\?"):
        TrainConfig(loss="mes")
