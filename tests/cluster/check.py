"""Two campaign cells through a real SLURM (`--executor slurm`) against a local run.

Usage (tests/cluster/run.sh starts the cluster and sets SLURM_CONF):
    python -m tests.cluster.check WORK_DIR
Exits 0 when both cells finished as SLURM jobs, were collected into reproductions/, and
hold the very runs the local campaign collected; else one line saying what differs.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
from pathlib import Path

from reproduce.campaign import loop, plan
from reproduce.campaign.slurm import run_on_slurm
from swan_jax.experiments.cluster import SlurmOptions

REPO = Path(__file__).resolve().parents[2]
# Tiny cells (16 training graphs, width 8, 3 epochs): seconds of training after compiling.
TINY = {"sizes": [16, 8, 8], "hidden": 8, "seeds": [0, 1], "epochs": 3, "patience": "none",
        "grid": {"epsilon": [0.5], "beta": [1.0], "adjacency": ["sym"]}}
MODELS = ("swan", "gcn")


def entries() -> list[plan.Entry]:
    return [plan.Entry(id=f"transfer/line/3/{m}", experiment="transfer", table="Fig. 3",
                       priority=1, status="runnable",
                       config={"topologies": ["line"], "distances": [3], "models": [m],
                               **TINY},
                       cost_minutes={"cpu-2core": 1.0}) for m in MODELS]


def options(work: Path, name: str) -> loop.Options:
    root = work / name / "reproductions"
    (root / "campaign").mkdir(parents=True)
    shutil.copy(REPO / "reproductions" / "paper_values.json", root)
    plan_file = root / "campaign" / "plan.toml"
    plan_file.write_text(plan.dump_plan(entries(), "cluster test plan"))
    return loop.Options(plan=plan_file, reproductions=root, work=work / name / "work",
                        budget_minutes=30, margin_seconds=0, render=False)


def runs_of(opts: loop.Options) -> dict[str, list]:
    path = opts.reproductions / "campaign-transfer" / "results.json"
    records = json.loads(path.read_text())["records"] if path.exists() else []
    return {r["model"]: r["runs"] for r in records}


def main(work: str) -> int:
    # This cluster keeps no accounting, so submitit's sacct calls fail: it then learns a
    # job's end from its result file, and says so at every poll.
    logging.getLogger("submitit").setLevel(logging.ERROR)
    work = Path(work)
    started = time.monotonic()
    here = options(work, "local")
    loop.run_campaign(here)
    jobs = options(work, "slurm")
    lines = run_on_slurm(jobs, SlurmOptions(folder=str(work / "submitit"), time_minutes=10,
                                            cpus=1, array_size=len(MODELS)))
    local, cluster = runs_of(here), runs_of(jobs)
    finished = [line for line in lines if "finished as a SLURM job" in line]
    if len(finished) != len(MODELS):
        print(f"test-cluster: FAILED: {len(finished)} of {len(MODELS)} cells finished as "
              f"SLURM jobs:\n  " + "\n  ".join(lines))
        return 1
    if sorted(local) != sorted(MODELS) or cluster != local:
        print(f"test-cluster: FAILED: the SLURM cells' runs differ from the local run's "
              f"(local {sorted(local)}, SLURM {sorted(cluster)})")
        return 1
    print(f"test-cluster: OK: {len(MODELS)} cells as SLURM jobs, collected, the same runs as "
          f"the local campaign ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
