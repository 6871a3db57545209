"""RESULTS.md from committed, small result files (`reproductions/`).

- `collect`: copy a results folder's small files into `reproductions/<run>/`, refusing to
  replace a committed run with a smaller one;
- `render`: RESULTS.md and its figures from `reproductions/` only;
- `store`: the folder's layout and reading it; `protocol`: what a run ran and where it
  departs from the paper; `compare`: formatting and verdicts; `blocks`, `sections`,
  `realworld`, `figures`: the document's parts.

The command is `python -m reproduce.results` (`make results`).
"""

from reproduce.results.collect import CollectRefused, collect
from reproduce.results.render import render
from reproduce.results.store import ReproductionsError

__all__ = ["CollectRefused", "ReproductionsError", "collect", "render"]
