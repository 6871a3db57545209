"""Two campaign cells through a real SLURM (`--executor slurm`) against a local run.

Usage (tests/cluster/run.sh starts the cluster and sets SLURM_CONF):
    python -m tests.cluster.check WORK_DIR
Exits 0 when both cells finished as SLURM jobs (one of them preempted mid-run and
requeued by submitit, resuming from its checkpoints), were collected into reproductions/,
and hold the very runs the local campaign collected; else one line saying what differs.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from reproduce.campaign import loop
from reproduce.campaign.cells import toml_value
from swan_jax.experiments.cluster import SlurmOptions

REPO = Path(__file__).resolve().parents[2]
# Tiny cells (16 training graphs, width 8, 30 epochs): seconds of training after compiling.
TINY = {"sizes": [16, 8, 8], "hidden": 8, "seeds": [0, 1], "epochs": 30, "patience": "none",
        "grid": {"epsilon": [0.5], "beta": [1.0], "adjacency": ["sym"]}}
MODELS = ("swan", "gcn")
# Every epoch its own call and checkpoint in both runs (the same compiled step): on SLURM
# the GCN cell is preempted mid-run (SIGTERM, then submitit's USR2) while it trains.
SAVED = {"checkpoint_seconds": 0}


def plan_text() -> str:
    return "".join(f'[[cell]]\nid = "transfer/line/3/{m}"\nexperiment = "transfer"\n'
                   f"priority = 1\nconfig = " + toml_value(
                       {"topologies": ["line"], "distances": [3], "models": [m], **TINY,
                        **SAVED}) + "\n" for m in MODELS)


def preempt_when_training(run: Path, signalled: list[str]) -> None:
    """Once the cell's job has checkpointed two epochs, preempt it as SLURM does (SIGTERM,
    then the requeue signal submitit handles: it checkpoints the call and requeues it)."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        histories = list(run.rglob("history.jsonl"))
        logs = list((run / "submitit").glob("*_0_log.out"))
        if histories and logs and len(histories[0].read_text().splitlines()) >= 2:
            job = logs[0].name.removesuffix("_0_log.out")  # an array of one: <id>_0
            for sig in ("SIGTERM", "USR2"):
                subprocess.run(["scancel", "--signal", sig, job], check=True)
            signalled.append(job)
            return
        time.sleep(0.1)


def options(work: Path, name: str) -> loop.Options:
    root = work / name / "reproductions"
    (root / "campaign").mkdir(parents=True)
    shutil.copy(REPO / "reproductions" / "paper_values.json", root)
    (root / "campaign" / "plan.toml").write_text(plan_text())
    return loop.Options(plan=root / "campaign" / "plan.toml", reproductions=root,
                        work=work / name / "work", render=False, kind="cpu-2core")


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
    jobs.slurm = SlurmOptions(time_minutes=10, cpus=1, array_size=1)
    signalled: list[str] = []
    watcher = threading.Thread(target=preempt_when_training, daemon=True, args=(
        jobs.work / "transfer__line__3__gcn", signalled))
    watcher.start()
    lines = loop.run_campaign(jobs)
    watcher.join()
    requeued = "".join(p.read_text() for p in (jobs.work / "transfer__line__3__gcn" /
                                                "submitit").glob(f"{signalled[0]}*log*")
                       ) if signalled else ""
    if not signalled or "requeu" not in requeued.lower():
        print(f"test-cluster: FAILED: the GCN cell's job was not preempted and requeued "
              f"(signalled {signalled or 'nothing'})")
        return 1
    finished = [line for line in lines if line.endswith(": finished")]
    if len(finished) != len(MODELS):
        print(f"test-cluster: FAILED: {len(finished)} of {len(MODELS)} cells finished as "
              f"SLURM jobs:\n  " + "\n  ".join(lines))
        return 1
    local, cluster = runs_of(here), runs_of(jobs)
    if sorted(local) != sorted(MODELS) or cluster != local:
        print(f"test-cluster: FAILED: the SLURM cells' runs differ from the local run's "
              f"(local {sorted(local)}, SLURM {sorted(cluster)})")
        return 1
    print(f"test-cluster: OK: {len(MODELS)} cells as SLURM jobs (job {signalled[0]} preempted "
          f"and requeued from its checkpoints), collected, the same runs as the local "
          f"campaign ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
