"""Progress bars of one training call: epochs (with loss, validation metric, best and
active runs), and the steps inside an epoch (with a total, counted before the epoch)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from swan_jax.train._config import TrainConfig
from swan_jax.train._state import RunState


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


class Progress:
    """tqdm bars when `cfg.progress`, else nothing."""

    def __init__(self, cfg: TrainConfig, start_epoch: int):
        self.bar = None
        if cfg.progress:
            from tqdm.auto import tqdm

            self._tqdm = tqdm
            self.bar = tqdm(total=cfg.epochs, initial=start_epoch, desc=cfg.description,
                            unit="epoch", dynamic_ncols=True)

    @property
    def enabled(self) -> bool:
        return self.bar is not None

    def step_bar(self, epoch: int, total: int) -> StepBar:
        """A step bar for one epoch (long CPU epochs show they are moving): call it with
        the steps done since the last call, `close()` it at the end."""
        if self.bar is None:
            return StepBar(None)
        return StepBar(self._tqdm(total=total, desc=f"epoch {epoch + 1}", unit="step",
                                  leave=False, dynamic_ncols=True))

    def epoch_done(self, record: Mapping[str, Any], state: RunState) -> None:
        if self.bar is None:
            return
        live = np.flatnonzero(~state.diverged)
        live = live if len(live) else np.arange(state.num_runs)
        self.bar.set_postfix(loss=f"{np.mean(np.asarray(record['train_loss'])[live]):.4g}",
                             val=f"{np.mean(np.asarray(record['val'])[live]):.4g}",
                             best=f"{np.mean(state.best_metric[live]):.4g}",
                             active=int(np.sum(~state.stopped)))
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
