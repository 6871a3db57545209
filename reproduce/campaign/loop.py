"""One call of the campaign: the chosen cells in priority order until a deadline.

Per runnable cell not collected yet: its run folder brought up to the newest state this
tree knows (`prepare`: its carried parts); its command run until it ends
or the deadline, then SIGTERM (the command saves the epoch under way; SIGKILL after
`grace` s); a finished folder collected, an unfinished one carried (`settle`). Then
RESULTS.md is re-rendered. The same loop serves a CPU background run and a GPU window;
with `--executor slurm` every cell is a job at once, collected when all have ended.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from reproduce.campaign import carry, gather
from reproduce.campaign.cells import (
    PLAN_FILE,
    Cell,
    cell_toml,
    command,
    load_cells,
    matching,
    toml_value,
)
from reproduce.device import device_kind
from reproduce.results import ReproductionsError
from reproduce.results.store import load_runs
from swan_jax.experiments.cluster import SlurmOptions

# The repository's data beside it (../shared/data), as the Makefile finds it.
REPO = Path(__file__).resolve().parents[2]
REPO_DATA = REPO.parent / "shared" / "data"


@dataclasses.dataclass
class Options:
    """One call's settings (the command line's flags)."""

    plan: Path = PLAN_FILE
    reproductions: Path = Path("reproductions")
    work: Path = Path("runs/campaign")
    cells: Sequence[str] = ()  # fnmatch patterns on cell ids; none: all
    until: float = float("inf")  # the deadline, as time.time()
    grace: float = 120.0  # seconds between SIGTERM and SIGKILL at the deadline
    min_start: float = 60.0  # a cell starts only with this much time before the deadline
    render: bool = True
    note: str = ""
    kind: str = ""  # the device kind (default: detected)
    slurm: SlurmOptions | None = None  # every cell a SLURM job

    @property
    def carried(self) -> Path:
        return self.reproductions / "campaign" / "carried"

    @property
    def device_kind(self) -> str:
        return self.kind or device_kind()


def chosen(opts: Options) -> list[Cell]:
    """The runnable cells matching `opts.cells`, not collected, in priority order."""
    cells = load_cells(opts.plan)
    collected = [run.results for run in load_runs(opts.reproductions)[0]]
    by_id = {c.id: c for c in cells}
    cells = [gather.resolve(c, by_id, collected) for c in matching(cells, opts.cells)]
    return [c for c in cells if c.runnable and not gather.is_done(
        c, opts.reproductions, collected, opts.device_kind)]


def prepare(cell: Cell, opts: Options) -> Path:
    """The cell's run folder at the newest state this tree knows, with its cell.toml."""
    run = opts.work / cell.slug
    if carry.parts(opts.carried, cell.slug):
        here = carry.progress(run) if run.is_dir() else (-1, -1)
        if not carry.finished(run) and carry.progress_of(opts.carried, cell.slug) > here:
            carry.unpack(opts.carried, cell.slug, run)
    run.mkdir(parents=True, exist_ok=True)
    if not cell.measurement:
        (run / "cell.toml").write_text(cell_toml(cell, run))
    return run


def environment() -> dict[str, str]:
    """This process's environment; the repository's data where $SWAN_DATA_DIR is unset."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    if not env.get("SWAN_DATA_DIR") and REPO_DATA.is_dir():
        env["SWAN_DATA_DIR"] = str(REPO_DATA)
    return env


def run_until(argv: Sequence[str], until: float, grace: float) -> tuple[int, bool]:
    """Run `argv`; at `until`, or when this process is interrupted (Ctrl-C, SIGTERM), stop
    it with SIGTERM (SIGKILL `grace` s later). Returns (its exit status, interrupted)."""
    proc = subprocess.Popen(argv, env=environment())
    interrupted = False
    try:
        proc.wait(timeout=None if until == float("inf") else max(until - time.time(), 0.0))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
    except KeyboardInterrupt:
        interrupted = True
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=grace), interrupted
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(), interrupted


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def held(arrived: list[int]) -> Iterator[None]:
    """Ctrl-C and SIGTERM wait for the block (a cell's collect or carry, which a
    `KeyboardInterrupt` would leave half-written): each is recorded in `arrived`."""
    previous = {s: signal.signal(s, lambda signum, frame: arrived.append(signum))
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def slurm_flags(slurm: SlurmOptions, run: Path) -> list[str]:
    """The experiment's flags that make the cell in `run` a SLURM job: its options in
    `<run>/slurm.toml`, submitit's logs in `<run>/submitit/`."""
    values = {**dataclasses.asdict(slurm), "folder": str(run / "submitit")}
    (run / "slurm.toml").write_text("[slurm]\n" + "".join(
        f"{k} = {toml_value(v)}\n" for k, v in values.items() if v is not None))
    return ["--executor", "slurm", "--slurm-config", str(run / "slurm.toml")]


