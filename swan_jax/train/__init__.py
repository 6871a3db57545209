"""The one training loop every experiment uses.

Runs = (grid point, seed) pairs. All runs of one call train as ONE jitted, vmapped
program: parameters, optimiser states and numeric hyper-parameters (learning rate,
weight decay, and the model's `beta`, `gamma`, `epsilon`, ...) carry a leading run
axis; the batches are shared. Early stopping is per run: a run that has run out of
patience keeps its best parameters frozen while the others go on, which gives the same
numbers as stopping it alone. Checkpoints (orbax) are saved at most every
`checkpoint_seconds`, always at the last epoch and before an interrupt; `resume=True`
continues bit-identically (CPU, fixed seeds) from the newest checkpoint.

`data_parallel=True` splits every step's graphs over all devices (`jax.sharding`: a
one-axis mesh "batch", one padded sub-batch per device, parameters replicated); the
loss is the masked mean over every device's rows, so the step is the single-device
step on the same graphs. It also works across hosts after `jax.distributed.initialize()`
(every process builds the same step and hands over only its own devices' sub-batches).

Where things are (private modules, this is the public face):

- `_config`: `TrainConfig`, `TrainResult`, `TrainingDiverged`, `TrainingInterrupted`.
- `_optim`: per-run hyper-parameters (`stack_hparams`), the optimiser, schedules.
- `_state`: `RunState`, the state of every run as one pytree; early stopping.
- `_step`: the jitted training step and prediction (`make_train_step`).
- `_epoch`, `_evaluate`: one epoch; metrics; divergence messages.
- `_metric`: `Metric`, a caller's own score (`fn(pred, target, mask)`, its direction,
  host NumPy or jitted on the device); the built-in names resolve to `Metric`s.
- `_folder`: `run.json`, `history.jsonl` and checkpoints of a program.
- `_splits`: graph splits, or `NodeSplit` node masks on shared graphs.
- `_pipeline`: the device pipeline (data placed once, an epoch as a few `lax.scan`
  calls) and the host pipeline (batches built and copied ahead in a thread).
- `_fused`: several short epochs in one device call, early stopping on the device.
- `_memory`, `_progress`, `_placement`: the memory check, progress bars or plain
  per-epoch lines, devices.
- `_trackers`: per-epoch `history.csv` and TensorBoard event files (`trackers`).
- `_loop`: `train`, in named parts; `open_program`, its set-up without the epochs.
- `_run_mesh`: the runs split over every device (`shard_runs`); `writes_files`,
  `check_divides`, `RunsDoNotDivide` for a sweep across processes.
- `_run_blocks`: the vmapped runs in the device's layout (one at a time on a CPU over a
  large batch, else all at once; a CPU skips stopped runs); `in_blocks`.
"""

from swan_jax.pytrees import tree_size as count_params
from swan_jax.train._config import (
    OPTIMIZERS,
    SCHEDULES,
    TASK_LEVELS,
    ModelFn,
    TrainConfig,
    TrainingDiverged,
    TrainingInterrupted,
    TrainResult,
)
from swan_jax.train._evaluate import METRICS, get_metric, metric_mode
from swan_jax.train._folder import (
    HISTORY_FILE,
    RUN_FILE,
    CheckpointConflict,
    read_history,
    read_run_file,
)
from swan_jax.train._fused import MIN_FUSED_EPOCHS, can_fuse
from swan_jax.train._loop import open_program, step_memory, train
from swan_jax.train._memory import StepTooLarge, free_memory_bytes
from swan_jax.train._metric import Metric
from swan_jax.train._optim import make_tx, schedule_scale, stack_hparams
from swan_jax.train._pipeline import MAX_CHUNK
from swan_jax.train._progress import duration, interactive
from swan_jax.train._run_blocks import in_blocks
from swan_jax.train._run_mesh import RunsDoNotDivide, check_divides, writes_files
from swan_jax.train._shapes import ShapeMismatch
from swan_jax.train._splits import SPLIT_AXIS, NodeSplit, Split
from swan_jax.train._state import RunState, init_runs, select_runs
from swan_jax.train._step import make_train_step

__all__ = [
    "HISTORY_FILE", "MAX_CHUNK", "METRICS", "MIN_FUSED_EPOCHS", "OPTIMIZERS", "RUN_FILE",
    "SCHEDULES", "SPLIT_AXIS", "TASK_LEVELS",
    "CheckpointConflict", "Metric", "ModelFn", "NodeSplit", "RunState", "RunsDoNotDivide",
    "ShapeMismatch", "Split", "StepTooLarge",
    "TrainConfig", "TrainResult", "TrainingDiverged", "TrainingInterrupted", "can_fuse",
    "check_divides", "count_params", "duration",
    "free_memory_bytes", "get_metric", "in_blocks", "init_runs", "interactive",
    "make_train_step",
    "make_tx", "metric_mode", "open_program", "read_history", "read_run_file",
    "schedule_scale", "select_runs", "stack_hparams", "step_memory", "train",
    "writes_files",
]
