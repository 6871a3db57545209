"""What a training call is told (`TrainConfig`), what it returns (`TrainResult`), and the
two ways it can end early (`TrainingDiverged`, `TrainingInterrupted`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeAlias

import flax.linen as nn
import optax

from swan_jax.losses import LossFn, get_batch_loss
from swan_jax.settings import Retired, setting, unknown_name
from swan_jax.train._metric import Metric
from swan_jax.train._trackers import TRACKERS, check_trackers

Hyper = Mapping[str, Any]
ModelFn = Callable[[Hyper], nn.Module]
EpochHook = Callable[[int, dict[str, Any]], None]
# Bring your own optimiser: `fn(hp) -> optax.GradientTransformation`, given the run's
# (traced) hyper-parameters, or one fixed `optax.GradientTransformation`.
OptimizerFn = Callable[[Hyper], optax.GradientTransformation]
Optimizer: TypeAlias = str | OptimizerFn | optax.GradientTransformation

OPTIMIZERS = ("adam", "adamw")
SCHEDULES = ("constant", "cosine", "plateau")
TASK_LEVELS = ("node", "graph")
DIVERGENCE = ("raise", "stop_run")
PIPELINES = ("auto", "device", "host")


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

    Bring your own optimiser (Python API): `optimizer` may be a function `hp ->
    optax.GradientTransformation`, called with the run's hyper-parameters (traced, so a
    grid still vmaps: `hp["learning_rate"]` already carries the schedule's and plateau's
    factors, `hp["weight_decay"]` is there too; build the optimiser from `hp` alone), or
    one fixed `optax.GradientTransformation` (its rate is its own: a `learning_rate` or
    `weight_decay` grid axis, a non-zero `weight_decay` and the cosine and plateau
    schedules are refused, since none could reach it). `grad_clip` clips before either.
    `loss` may likewise be `fn(pred, target, mask) -> scalar` (`swan_jax.losses`), and
    `metric` (what early stopping, the plateau schedule and the best epoch follow) a
    `Metric(fn, higher_is_better=..., on_device=...)` with the same signature: jittable
    and reduced on the device, or NumPy on the host (`_metric`); a bare function is
    refused (it has no direction). A custom function enters the checkpoint fingerprint
    by its name only (a metric with its direction and place).

    `patience=None` disables early stopping. `on_divergence="stop_run"` stops only the
    diverging run of a grid instead of raising. `data_parallel` spreads each step's
    graphs over every device. `checkpoint_dir` is the program's folder: `run.json`,
    `history.jsonl` and (unless `save_checkpoints=False`) the epoch checkpoints.
    `on_epoch_end(epoch, record)` is called after each epoch with its history record;
    `trackers` ("csv", "tensorboard") also write it into the folder (`_trackers`).
    `progress`: tqdm bars on a terminal, else one plain line per epoch on stderr;
    `quiet`: neither (`_progress`).

    `pipeline`: where batches are built. "device": every split is placed on the device
    once and each step's padded batch is gathered there from graph ids (an epoch is a
    few device calls); "host": batches built with NumPy and copied ahead in a background
    thread; "auto": "device" when the splits fit in a quarter of the device's free
    memory and training is not `data_parallel`. Both give the same batches.
    `checkpoint_seconds`: save at most this often (0: every epoch); the last epoch, an
    early stop and `deadline` always save, and `resume` continues bit-identically from
    the newest save. `deadline` (a `time.time()` value): stop at the first epoch boundary
    from which another epoch would overrun it, after a save (`TrainingInterrupted`).
    Several epochs per device call: on the device pipeline, short epochs (one training
    call each, a metric summed on the device, no plateau schedule, a positive
    `checkpoint_seconds`, a run of at least `_fused.MIN_FUSED_EPOCHS` epochs) run in
    blocks of about 2 s (at most `_fused.MAX_EPOCHS_PER_CALL`), early stopping included,
    with the per-epoch loop's rules and numbers to float tolerance (`_fused`); hooks,
    trackers and saves follow at the end of each block.
    """

    # Each field is a declared setting (`swan_jax.settings`): its help, range and role are
    # what the experiments' TOML files and command lines read. "internal": set by the
    # caller of `train` (the sweep), not a user setting.
    epochs: int = setting(100, low=1, help="training epochs (at most; see patience)")
    patience: int | None = setting(None, low=1, help="stop a run after this many epochs "
                                   "without a better validation metric (none: never)")
    batch_size: int = setting(32, low=1, help="graphs per step (one graph: full batch)")
    optimizer: Optimizer = setting("adam", choices=OPTIMIZERS, help="adam, or adamw "
                                   "(decoupled weight decay)")
    learning_rate: float = setting(1e-3, low=0, low_open=True, grid=True, traced=True,
                                   flag="--lr", help="learning rate")
    weight_decay: float = setting(0.0, low=0, grid=True, traced=True, help="weight decay")
    grad_clip: float | None = setting(None, low=0, low_open=True,
                                      help="clip every gradient to this global norm")
    schedule: str = setting("constant", choices=SCHEDULES, help="learning rate per epoch: "
                            "constant, cosine (after warmup_epochs), plateau (reduce on a "
                            "validation plateau)")
    warmup_epochs: int = setting(0, low=0, help="linear warm-up epochs of the cosine schedule")
    plateau_factor: float = setting(0.5, low=0, high=1, low_open=True, high_open=True,
                                    help="plateau schedule: multiply the rate by this")
    plateau_patience: int = setting(10, low=1, help="plateau schedule: epochs without an "
                                    "improvement before the rate drops")
    plateau_threshold: float = setting(1e-4, low=0, low_open=True, since_default=True,
                                       help="plateau schedule: the smallest improvement "
                                            "that counts")
    min_lr_scale: float = setting(0.0, low=0, high=1, since_default=True,
                                  help="plateau schedule: the rate never drops below this "
                                       "fraction of the initial one")
    loss: str | LossFn = setting("mse", role="internal", help="loss name (swan_jax.losses), "
                                 "or fn(pred, target, mask) -> scalar")
    metric: str | Metric = setting("mse", role="internal", help="validation / test metric: "
                                   "a name, or a Metric(fn, higher_is_better=...)")
    task_level: str = setting("node", role="internal", help="node or graph targets")
    seeds: tuple[int, ...] = setting((0,), distinct=True, help="seeds, trained together as "
                                     "one vmapped program")
    data_seed: int = setting(0, role="internal", help="seed of the batch order")
    checkpoint_dir: str | None = setting(None, role="internal", help="the program's folder")
    save_checkpoints: bool = setting(True, role="io", flag="--checkpoints",
                                     help="keep epoch checkpoints (run.json and "
                                          "history.jsonl are always written)")
    resume: bool = setting(False, role="io", help="continue from the newest checkpoints")
    max_params: int | None = setting(None, role="internal", help="parameter budget")
    allow_more_params: bool = setting(False, role="io", help="lift the parameter budget")
    on_divergence: str = setting("raise", role="internal", help="raise, or stop_run")
    data_parallel: bool = setting(False, help="split every step's graphs over all local "
                                  "devices (jax.sharding)")
    shard_runs: bool = setting(False, role="io", help="split a program's runs (grid "
                               "points x seeds) over every device, of every process after "
                               "jax.distributed.initialize(); the same numbers to "
                               "float32 rounding")
    check_memory: bool = setting(True, role="io", help="refuse a step that cannot fit in "
                                 "device memory, before compiling it")
    track_test: bool = setting(True, role="internal", help="score the test split each epoch")
    progress: bool = setting(True, role="io", help="progress bars on a terminal (else, and "
                             "when off, one plain line per epoch on stderr)")
    quiet: bool = setting(False, role="io", help="no per-epoch report at all (neither bars "
                          "nor lines)")
    trackers: tuple[str, ...] | None = setting(None, choices=TRACKERS, role="io",
                                               flag="--tracker", help="write every epoch to "
                                               "the program folder: csv (history.csv), "
                                               "tensorboard (tensorboard/)")
    pipeline: str = setting("auto", choices=PIPELINES, role="io", help="where batches are "
                            "built: device (gathered there), host (NumPy, copied ahead), "
                            "auto")
    checkpoint_seconds: float = setting(30.0, low=0, role="io", help="save at most this "
                                        "often (0: every epoch)")
    deadline: float | None = setting(None, role="internal", help="a time.time() to stop by")
    description: str = setting("train", role="internal", help="the progress bar's label")
    on_epoch_end: EpochHook | None = setting(None, role="internal", compare=False,
                                             help="called after each epoch")

    # Settings that were removed: an old config.toml holding the last default reads as
    # before; any other value is refused in one line saying what does the work now.
    RETIRED: ClassVar[dict[str, Retired]] = {
        "run_block": Retired(None, "each device computes a program's runs in the layout it "
                                   "runs fastest (one at a time on a CPU over a large batch, "
                                   "else all at once); with shard_runs the numbers match one "
                                   "device's to float32 rounding"),
        "epochs_per_call": Retired(64, "short epochs on the device pipeline run several per "
                                       "call by themselves, in blocks of about 2 s; a run "
                                       "whose checkpoint_seconds is 0 runs one per call"),
    }

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
        if self.shard_runs and self.data_parallel:
            raise ValueError("shard_runs splits the runs over the devices, data_parallel a "
                             "step's graphs: turn one of them off")
        if not self.checkpoint_seconds >= 0:
            raise ValueError(f"checkpoint_seconds must be >= 0, got {self.checkpoint_seconds}")
        if not 0 < self.plateau_factor < 1:
            raise ValueError(f"plateau_factor must be in (0, 1), got {self.plateau_factor}")
        if self.plateau_patience < 1 or not self.plateau_threshold > 0:
            raise ValueError("plateau_patience must be >= 1 and plateau_threshold > 0")
        from swan_jax.train._evaluate import get_metric  # the registry lives with its code

        get_metric(self.metric)  # an unknown name, or a bare function (no direction)
        for name, value, valid in (("optimizer", self.optimizer, OPTIMIZERS),
                                   ("schedule", self.schedule, SCHEDULES),
                                   ("task level", self.task_level, TASK_LEVELS),
                                   ("on_divergence", self.on_divergence, DIVERGENCE),
                                   ("pipeline", self.pipeline, PIPELINES)):
            if value not in valid and not (name == "optimizer" and custom(value)):
                raise ValueError(unknown_name(name, value, valid))
        if isinstance(self.optimizer, optax.GradientTransformation):
            fixed_optimizer_needs(self, {})
        get_batch_loss(self.loss)
        check_trackers(self.trackers or ())

    def identity(self) -> dict[str, Any]:
        """The fields that decide the numbers (the checkpoint fingerprint); a custom
        optimiser or loss by its name (`custom_name`), a metric by its name (a built-in)
        or its `Metric.describe()`."""
        # Where and how the runs execute is not their identity: a program resumes with
        # another pipeline or placement (`shard_runs`: a CPU bundle goes on on a GPU, a
        # sharded grid on one device: the state is the same `[runs]` arrays). A field
        # added here changes every fingerprint, and so orphans every saved checkpoint:
        # tests/test_train.py pins one.
        skip = {"checkpoint_dir", "save_checkpoints", "resume", "progress", "epochs",
                "description", "on_epoch_end", "check_memory", "track_test", "pipeline",
                "checkpoint_seconds", "deadline", "quiet", "trackers", "shard_runs"}
        out = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name not in skip:
                out[field.name] = (custom_name(value) if field.name in ("optimizer", "loss")
                                   and custom(value) else value)
        if isinstance(self.metric, Metric):
            from swan_jax.train._evaluate import metric_key

            key = metric_key(self.metric)  # a built-in's Metric: its name, as before
            out["metric"] = key if isinstance(key, str) else key.describe()
        return out


