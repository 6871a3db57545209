"""Moved: the experiments' command-line flags are generated from the settings'
declarations (`swan_jax.experiments.flags`, `swan_jax.settings`), and run bookkeeping
lives in `swan_jax.experiments.records`. This module re-exports the bookkeeping for one
release; import it from `swan_jax.experiments.records`.
"""

from swan_jax.experiments.records import ResultsFile, machine_info, summarise_runs

__all__ = ["ResultsFile", "machine_info", "summarise_runs"]
