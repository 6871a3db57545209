"""What a training call shows while it runs (issue 47): lines of an epoch's steps before
the epoch ends, reported as the device completes them; paces that leave the compilation
out and cover everything between two epochs (a checkpoint every epoch included)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import flax.linen as nn
import numpy as np
import pytest

from swan_jax.train import TrainConfig, _pipeline, _progress, train
from tests.train_script import line_swap_dataset, splits

STEP_LINE = re.compile(r"^epoch (\d+)/(\d+)  (\d+)/(\d+) steps  (\S+) s/step  epoch ETA .+"
                       r"  ETA .+$")
EPOCH_LINE = re.compile(r"^epoch (\d+)/\d+  loss .*  (\S+) s/epoch  ETA")


class FakeTime:
    """A wall clock and a compile total that the test moves."""

    def __init__(self):
        self.wall, self.compiled = 0.0, 0.0

    def clock(self) -> _progress.Clock:
        return _progress.Clock(now=lambda: self.wall, compiling=lambda: self.compiled)


def state(runs: int = 1) -> SimpleNamespace:
    """What an epoch line reads of a `RunState`."""
    return SimpleNamespace(diverged=np.zeros(runs, bool), stopped=np.zeros(runs, bool),
                           best_epoch=np.zeros(runs, int), best_metric=np.full(runs, 0.5),
                           num_runs=runs)


def record(epoch: int, seconds: float) -> dict:
    return {"epoch": epoch, "train_loss": [0.3], "val": [0.5], "seconds": seconds}


def test_the_first_step_line_comes_before_the_epoch_ends_without_the_compilation(capsys):
    """Epoch 1 of 3, 150 steps: the first call compiles for 30 s, then 50 steps take 10 s.
    The first line says 0.2 s/step (not 0.8, the compile's); the epoch line that follows
    says 40 s/epoch (the epoch's 70 s less the compile)."""
    fake = FakeTime()
    progress = _progress.Progress(TrainConfig(epochs=3, progress=False), 0, fake.clock())
    steps = progress.step_bar(0, 150)
    assert capsys.readouterr().err == "epoch 1/3  0/150 steps  starting: its first call compiles\n"
    fake.wall, fake.compiled = 40.0, 30.0
    steps(50)
    assert capsys.readouterr().err == ("epoch 1/3  50/150 steps  0.2 s/step  epoch ETA 20 s"
                                       "  ETA 80 s\n")
    fake.wall = 50.0
    steps(50)  # within STEP_LINE_SECONDS of the last line: quiet
    fake.wall = 60.0
    steps(50)  # the epoch's last steps: its own line follows
    steps.close()
    assert capsys.readouterr().err == ""
    fake.wall = 70.0
    progress.epochs_done([(record(0, seconds=70.0), state())])
    [line] = capsys.readouterr().err.splitlines()
    assert EPOCH_LINE.match(line).group(1, 2) == ("1", "40")
    assert line.endswith("ETA 80 s")


def test_the_pace_covers_what_happens_between_epochs(capsys):
    """A checkpoint every epoch (`checkpoint_seconds=0`) takes 0.25 s where the epoch's own
    record says 0.0077: the pace and the ETA are the 0.26 s between two epochs."""
    fake = FakeTime()
    progress = _progress.Progress(TrainConfig(epochs=103, progress=False), 0, fake.clock())
    for epoch in range(3):
        fake.wall += 0.26
        progress.epochs_done([(record(epoch, seconds=0.0077), state())])
    *_, last = capsys.readouterr().err.splitlines()
    assert "0.26 s/epoch  ETA 26 s" in last
    fake.wall += 0.52  # a fused block of two epochs: they share the interval
    progress.epochs_done([(record(3, 0.0), state()), (record(4, 0.0), state())])
    assert progress.seconds[-2:] == pytest.approx([0.26, 0.26])


def test_steps_are_reported_when_done_one_call_behind_the_dispatch():
    """A call's steps reach the report once its result is ready, while the next call is
    queued: the report lags the dispatch by one call and ends with the last."""
    reported = []
    done = _pipeline._Completed(reported.append)
    done.dispatched(np.zeros(2), 64)
    assert reported == []
    done.dispatched(np.zeros(2), 64)
    assert reported == [64]
    done.dispatched(np.zeros(2), 42)
    done.wait_all()
    assert reported == [64, 64, 42]


class NodeDense(nn.Module):
    @nn.compact
    def __call__(self, graph):
        return nn.Dense(1)(graph.nodes)


def test_a_long_epoch_shows_its_steps_before_it_ends_and_no_compile_in_its_pace(capsys,
                                                                                monkeypatch):
    """A real run whose epoch is three training calls (2 steps each), every call's steps
    on a line: the lines of epoch 1 come before its epoch line and count up, and neither
    the steps' pace nor the epoch's counts the compilations that fill the first epoch."""
    monkeypatch.setattr(_pipeline, "MAX_CHUNK", 2)
    monkeypatch.setattr(_progress, "STEP_LINE_SECONDS", 0.0)
    capsys.readouterr()
    result = train(lambda hp: NodeDense(), splits(line_swap_dataset(num_graphs=14)),
                   TrainConfig(epochs=2, batch_size=1, progress=False, pipeline="device"))
    err = capsys.readouterr().err.splitlines()
    first_epoch = next(i for i, line in enumerate(err) if EPOCH_LINE.match(line))
    steps = [STEP_LINE.match(line).groups() for line in err[:first_epoch]
             if STEP_LINE.match(line)]
    assert [s[:4] for s in steps] == [("1", "2", "2", "6"), ("1", "2", "4", "6")], err
    compiled = result.history[0]["seconds"]  # epoch 1's training and evaluation, compiled
    assert float(steps[0][4]) * 6 < compiled / 2
    assert float(EPOCH_LINE.match(err[first_epoch]).group(2)) < compiled / 2
