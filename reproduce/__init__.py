"""This repository's reproduction tooling: not part of the installed `swan_jax` package.

    python -m reproduce.results render              # make results: RESULTS.md
    python -m reproduce.results collect results/transfer
    python -m reproduce.campaign run --until 60     # make campaign

- `results`: collect a finished run's small files into `reproductions/`, and render
  RESULTS.md (and `reproductions/figures/`) from `reproductions/` only;
- `campaign`: the reproduction campaign of `reproductions/campaign/plan.toml`;
- `runtime`, `jacobian`: the paper's runtime table and Jacobian figure (its measurement
  cells); `device`: the device kind a run's folder is named after.

Run from the repository root (`python -m` finds this folder there; setuptools ships only
`swan_jax*`). It may import `swan_jax`; nothing under `swan_jax` imports it
(`tests/test_layering.py`).
"""