def custom(value: Any) -> bool:
    """A function or an optax transformation given instead of a name."""
    return isinstance(value, optax.GradientTransformation) or callable(value)


def custom_name(value: Any) -> str:
    """"custom mymodule.make_sgd": how a fingerprint and `run.json` name a function
    (an optax transformation: by its `init`'s name)."""
    fn = value.init if isinstance(value, optax.GradientTransformation) else value
    module = getattr(fn, "__module__", None) or type(fn).__module__
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"custom {module}.{name}"


def fixed_optimizer_needs(cfg: TrainConfig, grid_axes: Mapping[str, Any]) -> None:
    """Refuse what a fixed `optax.GradientTransformation` cannot follow: its learning
    rate and weight decay are its own, so neither a schedule nor a grid can change them."""
    needs = [f"the {cfg.schedule} schedule"] if cfg.schedule != "constant" else []
    needs += [f"a {k} grid axis" for k in ("learning_rate", "weight_decay") if k in grid_axes]
    needs += [f"weight_decay={cfg.weight_decay:g}"] if cfg.weight_decay else []
    if needs:
        raise ValueError(f"optimizer is a fixed optax.GradientTransformation, whose learning "
                         f"rate and weight decay are its own: {', '.join(needs)} cannot "
                         f"reach it; pass a function hp -> optax.GradientTransformation "
                         f"that reads hp['learning_rate'] instead")


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
