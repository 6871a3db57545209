"""Several epochs per device call (`swan_jax.train._fused`): the per-epoch loop's numbers
(to float tolerance: another compiled program) and decisions, the same numbers bit for bit
wherever the blocks start and end; divergence, Ctrl-C, resume and hooks."""

from __future__ import annotations

import contextlib
import json

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from swan_jax.compiles import CompileCounter
from swan_jax.train import TrainConfig, TrainingDiverged, TrainingInterrupted, _fused, train
from swan_jax.train._evaluate import finish_sums
from tests.train_script import GRID, line_swap_dataset, model_fn, splits


@pytest.fixture(autouse=True)
def _short_runs_fuse(monkeypatch):
    """These tests' runs are a few dozen epochs of a tiny model: blocks from 8 epochs
    left on (a user's call needs `MIN_FUSED_EPOCHS`, where blocks repay their compile)."""
    monkeypatch.setattr(_fused, "MIN_FUSED_EPOCHS", 8)


@contextlib.contextmanager
def _blocks_of(most: int):
    """Blocks of at most `most` epochs (0: none, the per-epoch loop): cut where the
    measured pace, a deadline or an interruption might cut them."""
    real = _fused.EpochBlocks.length
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_fused.EpochBlocks, "length", lambda self, epoch: min(real(self, epoch),
                                                                         most))
        yield


def _train(data, grid, per_call: int, **settings):
    cfg = TrainConfig(batch_size=4, progress=False, quiet=True, pipeline="device", **settings)
    with _blocks_of(per_call):
        return train(model_fn, data, cfg, grid)


def _records(result) -> str:
    """The history without timings, as JSON: floats written exactly (`repr`), and NaN
    (a stopped run's training loss) equal to NaN."""
    return json.dumps([{k: v for k, v in h.items() if k != "seconds"}
                       for h in result.history])