def settle(cell: Cell, run: Path, opts: Options) -> list[str]:
    """A finished cell collected (its carried parts removed), an unfinished one carried."""
    if cell.measurement:
        done = gather.is_done(cell, opts.reproductions, [], opts.device_kind)
        return [f"{cell.id}: {'finished' if done else 'unfinished'}"]
    if carry.finished(run):
        lines = gather.collect_cell(cell, run, opts.reproductions, opts.device_kind,
                                    opts.note or f"campaign on {opts.device_kind}")
        carry.remove(opts.carried, cell.slug)
        return [f"{cell.id}: finished", *lines]
    if not any(run.rglob("run.json")) and not (run / "results.json").exists():
        return [f"{cell.id}: unfinished, nothing trained yet"]
    written = carry.pack(run, opts.carried, cell.slug)
    size = sum(p.stat().st_size for p in written) / 2 ** 20
    programs, epochs = carry.progress(run)
    return [f"{cell.id}: unfinished ({programs} program(s) done, {epochs} epoch(s) of those "
            f"under way), carried in {len(written)} part(s), {size:.2f} MB"]


def run_campaign(opts: Options) -> list[str]:
    """One call (see the module's docstring); prints its lines as they come."""
    lines: list[str] = []

    def say(*new: str) -> None:
        if new:
            print("\n".join(new), flush=True)
            lines.extend(new)

    cells = chosen(opts)
    say(f"campaign: {len(cells)} cell(s) to run on {opts.device_kind}"
        + (f" until {time.strftime('%H:%M:%S', time.localtime(opts.until))}"
           if opts.until != float("inf") else ""))
    if opts.slurm is not None:
        say(*[f"{c.id}: a measurement times this machine, not a SLURM job: left out"
              for c in cells if c.measurement])
        cells = [c for c in cells if not c.measurement]
        runs = [prepare(c, opts) for c in cells]
        procs = [subprocess.Popen(command(c, r, opts.reproductions) + slurm_flags(
            opts.slurm, r), env=environment()) for c, r in zip(cells, runs, strict=True)]
        for proc in procs:
            proc.wait()
        for cell, run in zip(cells, runs, strict=True):
            say(*settle(cell, run, opts))
    else:
        previous = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM ends it as Ctrl-C
        try:
            for cell in cells:
                if time.time() > opts.until - opts.min_start:
                    say("campaign: the deadline is near: no further cell starts")
                    break
                run = prepare(cell, opts)
                say(f"campaign: {cell.id} (priority {cell.priority})")
                code, interrupted = run_until(command(cell, run, opts.reproductions),
                                              opts.until, opts.grace)
                arrived: list[int] = []
                with held(arrived):
                    settled = settle(cell, run, opts)
                say(*settled, *([f"{cell.id}: its command exited with status {code}"]
                                if code not in (0, 130, 143, -9) else []))
                if interrupted or arrived:
                    say("campaign: interrupted: no further cell starts")
                    break
        finally:
            signal.signal(signal.SIGTERM, previous)
    if opts.render:
        say(*render_fresh(opts.reproductions))
    return lines


def render_fresh(reproductions: Path) -> list[str]:
    """RESULTS.md beside `reproductions`, rendered by a fresh interpreter of this tree (a
    campaign runs for hours while the renderer's text may change in the tree)."""
    done = subprocess.run(
        [sys.executable, "-m", "reproduce.results", "render", "--reproductions",
         str(reproductions.resolve()), "--out", str(reproductions.resolve().parent
                                                   / "RESULTS.md")],
        cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise ReproductionsError(said[-1] if said else "rendering RESULTS.md failed")
    return done.stdout.strip().splitlines()


def status(opts: Options) -> list[str]:
    """The cells left, in order, and how far each run folder or carried copy is."""
    cells = chosen(opts)
    lines = [f"{len(cells)} cell(s) left on {opts.device_kind}"]
    for cell in cells:
        run = opts.work / cell.slug
        here = carry.progress(run) if run.is_dir() else None
        there = carry.progress_of(opts.carried, cell.slug)
        lines.append(f"  {cell.priority:4d} {cell.id}" + (
            f": here {here[0]} program(s) + {here[1]} epoch(s)" if here else "") + (
            f"; carried {there[0]} program(s) + {there[1]} epoch(s)" if there[0] >= 0 else ""))
    return lines
