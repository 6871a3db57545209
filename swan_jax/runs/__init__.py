"""A run's files: written atomically, saved whole, reopened, predicted with, exported.

- `io`: atomic JSON and text writes, output-folder checks (`OutputWriteError`).
- `interrupts`: `held`, a save that Ctrl-C / SIGTERM must not cut in half.
- `checkpoint`: epoch checkpoints with orbax (`CheckpointStore`, `CheckpointError`).
- `inference`: `predict`, a trained model's predictions over a whole data set.
- `export`: `export_run` / `load_model`, a trained run as two files any install opens.

The modules sit at two heights of docs/architecture.md's layers: `io`, `interrupts` and
`checkpoint` are what `swan_jax.train` saves with; `inference` stands on `swan_jax.data`,
`export` on `swan_jax.train`. So this package re-exports nothing (an `__init__` importing
`export` would tie `train` to itself through it): import the module you need,
`from swan_jax.runs.export import load_model`.
"""
