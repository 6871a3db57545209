"""Implicit solvers on a CPU: the seconds per training epoch of kvaerno5 / kvaerno3 on
transfer line/3 (4 nodes per graph, batches of 4 graphs: 64 padded rows), by width.

The ODE state of a batch is `64 * width` numbers; `solvers.MAX_IMPLICIT_STATE` is the
largest that trains an epoch (8 training graphs, 4 + 4 evaluated) in about 30 s on the
2-core CPU (docs/benchmarks-log.md, "Implicit solvers on a CPU"). Each point is one
command-line run of 3 epochs (its first epoch includes the compile, which
`seconds_per_epoch` leaves out); run with `python -m benchmarks.implicit [--quick]`.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import machine
from swan_jax.experiments import transfer

TINY = ["--topology", "line", "--distance", "3", "--model", "swan", "--epochs", "3",
        "--train-size", "8", "--val-size", "4", "--test-size", "4", "--epsilon", "0.1",
        "--beta", "1", "--adjacency", "sym", "--seeds", "0", "--batch-size", "4",
        "--no-progress"]


def one(solver: str, width: int, folder: Path) -> dict:
    """One run's seconds per epoch (compile excluded) and wall time (compile included)."""
    res = folder / f"{solver}-{width}"
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # the run's plan and table: not ours
        status = transfer.main([*TINY, "--solver", solver, "--hidden", str(width),
                                "--results-dir", str(res), "--cache-dir", str(folder / "c")])
    assert status == 0, f"{solver} at width {width}: exit {status}"
    cell = json.loads((res / "results.json").read_text())["cells"][0]
    return {"solver": solver, "width": width, "state": 64 * width,
            "seconds_per_epoch": cell["seconds_per_epoch"],
            "wall_s": round(time.perf_counter() - start, 1), "test_mse": cell["test_mean"]}


def run(quick: bool = False) -> dict:
    widths = (16,) if quick else (16, 64)
    with tempfile.TemporaryDirectory() as tmp:
        points = [one(solver, width, Path(tmp)) for width in widths
                  for solver in ("kvaerno5", "kvaerno3")]
    return {"benchmark": "implicit", "machine": machine(), "points": points}


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=1))
