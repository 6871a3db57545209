"""What a training call is told (`TrainConfig`), what it returns (`TrainResult`), and the
two ways it can end early (`TrainingDiverged`, `TrainingInterrupted`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import flax.linen as nn

from swan_jax.losses import get_batch_loss

Hyper = Mapping[str, Any]
ModelFn = Callable[[Hyper], nn.Module]
EpochHook = Callable[[int, dict[str, Any]], None]

OPTIMIZERS = ("adam", "adamw")
SCHEDULES = ("constant", "cosine", "plateau")
TASK_LEVELS = ("node", "graph")
DIVERGENCE = ("raise", "stop_run")


class TrainingDiverged(RuntimeError):
    """A run's loss, gradient or predictions became non-finite."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during training. `epochs_done` epochs are safely in `checkpoint_dir`."""

    def __init__(self, epochs_done: int, checkpoint_dir: str | None):
        super().__init__(epochs_done, checkpoint_dir)
        self.epochs_done = epochs_done
        self.checkpoint_dir = checkpoint_dir


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """How to train (one per program; the model comes from a `ModelFn`).

    Optimiser: `optimizer` with `learning_rate` / `weight_decay` (a grid point may
    override either, per run), optional gradient clipping to global norm `grad_clip`,
    and a per-epoch learning-rate `schedule`: "constant"; "cosine" (linear warm-up over
    `warmup_epochs`, then cosine decay to 0 at `epochs`, as GraphGPS / LRGB); "plateau"
    (`optax.contrib.reduce_on_plateau` on the validation metric: multiply by
    `plateau_factor` after `plateau_patience` epochs without an improvement larger than
    `plateau_threshold`, not below `min_lr_scale`).

    `patience=None` disables early stopping. `on_divergence="stop_run"` stops only the
    diverging run of a grid instead of raising. `data_parallel` spreads each step's
    graphs over every device. `checkpoint_dir` is the program's folder: `run.json`,
    `history.jsonl` and (unless `save_checkpoints=False`) the epoch checkpoints.
    `on_epoch_end(epoch, record)` is called after each epoch with its history record.
    """

    epochs: int = 100
    patience: int | None = None
    batch_size: int = 32
    optimizer: str = "adam"
    learning_rate: float = 1e-3
    weight_decay: float = 0.0
    grad_clip: float | None = None
    schedule: str = "constant"
    warmup_epochs: int = 0
    plateau_factor: float = 0.5
    plateau_patience: int = 10
    plateau_threshold: float = 1e-4
    min_lr_scale: float = 0.0
    loss: str = "mse"
    metric: str = "mse"
    task_level: str = "node"
    seeds: tuple[int, ...] = (0,)
    data_seed: int = 0
    checkpoint_dir: str | None = None
    save_checkpoints: bool = True
    resume: bool = False
    max_params: int | None = None
    allow_more_params: bool = False
    on_divergence: str = "raise"
    data_parallel: bool = False
    check_memory: bool = True
    track_test: bool = True
    progress: bool = True
    description: str = "train"
    on_epoch_end: EpochHook | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs}")
        if not self.seeds:
            raise ValueError("seeds must name at least one seed (got an empty list)")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct, got {list(self.seeds)}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"patience must be >= 1 or None, got {self.patience}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"grad_clip must be > 0 or None, got {self.grad_clip}")
        if not 0 <= self.warmup_epochs < self.epochs:
            raise ValueError(f"warmup_epochs must be in [0, epochs), got {self.warmup_epochs}")
        if not 0 < self.plateau_factor < 1:
            raise ValueError(f"plateau_factor must be in (0, 1), got {self.plateau_factor}")
        if self.plateau_patience < 1 or not self.plateau_threshold > 0:
            raise ValueError("plateau_patience must be >= 1 and plateau_threshold > 0")
        from swan_jax.train._evaluate import METRICS  # the registry lives with its code

        for name, value, valid in (("optimizer", self.optimizer, OPTIMIZERS),
                                   ("schedule", self.schedule, SCHEDULES),
                                   ("metric", self.metric, METRICS),
                                   ("task level", self.task_level, TASK_LEVELS),
                                   ("on_divergence", self.on_divergence, DIVERGENCE)):
            if value not in valid:
                raise ValueError(f"unknown {name} {value!r}; valid: {', '.join(valid)}")
        get_batch_loss(self.loss)

    def identity(self) -> dict[str, Any]:
        """The fields that decide the numbers (the checkpoint fingerprint)."""
        skip = {"checkpoint_dir", "save_checkpoints", "resume", "progress", "epochs",
                "description", "on_epoch_end", "check_memory", "track_test"}
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in skip}


@dataclasses.dataclass
class TrainResult:
    """What `train` returns: one record per run plus the per-epoch history.

    `wall_time` counts every session of a resumed run; `best_params` are stacked over
    runs; `timings` holds per epoch the training and evaluation seconds and the steps
    (kept apart from `history`, whose values are deterministic).
    """

    runs: list[dict[str, Any]]
    history: list[dict[str, Any]]
    num_params: int
    wall_time: float
    epochs_completed: int
    best_params: Any = None
    timings: list[dict[str, float]] = dataclasses.field(default_factory=list)
