"""The paper's experiments, and the one sweep they share.

- `sweep`: `Experiment` (what an experiment declares), `run_sweep` (what every experiment
  does the same way), `Task`, `Program`.
- `config`: `SweepConfig`, the one configuration form (TOML in, resolved TOML out).
- `flags`: the command-line flags, generated from the settings' declarations.
- `command`: the command line every experiment shares (`main`, `parse_config`).
- `packing`: a static point's grid cut into the fewest programs that fit in memory.
- `cluster`: `--executor slurm`, each cell a submitit job; `hosts`: a sweep across
  processes (`jax.distributed.initialize()` once, before anything).
- `locks`, `signals`: one run per output folder; Ctrl-C and SIGTERM end a run the same way.
- `records`: the results file, summaries over runs, machine information.
- `runs`: `load_run(folder, run)` -> (model, variables, config) of a sweep's run;
  `open_run` / `export_run`, any program folder's best run opened or exported.
- `predict`: `swan-predict`, a trained run's predictions for new graphs.
- `estimate`: `--dry-run`'s time estimate from the paces the campaign recorded.
- `report`: the table beside the paper, the default figure, the training curves
  (`plot_curves`); `curves` is their command (`swan-curves`), `results` a results
  folder's summary (`swan-results`).
- `gpu_check`: `make gpu-check` (`python -m swan_jax.experiments.gpu_check`), a short
  training that says whether the GPU is used.
- `lrgb`, `transfer`, `graphprop`, `node_classification`: the experiments, each a short
  module plus a TOML file in `configs/`; run them as `python -m swan_jax.experiments.<name>`
  or `swan-<name>` (`swan-node-classification`).
"""

from swan_jax.experiments.config import SweepConfig, dump_toml, load_toml
from swan_jax.experiments.report import plot_curves
from swan_jax.experiments.runs import export_run, load_run, open_run
from swan_jax.experiments.sweep import (
    Experiment,
    Program,
    SweepRefused,
    SweepResult,
    Task,
    run_sweep,
)
from swan_jax.train import NodeSplit, read_history

__all__ = ["Experiment", "NodeSplit", "Program", "SweepConfig", "SweepRefused", "SweepResult",
           "Task", "dump_toml", "export_run", "load_run", "load_toml", "open_run",
           "plot_curves", "read_history", "run_sweep"]
