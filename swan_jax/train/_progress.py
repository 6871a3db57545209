"""What a training call shows per epoch, on stderr, in one of three modes:

- "bars": tqdm bars (epochs with loss, validation metric, best and active runs; the
  steps inside an epoch), when `cfg.progress` is on and stderr is a terminal (or a
  Jupyter kernel, where tqdm draws a widget);
- "lines": one plain line per epoch, no carriage return, when the bars are off
  (`progress=False`, `--no-progress`) or stderr is a file or a pipe (a cluster's log):
  `epoch 12/300  loss 0.4123  val 0.5521  best 0.5601 (epoch 9)  active 4/4
  3.2 s/epoch  ETA 15.3 min`;
- "off": nothing (`quiet=True`, `--quiet`).

Loss, validation and best values are means over the runs that have not diverged; the
best epoch is the latest epoch at which one of them improved (1-based, as the epoch
count); the pace is the median epoch of this session after its first (which compiles),
and the ETA assumes every remaining epoch runs (early stopping only shortens it).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from swan_jax.train._config import TrainConfig
from swan_jax.train._state import RunState

MODES = ("bars", "lines", "off")


class StepBar:
    """The steps of one epoch (a no-op without a bar)."""

    def __init__(self, bar):
        self.bar = bar

    def __call__(self, steps: int) -> None:
        if self.bar is not None:
            self.bar.update(steps)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


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


def epoch_line(record: Mapping[str, Any], state: RunState, epochs: int,
               pace: float, description: str = "train") -> str:
    """The plain line of one epoch (`pace`: seconds per epoch, for the ETA), naming the
    program at its end when it has a name of its own (a sweep's programs)."""
    live = _live(state)
    done = int(record["epoch"]) + 1
    best_epoch = int(np.max(state.best_epoch[live])) + 1
    active = int(np.sum(~state.stopped))
    return (f"epoch {done}/{epochs}  "
            f"loss {np.mean(np.asarray(record['train_loss'])[live]):.4g}  "
            f"val {np.mean(np.asarray(record['val'])[live]):.4g}  "
            f"best {np.mean(state.best_metric[live]):.4g} (epoch {best_epoch})  "
            f"active {active}/{state.num_runs}  {pace:.2g} s/epoch  "
            f"ETA {duration(pace * (epochs - done))}"
            + (f"  ({description})" if description != "train" else ""))


class Progress:
    """The per-epoch report of one training call, in the mode `progress_mode` chooses."""

    def __init__(self, cfg: TrainConfig, start_epoch: int):
        self.mode, self.epochs, self.bar = progress_mode(cfg), cfg.epochs, None
        self.description = cfg.description
        self.seconds: list[float] = []  # this session's epochs
        if self.mode == "bars":
            from tqdm.auto import tqdm

            self._tqdm = tqdm
            self.bar = tqdm(total=cfg.epochs, initial=start_epoch, desc=cfg.description,
                            unit="epoch", dynamic_ncols=True)

    def step_bar(self, epoch: int, total: int) -> StepBar:
        """A step bar for one epoch (long CPU epochs show they are moving): call it with
        the steps done since the last call, `close()` it at the end."""
        if self.bar is None:
            return StepBar(None)
        return StepBar(self._tqdm(total=total, desc=f"epoch {epoch + 1}", unit="step",
                                  leave=False, dynamic_ncols=True))

    def epoch_done(self, record: Mapping[str, Any], state: RunState) -> None:
        self.seconds.append(float(record["seconds"]))
        if self.mode == "lines":
            pace = float(np.median(self.seconds[1:] or self.seconds))
            print(epoch_line(record, state, self.epochs, pace, self.description),
                  file=sys.stderr, flush=True)
        if self.bar is None:
            return
        live = _live(state)
        self.bar.set_postfix(loss=f"{np.mean(np.asarray(record['train_loss'])[live]):.4g}",
                             val=f"{np.mean(np.asarray(record['val'])[live]):.4g}",
                             best=f"{np.mean(state.best_metric[live]):.4g}",
                             active=int(np.sum(~state.stopped)))
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
