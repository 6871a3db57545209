"""Benchmarks of swan-jax: `make bench` (or `python -m benchmarks.run_all`).

Each module measures one thing, returns a JSON-able record and prints one line; the
runner writes `benchmarks/results/<name>.json`, the figures in `benchmarks/figures/`
and the table in `BENCHMARKS.md`. Timings never appear in the tests.
"""