def _assert_same(a, b):
    """Bit for bit: runs, history, best parameters."""
    assert a.runs == b.runs and _records(a) == _records(b)
    for x, y in zip(jax.tree_util.tree_leaves(a.best_params),
                    jax.tree_util.tree_leaves(b.best_params), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _assert_close(one, fused):
    """The same decisions (best epochs, epochs run, divergence), numbers to rtol 1e-5."""
    for a, b in zip(one.runs, fused.runs, strict=True):
        assert {k: a[k] for k in ("best_epoch", "epochs_run", "diverged", "hparams")} == \
            {k: b[k] for k in ("best_epoch", "epochs_run", "diverged", "hparams")}
        np.testing.assert_allclose([a["best_val"], a["test"]], [b["best_val"], b["test"]],
                                   rtol=1e-5)
    assert len(one.history) == len(fused.history)
    for a, b in zip(one.history, fused.history, strict=True):
        for key in ("train_loss", "val", "test", "lr"):
            np.testing.assert_allclose(a.get(key, []), b.get(key, []), rtol=1e-5)


def _assert_scores_from_the_best_epochs_records(result, compiled: list[str], settings):
    """Validation and test at the best parameters are the best epoch's record (which
    scored those very parameters), so a fused run compiles no evaluation of its own; a
    split the epochs did not score (`track_test=False`) is evaluated at the end."""
    tracked = settings.get("track_test", True)
    assert [name for name in compiled if "_eval" in name] == (
        [] if tracked else ["jit(_eval_split)"])
    for r, run in enumerate(result.runs):
        record = result.history[run["best_epoch"]]
        assert run["val_at_best"] == record["val"][r] == run["best_val"]
        assert run["test"] == record["test"][r] if tracked else np.isfinite(run["test"])


def _blocks(result) -> list[int]:
    """Epochs per device call, one entry per call."""
    sizes, epoch = [], 0
    while epoch < len(result.timings):
        sizes.append(result.timings[epoch].get("epochs_per_call", 1))
        epoch += sizes[-1]
    return sizes


@pytest.mark.parametrize("settings", [
    # runs stop at different epochs (24, 29; two run to the cap): the scenario, not a result
    {"epochs": 30, "patience": 3, "seeds": (0, 1)},
    {"epochs": 12, "schedule": "cosine", "warmup_epochs": 2, "track_test": False,
     "metric": "log10_mse"},
])
def test_blocks_give_the_per_epoch_numbers_and_the_same_bits_however_they_are_cut(settings):
    data = splits(line_swap_dataset())
    one = _train(data, GRID, 0, **settings)
    with CompileCounter() as counter:
        fused = _train(data, GRID, 64, **settings)
    short = _train(data, GRID, 3, **settings)
    _assert_close(one, fused)
    _assert_scores_from_the_best_epochs_records(fused, counter.compiled, settings)
    _assert_same(fused, short)
    assert max(_blocks(one)) == 1 and max(_blocks(short)) == 3 and max(_blocks(fused)) > 3
    if "patience" in settings:  # early stopping ended runs at different epochs
        assert len({r["epochs_run"] for r in fused.runs}) > 1


class _Drift(nn.Module):
    """A readout whose bias climbs with training; past 0.1 its predictions are infinite
    (a divergence several epochs in, at a learning-rate-dependent epoch)."""

    @nn.compact
    def __call__(self, graph):
        bias = self.param("bias", nn.initializers.zeros, ())
        return nn.Dense(1)(graph.nodes) + bias + jnp.where(bias > 0.1, jnp.inf, 0.0)


def _drift(hp):
    return _Drift()


def test_a_diverging_run_is_stopped_as_in_the_per_epoch_loop():
    grid = [{"learning_rate": 1e-4}, {"learning_rate": 4e-3}]
    cfg = dict(batch_size=4, progress=False, quiet=True, pipeline="device", epochs=16,
               on_divergence="stop_run")
    data = splits(line_swap_dataset())
    with _blocks_of(0):
        one = train(_drift, data, TrainConfig(**cfg), grid)
    fused = train(_drift, data, TrainConfig(**cfg), grid)
    _assert_close(one, fused)
    assert fused.runs[1]["diverged"] and not fused.runs[0]["diverged"]
    assert fused.runs[1]["epochs_run"] > 3
    assert 1 in _blocks(fused)[2:]  # the diverging epoch ran alone, after a block


def test_a_divergence_raises_the_per_epoch_message(tmp_path):
    messages = []
    for k in (0, 64):
        cfg = TrainConfig(epochs=16, batch_size=4, progress=False,
                          checkpoint_dir=str(tmp_path / str(k)), pipeline="device")
        with _blocks_of(k), pytest.raises(TrainingDiverged) as err:
            train(_drift, splits(line_swap_dataset()), cfg, [{"learning_rate": 4e-3}])
        messages.append(str(err.value).replace(str(tmp_path / str(k)), "DIR"))
    assert messages[0] == messages[1] and "epoch 0," not in messages[0]


def test_ctrl_c_inside_a_block_keeps_the_blocks_before_and_resume_ends_the_same(
        tmp_path, monkeypatch):
    data = splits(line_swap_dataset())
    real, calls = _fused.EpochBlocks.run, []

    def ctrl_c_in_the_fourth_block(self, *args):
        calls.append(args[2])  # the block's first epoch (run(state, hp, epoch, n))
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(self, *args)

    cfg = TrainConfig(epochs=30, batch_size=4, progress=False, pipeline="device",
                      checkpoint_dir=str(tmp_path), checkpoint_seconds=1e9)
    # the resumed call has fewer epochs left than a run needs to fuse: it fuses all the same
    monkeypatch.setattr(_fused, "MIN_FUSED_EPOCHS", 25)
    real_length = _fused.EpochBlocks.length
    monkeypatch.setattr(_fused.EpochBlocks, "length",
                        lambda self, epoch: min(real_length(self, epoch), 5))
    with monkeypatch.context() as mp:
        mp.setattr(_fused.EpochBlocks, "run", ctrl_c_in_the_fourth_block)
        with pytest.raises(TrainingInterrupted) as err:
            train(model_fn, data, cfg, GRID[:1])
    assert err.value.epochs_done == calls[3] > calls[2]
    assert (tmp_path / str(calls[3])).exists()
    with CompileCounter() as counter:
        resumed = train(model_fn, data, TrainConfig(**{**cfg.__dict__, "resume": True}),
                        GRID[:1])
    # the checkpoint holds the metric's denominators: no evaluation to learn them again
    assert not [name for name in counter.compiled if "_eval" in name]
    whole = train(model_fn, data, TrainConfig(**{**cfg.__dict__, "checkpoint_dir": None}),
                  GRID[:1])
    _assert_same(whole, resumed)  # other blocks, the same bits


def test_a_hook_that_stops_inside_a_block_saves_the_whole_block(tmp_path, monkeypatch):
    """A hook sees each epoch after its block; its Ctrl-C (the campaign's budget stop)
    saves the block's last epoch with every record of the block."""
    # a block's length follows the measured pace; a loaded machine must not shorten it
    monkeypatch.setattr(_fused, "BLOCK_SECONDS", 1e9)
    data = splits(line_swap_dataset())
    seen = []

    def stop_at_epoch_five(epoch, record):
        seen.append(epoch)
        if epoch == 5:
            raise KeyboardInterrupt

    cfg = TrainConfig(epochs=40, batch_size=4, progress=False, pipeline="device",
                      checkpoint_dir=str(tmp_path), checkpoint_seconds=1e9,
                      on_epoch_end=stop_at_epoch_five)
    with pytest.raises(TrainingInterrupted) as err:
        train(model_fn, data, cfg, GRID[:1])
    done = err.value.epochs_done
    assert done > 6 and seen == list(range(6))  # the block went past the hook's epoch
    history = (tmp_path / "history.jsonl").read_text().splitlines()
    assert len(history) == done and (tmp_path / str(done)).exists()


def test_the_best_numerator_comes_back_exactly_from_the_hosts_score():
    rng = np.random.default_rng(0)
    numerators = (rng.uniform(0, 1, 2000) * 10.0 ** rng.integers(-12, 6, 2000)).astype(
        np.float32)
    for metric in ("mse", "mae", "log10_mse", "graph_mean_log10_mse"):
        for den in (7.0, 100.0, 2.3456789):
            values = finish_sums(numerators, np.float32(den), np.ones(2000, bool), metric)[0]
            back = [_fused.numerator_of(metric, v, float(np.float32(den))) for v in values]
            np.testing.assert_array_equal(np.asarray(back, np.float32), numerators)


def test_blocks_are_used_only_where_the_numbers_stay_the_same_and_they_pay():
    data = splits(line_swap_dataset())
    from swan_jax.train import _loop

    def fuses(**settings) -> bool:
        cfg = TrainConfig(batch_size=4, progress=False, **{"epochs": 8, **settings})
        prog = _loop._Program(model_fn, data, cfg, GRID[:1])
        _loop._initial_state(prog)
        return _fused.can_fuse(cfg, prog.pipeline)

    assert fuses(pipeline="device")
    assert not fuses(pipeline="host")
    assert not fuses(pipeline="device", schedule="plateau")  # reads the float64 metric
    assert not fuses(pipeline="device", metric="ap")  # scored on the host
    assert not fuses(pipeline="device", checkpoint_seconds=0)  # a save after every epoch
    assert not fuses(pipeline="device", epochs=7)  # too few to repay a block's compile


def test_the_removed_epochs_per_call_reads_as_before_at_its_default_and_is_refused_otherwise():
    """`epochs_per_call` is gone (a block's length follows its pace): an older config.toml
    holding its default 64 loads as before; another value is refused in one line."""
    from swan_jax.experiments import transfer
    from swan_jax.experiments.config import from_dict
    from swan_jax.settings import SettingError

    exp = transfer.EXPERIMENT
    assert from_dict(exp.Config, {"epochs_per_call": 64}) == exp.Config()
    with pytest.raises(SettingError) as err:
        from_dict(exp.Config, {"epochs_per_call": 1}, source="old.toml")
    assert str(err.value) == (
        "old.toml: epochs_per_call is removed: short epochs on the device pipeline run "
        "several per call by themselves, in blocks of about 2 s; a run whose "
        "checkpoint_seconds is 0 runs one per call")
