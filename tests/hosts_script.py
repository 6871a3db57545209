"""A transfer sweep with `--shard-runs` on 4 CPU devices: in one process, or as two
processes of 2 devices each after `jax.distributed.initialize()` (127.0.0.1, a free port).

Usage: python -m tests.hosts_script OUT_DIR   (starts the processes itself; prints nothing
on success). Each process runs `python -m swan_jax.experiments.transfer ... --distributed`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# One cell, 1 grid point x 4 seeds: 4 runs, one per device; 2 epochs of 8 graphs. Line
# k = 1 (one SWAN layer, not 3): which process trains and writes which run does not
# depend on the depth, and each of the three processes compiles a smaller step.
ARGS = ["--topology", "line", "--distance", "1", "--model", "swan", "--epochs", "2",
        "--train-size", "8", "--val-size", "4", "--test-size", "4", "--epsilon", "0.1",
        "--beta", "1", "--adjacency", "sym", "--seeds", "0,1,2,3", "--no-progress",
        "--shard-runs", "--checkpoint-seconds", "0"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "swan_jax.experiments.transfer", *ARGS,
            "--results-dir", str(out), "--cache-dir", str(out.parent / "cache"), *extra]


def env(devices: int, **more: str) -> dict[str, str]:
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    return dict(os.environ, XLA_FLAGS=flags.strip(), JAX_PLATFORMS="cpu", **more)


def main(out_dir: str) -> None:
    out = Path(out_dir)
    subprocess.run(command(out / "one"), cwd=ROOT, env=env(4), check=True, timeout=600)
    port = free_port()
    procs = [subprocess.Popen(command(out / "two", "--distributed"), cwd=ROOT, env=env(
        2, JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", SWAN_NUM_PROCESSES="2",
        SWAN_PROCESS_ID=str(i))) for i in range(2)]
    codes = [p.wait(timeout=600) for p in procs]
    if any(codes):
        raise SystemExit(f"the two processes ended with {codes}")


if __name__ == "__main__":
    main(sys.argv[1])
