"""What a training call shows, on stderr, in one of three modes:

- "bars": tqdm bars (epochs with loss, validation metric, best, active runs and ETA; the
  steps inside an epoch with their pace), when `cfg.progress` is on and stderr is a
  terminal (or a Jupyter kernel, where tqdm draws a widget);
- "lines": one plain line per epoch, no carriage return, when the bars are off
  (`progress=False`, `--no-progress`) or stderr is a file or a pipe (a cluster's log):
  `epoch 12/300  loss 0.4123  val 0.5521  best 0.5601 (epoch 9)  active 4/4
  3.2 s/epoch  ETA 15.3 min`; and inside an epoch that runs longer than
  `STEP_LINE_SECONDS` (a CPU's Peptides-func epoch: minutes), a line of its steps at
  most that often: `epoch 1/300  57/170 steps  0.26 s/step  epoch ETA 29 s  ETA 3.7 h`,
  after a first line saying the epoch starts with a compilation;
- "off": nothing (`quiet=True`, `--quiet`).

Loss, validation and best values are means over the runs that have not diverged (the
loss over those that trained: a stopped run's loss is NaN); the best epoch is the
latest epoch at which one of them improved (1-based, as the epoch count).

The pace is measured on the wall clock between two reports, so that it covers all an
epoch costs (training, evaluation, the checkpoint written every epoch with
`checkpoint_seconds=0`, the hooks), less the seconds JAX spent tracing, lowering and
compiling meanwhile (`CompileCounter.seconds`): the first estimate, from the first
timed steps of the first epoch, does not count the compilation (before, the first line
said `57 s/epoch ETA 113 s`, the compile's pace, and a run that saved every epoch
showed 0.0077 s/epoch where 0.25 passed: only the training call was timed). An epoch's
pace is the median over this session's epochs; the ETA assumes every remaining epoch
runs (early stopping only shortens it).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from swan_jax.compiles import CompileCounter
from swan_jax.train._config import TrainConfig
from swan_jax.train._state import RunState

MODES = ("bars", "lines", "off")
STEP_LINE_SECONDS = 15.0  # "lines": an epoch's steps at most this often (none if shorter)
_BAR = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"


def interactive() -> bool:
    """stderr is a terminal, or this is a Jupyter kernel (tqdm.auto draws a widget)."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty()) or "ipykernel" in sys.modules


def progress_mode(cfg: TrainConfig) -> str:
    """"off" when quiet, "bars" when progress is on and someone watches, else "lines"."""
    if cfg.quiet:
        return "off"
    return "bars" if cfg.progress and interactive() else "lines"


def duration(seconds: float) -> str:
    """12 s, 3.4 min, 2.1 h, 3.0 days."""
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _live(state: RunState) -> np.ndarray:
    """The runs that have not diverged (every run when all have)."""
    live = np.flatnonzero(~state.diverged)
    return live if len(live) else np.arange(state.num_runs)


def _loss(record: Mapping[str, Any], live: np.ndarray) -> str:
    """The mean training loss of the live runs that trained this epoch (a finite loss)."""
    losses = np.asarray(record["train_loss"], float)[live]
    trained = losses[np.isfinite(losses)]
    return f"{np.mean(trained):.4g}" if trained.size else "nan"


def _named(description: str) -> str:
    """A sweep's program names itself at the end of its lines."""
    return f"  ({description})" if description != "train" else ""


def epoch_line(record: Mapping[str, Any], state: RunState, epochs: int,
               pace: float, description: str = "train") -> str:
    """The plain line of one epoch (`pace`: seconds per epoch, for the ETA), naming the
    program at its end when it has a name of its own (a sweep's programs)."""
    live = _live(state)
    done = int(record["epoch"]) + 1
    best_epoch = int(np.max(state.best_epoch[live])) + 1
    active = int(np.sum(~state.stopped))
    return (f"epoch {done}/{epochs}  "
            f"loss {_loss(record, live)}  "
            f"val {np.mean(np.asarray(record['val'])[live]):.4g}  "
            f"best {np.mean(state.best_metric[live]):.4g} (epoch {best_epoch})  "
            f"active {active}/{state.num_runs}  {pace:.2g} s/epoch  "
            f"ETA {duration(pace * (epochs - done))}" + _named(description))


