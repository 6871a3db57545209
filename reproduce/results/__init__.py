"""RESULTS.md and reproductions/RUNS.md from committed, small result files: `collect` a
results folder into `reproductions/<run>/`, `render` the documents and figures from it
(`python -m reproduce.results`, `make results`)."""

from reproduce.results.collect import CollectRefused, collect
from reproduce.results.render import render
from reproduce.results.store import ReproductionsError

__all__ = ["CollectRefused", "ReproductionsError", "collect", "render"]
