"""This repository's reproduction tooling (not installed; run from the repository root):
`results` (RESULTS.md from `reproductions/`), `campaign` (the paper's cells until a
deadline), `runtime` and `jacobian` (the runtime table and Jacobian figure), `device` (the
device kind a run's folder is named after). It imports `swan_jax`, never the reverse
(`tests/test_layering.py`).

    python -m reproduce.results render              # make results: RESULTS.md
    python -m reproduce.campaign run --until 60     # make campaign
"""