class Clock:
    """Seconds of work: the wall clock less the seconds JAX spent tracing, lowering and
    compiling while the clock was open (the difference of two readings is a pace).
    `now` and `compiling` (seconds so far) replace the real ones in tests."""

    def __init__(self, now: Callable[[], float] = time.perf_counter,
                 compiling: Callable[[], float] | None = None):
        self.now = now
        self._counter = CompileCounter().__enter__() if compiling is None else None
        self._compiling = compiling

    def compiling(self) -> float:
        """Seconds spent tracing, lowering and compiling so far."""
        if self._compiling is not None:
            return self._compiling()
        return self._counter.seconds if self._counter is not None else 0.0

    def __call__(self) -> float:
        return self.now() - self.compiling()

    def close(self) -> None:
        if self._counter is not None:
            self._counter.__exit__(None, None, None)
            self._counter = None


class EpochSteps:
    """The steps of one epoch, reported as they complete (`__call__(steps)`): a bar's
    update, or in "lines" a line at most every `STEP_LINE_SECONDS`; their pace counts no
    compilation."""

    def __init__(self, progress: Progress, epoch: int, total: int):
        self.progress, self.epoch, self.total, self.done = progress, epoch, total, 0
        self.started, self.last_line = progress.clock(), progress.clock.now()
        self.bar = None
        if progress.mode == "bars":
            self.bar = progress.tqdm(total=total, desc=f"epoch {epoch + 1}", unit="step",
                                     leave=False, dynamic_ncols=True, bar_format=_BAR)
        elif progress.mode == "lines" and epoch == progress.first_epoch:
            self._line("starting: its first call compiles")

    def seconds_per_step(self) -> float:
        return (self.progress.clock() - self.started) / max(self.done, 1)

    def __call__(self, steps: int) -> None:
        self.done += steps
        pace = self.seconds_per_step()
        left = pace * (self.total - self.done)
        after = self.progress.epochs - self.epoch - 1
        eta = left + after * (self.progress.pace() or pace * self.total)
        if self.bar is not None:
            self.bar.set_postfix_str(f"{pace:.2g} s/step, epoch ETA {duration(left)}",
                                     refresh=False)
            self.bar.update(steps)
        elif (self.progress.mode == "lines" and self.done < self.total
              and self.progress.clock.now() - self.last_line >= STEP_LINE_SECONDS):
            self._line(f"{pace:.2g} s/step  epoch ETA {duration(left)}  ETA {duration(eta)}")

    def _line(self, text: str) -> None:
        self.last_line = self.progress.clock.now()
        print(f"epoch {self.epoch + 1}/{self.progress.epochs}  {self.done}/{self.total} steps"
              f"  {text}{_named(self.progress.description)}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Progress:
    """The report of one training call, in the mode `progress_mode` chooses."""

    def __init__(self, cfg: TrainConfig, start_epoch: int, clock: Clock | None = None):
        self.mode, self.epochs, self.bar = progress_mode(cfg), cfg.epochs, None
        self.description, self.first_epoch = cfg.description, start_epoch
        self.clock = Clock() if clock is None else clock
        self.seconds: list[float] = []  # seconds of work of this session's epochs
        self._mark = self.clock()
        if self.mode == "bars":
            from tqdm.auto import tqdm

            self.tqdm = tqdm
            self.bar = tqdm(total=cfg.epochs, initial=start_epoch, desc=cfg.description,
                            unit="epoch", dynamic_ncols=True, bar_format=_BAR)

    def pace(self) -> float | None:
        """Seconds per epoch (the median of this session's), None before the first."""
        return float(np.median(self.seconds)) if self.seconds else None

    def step_bar(self, epoch: int, total: int) -> EpochSteps:
        """The report of `epoch`'s `total` steps: call it with the steps completed since
        the last call, `close()` it at the end."""
        return EpochSteps(self, epoch, total)

    def epochs_done(self, done: Sequence[tuple[Mapping[str, Any], RunState]]) -> None:
        """Epochs just completed (one, or a fused block's), each `(record, bookkeeping
        after it)`: they share the work since the last report."""
        now = self.clock()
        self.seconds += [max(now - self._mark, 0.0) / len(done)] * len(done)
        self._mark = now
        pace = self.pace() or 0.0
        for record, state in done:
            if self.mode == "lines":
                print(epoch_line(record, state, self.epochs, pace, self.description),
                      file=sys.stderr, flush=True)
            if self.bar is not None:
                self._update_bar(record, state, pace)

    def _update_bar(self, record: Mapping[str, Any], state: RunState, pace: float) -> None:
        assert self.bar is not None
        live = _live(state)
        left = self.epochs - int(record["epoch"]) - 1
        self.bar.set_postfix(loss=_loss(record, live),
                             val=f"{np.mean(np.asarray(record['val'])[live]):.4g}",
                             best=f"{np.mean(state.best_metric[live]):.4g}",
                             active=int(np.sum(~state.stopped)),
                             ETA=duration(pace * left), refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        self.clock.close()
