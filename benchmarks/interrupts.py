"""Interrupt a short run at random moments: no traceback, no crash, and `--resume` then
finishes it with a history without gaps and the uninterrupted run's numbers (issue 47).

    python -m benchmarks.interrupts                      # 50 moments, SIGINT and SIGTERM
    python -m benchmarks.interrupts --n 5 --seed 1 --out interrupts.json
    python -m benchmarks.interrupts --n 10 -- --model gcn   # flags for the run itself

The run is a tiny graph-transfer sweep (`RUN`: 8 training graphs, 6 epochs, a checkpoint
every epoch, 2 seeds), in a fresh folder each time. One uninterrupted run first gives
its length T, from its first line of output (the command's signal handlers are in place
by then; before it, the interpreter is importing, and Python's own Ctrl-C applies) to
its exit, and the test scores to expect. Then, N times: the run is started, and a
signal (SIGINT or SIGTERM, drawn at random) is sent at a moment drawn uniformly from
[0, T] after its first line. Each interrupted process must exit with 130 or 143 (0 when
it finished first), not die by a signal, and print no "Traceback", "Fatal Python error",
"Segmentation fault" or "Exception ignored"; then the same command with `--resume` must
exit 0, the program's `history.jsonl` must hold epochs 0 .. E-1 once each, and its test
scores must equal the uninterrupted run's bit for bit. Prints one line per moment and a
summary; exits 1 when any check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EPOCHS = 6
RUN = ["--topology", "line", "--distance", "3", "--model", "swan", "--epochs", str(EPOCHS),
       "--train-size", "8", "--val-size", "4", "--test-size", "4", "--epsilon", "0.1",
       "--beta", "1", "--adjacency", "sym", "--seeds", "0,1", "--no-progress",
       "--checkpoint-seconds", "0"]
BAD_WORDS = ("Traceback", "Fatal Python error", "Segmentation fault", "Exception ignored")
SIGNALS = {"INT": signal.SIGINT, "TERM": signal.SIGTERM}
TIMEOUT = 900.0  # seconds for one process: far beyond a tiny run, even on a busy machine


def command(folder: Path, extra: list[str], *, resume: bool = False) -> list[str]:
    return [sys.executable, "-m", "swan_jax.experiments.transfer", *RUN, *extra,
            "--results-dir", str(folder / "res"), "--cache-dir", str(folder / "cache"),
            *(["--resume"] if resume else [])]


def start(argv: list[str]) -> tuple[subprocess.Popen, float]:
    """The run started, and the moment of its first line of output (waited for; a run
    that ends before it is judged by its exit)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    child.stdout.readline()  # the plan: the handlers are installed
    return child, time.perf_counter()


def finish(child: subprocess.Popen) -> tuple[int, str, str]:
    out, err = child.communicate(timeout=TIMEOUT)
    return child.returncode, out, err


def outcome(folder: Path) -> tuple[list[int], list[float]]:
    """The epochs of the program's history and the test score of each run."""
    [history] = (folder / "res" / "checkpoints").rglob("history.jsonl")
    epochs = [json.loads(line)["epoch"] for line in history.read_text().splitlines()]
    records = json.loads((folder / "res" / "results.json").read_text())["records"]
    return epochs, [run["test"] for record in records for run in record["runs"]]


def problems(code: int, err: str, *, allowed: tuple[int, ...]) -> list[str]:
    """What is wrong with a process's end."""
    found = [f"stderr has {word!r}" for word in BAD_WORDS if word in err]
    if code not in allowed:
        found.insert(0, f"exit {code}" + (" (killed by a signal)" if code < 0 else ""))
    return found


def one_moment(i: int, rng: random.Random, length: float, expected: list[float],
               extra: list[str], work: Path) -> dict:
    """Interrupt one run at a random moment, resume it, check both ends."""
    folder = work / f"run{i}"
    name = rng.choice(sorted(SIGNALS))
    delay = rng.uniform(0.0, length)
    child, _ = start(command(folder, extra))
    time.sleep(delay)
    sent = child.poll() is None
    if sent:
        child.send_signal(SIGNALS[name])
    code, _, err = finish(child)
    found = problems(code, err, allowed=(0, 128 + SIGNALS[name]) if sent else (0,))
    if code == 128 + SIGNALS[name] and "resume with:" not in err:
        found.append("no resume command")
    resumed = subprocess.run(command(folder, extra, resume=True), cwd=ROOT, text=True,
                             capture_output=True, timeout=TIMEOUT)
    found += [f"resume: {p}" for p in problems(resumed.returncode, resumed.stderr,
                                                allowed=(0,))]
    if resumed.returncode == 0:
        epochs, scores = outcome(folder)
        if epochs != list(range(EPOCHS)):
            found.append(f"history epochs {epochs}")
        if scores != expected:
            found.append(f"test scores {scores}, uninterrupted {expected}")
    shutil.rmtree(folder, ignore_errors=True)
    return {"moment": i, "signal": name, "seconds_after_first_line": round(delay, 2),
            "sent": sent, "exit": code, "resume_exit": resumed.returncode,
            "problems": found, "stderr_tail": err.strip().splitlines()[-1:] if found else []}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[1:]))
    p.add_argument("--n", type=int, default=50, help="moments (default 50)")
    p.add_argument("--seed", type=int, default=0, help="draws the moments and signals")
    p.add_argument("--out", type=Path, default=None, help="a JSON file of every moment")
    p.add_argument("extra", nargs="*", help="flags for the run (after --)")
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="swan-interrupts-") as tmp:
        work = Path(tmp)
        child, first = start(command(work / "reference", args.extra))
        code, _, err = finish(child)
        if code != 0:
            print(f"the uninterrupted run failed (exit {code}):\n{err}", file=sys.stderr)
            return 1
        length = time.perf_counter() - first
        _, expected = outcome(work / "reference")
        print(f"uninterrupted: {length:.1f} s after its first line; moments drawn in "
              f"[0, {length:.1f}] s", flush=True)
        moments = []
        for i in range(args.n):
            m = one_moment(i, rng, length, expected, args.extra, work)
            moments.append(m)
            print(f"{i + 1:3d}/{args.n}  SIG{m['signal']:<4} at "
                  f"{m['seconds_after_first_line']:6.2f} s  exit {m['exit']:>3}  "
                  f"resume {m['resume_exit']}  " + ("; ".join(m["problems"]) or "ok"),
                  flush=True)
    failed = [m for m in moments if m["problems"]]
    print(f"{len(moments) - len(failed)} of {len(moments)} interrupted runs ended cleanly and "
          f"resumed to the uninterrupted numbers ({sum(not m['sent'] for m in moments)} "
          f"finished before their signal)")
    if args.out is not None:
        args.out.write_text(json.dumps({"run": RUN + args.extra, "length_s": length,
                                        "moments": moments}, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
