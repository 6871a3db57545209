"""A run's files: written atomically, saved whole, reopened, predicted with, exported.

- `io`: atomic JSON and text writes, output-folder checks (`OutputWriteError`).
- `interrupts`: `held`, a save that Ctrl-C / SIGTERM must not cut in half.
- `checkpoint`: epoch checkpoints with orbax (`CheckpointStore`, `CheckpointError`).
- `inference`: `predict`, a trained model's predictions over a whole data set.
- `export`: `save_model` / `load_model`, a model as two files any install opens, and
  `describe_models`, the specs a `train()` run's `run.json` keeps.

The package stands at one height of docs/architecture.md's layers: on the core and
`swan_jax.data`, below `swan_jax.train`, which saves with it. What reads a trained run's
folder (its `run.json` and history, through train's readers) stands above train:
`swan_jax.experiments.runs` (`open_run`, `export_run`). The package re-exports nothing:
import the module you need, `from swan_jax.runs.export import load_model`.
"""
