"""RESULTS.md and reproductions/RUNS.md from committed, small result files (`reproductions/`).

- `collect`: copy a results folder's small files into `reproductions/<run>/`, refusing to
  replace a committed run with a smaller one;
- `render`: RESULTS.md (the paper's tables, one row per cell), RUNS.md (every row, each
  run's protocol) and their figures from `reproductions/` only;
- `store`: the folder's layout and reading it; `protocol`: what a run ran and where it
  departs from the paper; `compare`: formatting and verdicts; `blocks`: shared pieces;
  `sections`: the paper tables and the choice of each row's evidence; `measurements`: the
  runtime table and the Jacobian figure; `runs`: RUNS.md; `figures`: the figures.

The command is `python -m reproduce.results` (`make results`).
"""

from reproduce.results.collect import CollectRefused, collect
from reproduce.results.render import render
from reproduce.results.store import ReproductionsError

__all__ = ["CollectRefused", "ReproductionsError", "collect", "render"]
