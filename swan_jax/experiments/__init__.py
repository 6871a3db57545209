"""The paper's experiments, and the one sweep they share.

- `sweep`: `Experiment` (what an experiment declares), `run_sweep` (what every experiment
  does the same way), `Task`, `Program`.
- `config`: `SweepConfig`, the one configuration form (TOML in, resolved TOML out).
- `command`: the command line every experiment shares (`main`, `parse_config`).
- `runs`: `load_run(folder, run)` -> (model, variables, config) of any trained run.
- `report`: the table beside the paper, the default figure, the training curves
  (`plot_curves`); `curves` is their command (`swan-curves`).
- `lrgb`, `transfer`, `graphprop`: the experiments, each a short module plus a TOML file
  in `configs/`; run them as `python -m swan_jax.experiments.<name>` or `swan-<name>`.
"""

from swan_jax.experiments.config import SweepConfig, dump_toml, load_toml
from swan_jax.experiments.report import plot_curves
from swan_jax.experiments.runs import load_run
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
           "Task", "dump_toml", "load_run", "load_toml", "plot_curves", "read_history",
           "run_sweep"]
