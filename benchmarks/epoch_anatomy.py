"""Epoch anatomy: where one training epoch goes, on both pipelines, for four workloads.

For each workload (Peptides-func SWAN; transfer line k = 10 on the paper's grid, and at
the CPU protocol's one point and 2 seeds; GraphProp at the CPU protocol; Tolokers full
batch) and each pipeline ("device": data placed once, batches gathered on the device;
"host": NumPy batches built and copied in a background thread), one
`swan_jax.train.train` call of a few epochs gives the epoch's wall time (median of the
epochs after the first, which compiles), and the same program's parts are timed alone,
blocked on their results:

- host batch building: NumPy batches of an epoch (host), or packing graph ids (device);
- copies: putting an epoch's NumPy batches on the device (host pipeline only);
- device steps: an epoch's training calls on data already placed (device pipeline);
- evaluation: the validation and test splits, one call each (device pipeline);
- checkpointing: one orbax save of the program's state.

The device's busy share is (steps + evaluation) / epoch wall time. Where an epoch is one
training call (transfer, GraphProp), a `train` call long enough to run several epochs per
device call (`swan_jax.train.MIN_FUSED_EPOCHS`) gives the epoch's wall time that way too
(`device_fused`). Results go to
`benchmarks/results/epoch_anatomy.json` (or `--out`).

    python -m benchmarks.epoch_anatomy                 # all four, full sizes
    python -m benchmarks.epoch_anatomy --quick         # small sizes, a smoke run
    python -m benchmarks.epoch_anatomy --only transfer,graphprop

`--grid` instead prints, side by side from one process, a GraphProp "SSSP" epoch (SWAN
hidden 20, 10 layers, one seed; train + validation + test) of a lone run and, per run,
of 8-run programs: 8 epsilons, and 4 epsilons x both adjacencies (the adjacency batched
across runs), each in the layout the device chooses (`_run_blocks.by_device`; the
layout before, all runs vmapped at once, is measured in docs/benchmarks-log.md, "A grid
on a CPU"). Wall and CPU seconds, medians of `--repeat` rounds that alternate the programs.
With `--authors-python` (a Python with torch and torch_geometric; torch is not a
dependency here) and `--ref` (a gravins/SWAN checkout), the authors' epoch on the same
splits is one more program of every round: `benchmarks.reference_pytorch
--graphprop-epochs` runs it in that Python, one epoch per round, so every ratio comes
from one run.

    python -m benchmarks.epoch_anatomy --grid                       # full data
    python -m benchmarks.epoch_anatomy --grid --per-size 128,32,64  # a quarter
    python -m benchmarks.epoch_anatomy --grid --authors-python TORCH_VENV/bin/python \\
        --ref SWAN_CHECKOUT
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

import swan_jax as sj
from benchmarks.common import BATCH, ROOT, lrgb_model, machine, peptides_train
from swan_jax.data import load_peptides_func
from swan_jax.data.batching import iterate_batches
from swan_jax.data.device import epoch_ids
from swan_jax.runs.checkpoint import CheckpointStore
from swan_jax.train import MAX_CHUNK, NodeSplit, TrainConfig, open_program, train

WORKLOADS = ("peptides", "peptides-learn", "transfer", "transfer-cpu", "graphprop",
             "tolokers")
# What runs without --only: SWAN-learn's Peptides-func epoch is issue 19's GPU figure
# (`benchmarks/gpu_check.py` asks for it); on 2 CPU cores it would add minutes.
DEFAULT_WORKLOADS = tuple(w for w in WORKLOADS if w != "peptides-learn")
PIPELINES = ("device", "host")


@dataclasses.dataclass
class Workload:
    """A training program: model, splits, configuration, grid, and what it stands for."""

    model_fn: Any
    splits: dict
    cfg: TrainConfig
    grid: tuple
    about: str


def _peptides(quick: bool, kind: str = "swan") -> Workload:
    data_dir = os.environ.get("SWAN_DATA_DIR") or str(ROOT.parent / "shared" / "data")
    try:
        splits = load_peptides_func(data_dir, download=False, progress=False,
                                    limit=600 if quick else None)
        source = "peptides-func (real)"
    except Exception:  # noqa: BLE001 -- the benchmark still runs on stand-ins
        train_set, source = peptides_train(512 if quick else 4096)
        n = len(train_set)
        splits = {"train": train_set.subset(range(n // 2)),
                  "val": train_set.subset(range(n // 2, 3 * n // 4)),
                  "test": train_set.subset(range(3 * n // 4, n))}
    cfg = TrainConfig(batch_size=BATCH, optimizer="adamw", loss="bce", metric="ap",
                      task_level="graph")
    return Workload(lambda hp: lrgb_model(kind), splits, cfg, ({},),
                    f"{source}: {kind.upper()} d 128, 5 Euler layers, batch 64, AdamW, metric AP "
                    f"(scored on the host); graphs {[len(s) for s in splits.values()]}")


def _transfer(quick: bool, paper_grid: bool = True) -> Workload:
    from swan_jax.data.transfer import load_transfer

    sizes = (100, 20, 20) if quick else (1000, 100, 100)
    cache = Path(tempfile.gettempdir()) / "swan_anatomy_cache"
    splits = load_transfer("line", 10, cache_dir=cache, sizes=sizes)
    points = [{"epsilon": e, "gamma": g, "beta": b}
              for e in (0.5, 0.1) for g in (0.1, 0.0) for b in (1.0, 0.5) for _ in (0,)]
    points = [{**p, "learning_rate": 1e-3} for p in points] * (2 if paper_grid else 1)
    grid = tuple(points[:16]) if paper_grid else tuple(points[:1])
    seeds = (0, 1, 2, 3) if paper_grid else (0, 1)

    def model_fn(hp):
        block = sj.SWANBlock(sj.SWANConfig(epsilon=hp["epsilon"], gamma=hp["gamma"],
                                           beta=hp["beta"], num_layers=10))
        return sj.Model(sj.LinearEncoder(64), block, sj.NodeReadout((1,)))

    cfg = TrainConfig(batch_size=512, seeds=seeds, loss="mse", metric="mse",
                      task_level="node")
    runs = len(grid) * len(seeds)
    return Workload(model_fn, splits, cfg, grid,
                    f"transfer line k=10, {runs} runs vmapped ({len(grid)} grid points x "
                    f"{len(seeds)} seeds), width 64, batch 512, graphs {list(sizes)}")


def _graphprop(quick: bool) -> Workload:
    from swan_jax.data.graphprop import load_graphprop

    per_size = {"train": 32, "val": 8, "test": 16} if quick else \
        {"train": 128, "val": 32, "test": 64}
    cache = Path(tempfile.gettempdir()) / "swan_anatomy_cache"
    splits = load_graphprop("sssp", labels="paper", cache_dir=cache, per_size=per_size)

    def model_fn(hp):
        block = sj.SWANBlock(sj.SWANConfig(epsilon=0.1, gamma=0.1, beta=1.0, num_layers=10))
        return sj.Model(sj.LinearEncoder(20), block, sj.NodeReadout((10, 1)))

    cfg = TrainConfig(batch_size=512, seeds=(0, 1), loss="graph_mean_mse",
                      metric="graph_mean_log10_mse", task_level="node", learning_rate=3e-3)
    return Workload(model_fn, splits, cfg, ({},),
                    f"GraphProp sssp, CPU protocol sizes {list(per_size.values())} per node "
                    f"count, hidden 20, 10 layers, 2 seeds, batch 512")


def _tolokers(quick: bool) -> Workload:
    from swan_jax.data.node_classification import load_tolokers

    data_dir = os.environ.get("SWAN_DATA_DIR") or str(ROOT.parent / "shared" / "data")
    cache = Path(tempfile.gettempdir()) / "swan_anatomy_cache"
    data = load_tolokers(data_dir, cache, download=False)
    graph = data.graph
    if quick:  # the first 2,000 nodes and the edges among them
        keep = (graph.senders < 2000) & (graph.receivers < 2000)
        graph = dataclasses.replace(
            graph, nodes=graph.nodes[:2000], node_targets=graph.node_targets[:2000],
            senders=graph.senders[keep], receivers=graph.receivers[keep],
            n_node=np.array([2000], np.int32), n_edge=np.array([keep.sum()], np.int32))
    n = int(graph.n_node[0])
    splits = {name: NodeSplit(graph, getattr(data, f"{name}_masks")[0][:n])
              for name in ("train", "val", "test")}

    def model_fn(hp):
        block = sj.SWANBlock(sj.SWANConfig(epsilon=0.1, gamma=0.1, beta=1.0, num_layers=4))
        return sj.Model(sj.LinearEncoder(16), block, sj.NodeReadout((1,)))

    cfg = TrainConfig(batch_size=1, loss="bce", metric="roc_auc", task_level="node")
    return Workload(model_fn, splits, cfg, ({},),
                    f"Tolokers full batch ({n} nodes), SWAN width 16, 4 layers, ROC AUC "
                    f"(scored on the host), split 0")


BUILD = {"peptides": _peptides,
         "peptides-learn": lambda quick: _peptides(quick, kind="swan-learn"),
         "transfer": _transfer,
         "transfer-cpu": lambda quick: _transfer(quick, paper_grid=False),
         "graphprop": _graphprop, "tolokers": _tolokers}


def _blocked(fn, repeat: int) -> float:
    """Median seconds of `fn()` (its result blocked on) over `repeat` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _parts(work: Workload, pipeline: str, repeat: int) -> dict[str, float]:
    """The program's parts timed alone (see the module docstring)."""
    cfg = dataclasses.replace(work.cfg, pipeline=pipeline, progress=False, epochs=2)
    prog, state = open_program(work.model_fn, work.splits, cfg, work.grid)
    pipe, data, budget = prog.pipeline, prog.data["train"], prog.budget
    rng = lambda: np.random.default_rng([cfg.data_seed, 1])  # noqa: E731
    state, _ = pipe.train_epoch(state, prog.hp, 0, lambda n: None)  # compiles
    out = {"steps_per_epoch": pipe.steps(1), "placed_bytes": pipe.bytes}
    if pipeline == "device":
        out["host_build_s"] = _blocked(lambda: epoch_ids(data, budget, prog.batch_size, rng()),
                                       repeat)
        pipe._ids.clear()  # noqa: SLF001 -- time the packing inside the epoch as well
        out["epoch_calls_s"] = _blocked(
            lambda: pipe.train_epoch(state, prog.hp, 1, lambda n: None)[1], repeat)
        out["device_steps_s"] = max(out["epoch_calls_s"] - out["host_build_s"], 0.0)
        splits = [s for s in ("val", "test") if s in prog.data]
        for split in splits:
            pipe.evaluate(state.params, prog.hp, split)
        out["evaluation_s"] = _blocked(lambda: [pipe.evaluate(state.params, prog.hp, s)
                                                for s in splits], repeat)
    else:
        batches = []
        out["host_build_s"] = _blocked(lambda: batches.__setitem__(slice(None), list(
            iterate_batches(data, prog.batch_size, budget, rng()))), repeat)
        out["copies_s"] = _blocked(lambda: [jax.device_put(b) for b in batches], repeat)
    with tempfile.TemporaryDirectory() as tmp:
        store = CheckpointStore(tmp)
        out["checkpoint_s"] = _blocked(
            lambda: store.save(len(store._manager.all_steps()) + 1, state.device_part(),  # noqa: SLF001
                               {"epoch": 0}), max(2, repeat // 2))
        store.close()
    return out


def _epochs(work: Workload, pipeline: str, epochs: int) -> dict[str, float]:
    """Median epoch wall time of a real `train` call, one epoch per call (epochs after
    the first; fewer than `MIN_FUSED_EPOCHS` epochs do not fuse)."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = dataclasses.replace(work.cfg, pipeline=pipeline, progress=False, epochs=epochs,
                                  checkpoint_dir=tmp)
        result = train(work.model_fn, work.splits, cfg, work.grid)
    later = result.timings[1:] or result.timings
    return {"epoch_s": statistics.median(h["seconds"] for h in result.history[1:]
                                         or result.history),
            "train_s": statistics.median(t["train_seconds"] for t in later),
            "eval_s": statistics.median(t["eval_seconds"] for t in later),
            "first_epoch_s": result.history[0]["seconds"]}


def _fused_epochs(work: Workload, seconds: float) -> dict[str, Any] | None:
    """Epoch wall time with several epochs per device call, from a `train` call of about
    `seconds` after its compiling first blocks; None where an epoch is more than one
    training call (nothing is fused)."""
    from swan_jax.train import MIN_FUSED_EPOCHS, can_fuse

    prog_cfg = dataclasses.replace(work.cfg, pipeline="device", progress=False, quiet=True)
    prog, _ = open_program(work.model_fn, work.splits, prog_cfg, work.grid)
    long_run = dataclasses.replace(prog_cfg, epochs=MIN_FUSED_EPOCHS)
    if not can_fuse(long_run, prog.pipeline) or prog.pipeline.steps(0) > MAX_CHUNK:
        return None
    per_epoch = _epochs(work, "device", 3)["epoch_s"]  # the per-epoch loop's pace
    epochs = int(min(5000, max(MIN_FUSED_EPOCHS, seconds / per_epoch)))
    with tempfile.TemporaryDirectory() as tmp:
        result = train(work.model_fn, work.splits, dataclasses.replace(
            prog_cfg, epochs=epochs, checkpoint_dir=tmp, patience=None), work.grid)
    fused = [(h["seconds"], t["epochs_per_call"]) for h, t in
             zip(result.history, result.timings, strict=True) if t.get("epochs_per_call", 1) > 1]
    later = fused[len(fused) // 4:]  # blocks once the pace is known
    return {"epochs": epochs, "epoch_s": statistics.median(s for s, _ in later),
            "epochs_per_call": statistics.median(n for _, n in later),
            "per_epoch_loop_epoch_s": per_epoch, "wall_s": result.wall_time}


def anatomy(name: str, quick: bool, epochs: int, repeat: int) -> dict[str, Any]:
    """Both pipelines of one workload, and the device's busy share on each; for short
    epochs, also the device pipeline with several epochs per call."""
    work = BUILD[name](quick)
    record: dict[str, Any] = {"workload": work.about, "load_average_start": os.getloadavg()}
    for pipeline in PIPELINES:
        record[pipeline] = {**_epochs(work, pipeline, epochs), **_parts(work, pipeline, repeat)}
    fused = _fused_epochs(work, seconds=2.0 if quick else 20.0)
    if fused is not None:
        record["device_fused"] = fused
    device = record["device"]
    busy = device["device_steps_s"] + device["evaluation_s"]
    for pipeline in PIPELINES:
        record[pipeline]["busy_share"] = min(busy / record[pipeline]["epoch_s"], 1.0)
    record["host_over_device_epoch"] = record["host"]["epoch_s"] / device["epoch_s"]
    record["load_average_end"] = os.getloadavg()
    return record


def table(results: dict[str, Any]) -> str:
    """The markdown table of a results file (docs/benchmarks-log.md quotes it)."""
    rows = ["| workload | pipeline | epoch s | host building s | copies s | device steps s | "
            "evaluation s | checkpoint s | device busy |", "|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda v: "" if v is None else f"{v:.3g}"  # noqa: E731
    for name, r in results["workloads"].items():
        if "skipped" in r:
            rows.append(f"| {name} | skipped: {r['skipped']} | | | | | | | |")
            continue
        for pipeline in PIPELINES:
            x = r[pipeline]
            rows.append(f"| {name} | {pipeline} | {fmt(x['epoch_s'])} | "
                        f"{fmt(x.get('host_build_s'))} | {fmt(x.get('copies_s'))} | "
                        f"{fmt(x.get('device_steps_s'))} | {fmt(x.get('evaluation_s'))} | "
                        f"{fmt(x['checkpoint_s'])} | {100 * x['busy_share']:.0f}% |")
        if "device_fused" in r:
            x = r["device_fused"]
            rows.append(f"| {name} | device, {x['epochs_per_call']:.0f} epochs per call | "
                        f"{fmt(x['epoch_s'])} | | | | | | |")
    return "\n".join(rows)


GRID_PROGRAMS = {  # name: (epsilons, adjacencies)
    "lone run": ((0.1,), ("sym",)),
    "8 epsilons": ((0.5, 0.3, 0.2, 0.1, 0.05, 0.03, 0.02, 0.01), ("sym",)),
    "4 epsilons x sym/adj": ((0.5, 0.1, 0.05, 0.01), ("sym", "adj")),
}


def _grid_program(eps, adjacencies, per_size, folder: str):
    """A GraphProp program as the sweep builds it (one cell, one static point)."""
    from swan_jax.experiments.graphprop import EXPERIMENT as exp
    from swan_jax.experiments.sweep import train_config

    cfg = exp.default_config()
    grid = {**cfg.grid, "hidden": (20,), "num_layers": (10,), "adjacency": adjacencies,
            "epsilon": eps, "gamma": (0.1,), "beta": (1.0,)}
    cfg = dataclasses.replace(cfg, grid=grid, seeds=(0,), per_size=per_size, epochs=3,
                              checkpoint_dir=folder, progress=False, quiet=True)
    (program,) = exp.plan(cfg, exp.cells(cfg)[:1])
    splits = exp.load_data(cfg, program.cell)
    tcfg = dataclasses.replace(train_config(exp, cfg, program, None), progress=False,
                               quiet=True)
    exported = Path(folder).parent / "splits.npz"  # every program's splits: written once
    if not exported.exists():
        np.savez(exported, **{f"{name}_{field}": getattr(data, field)
                              for name, data in splits.items()
                              for field in ("nodes", "senders", "receivers", "n_node",
                                            "n_edge")},
                 **{f"{name}_y": data.node_targets[:, 0] for name, data in splits.items()})
    return open_program(exp.model_fn(cfg, program.cell, program.static), splits, tcfg,
                        program.grid)


class AuthorsEpochs:
    """The authors' GraphProp epoch, timed in a torch interpreter
    (`benchmarks.reference_pytorch --graphprop-epochs`), one epoch per call."""

    def __init__(self, python: str, ref: Path, data: str):
        swan = ref / "graph_property_prediction" / "models" / "swan.py"
        self.process = subprocess.Popen(
            [python, "-m", "benchmarks.reference_pytorch", "--ref", str(swan),
             "--graphprop-epochs", data, "--threads", "2"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        self.patches = self._read()["patches"]

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the authors' epochs ({self.process.args[0]}) ended early: "
                             "see its error above")
        return json.loads(line)

    def epoch(self) -> tuple[float, float]:
        assert self.process.stdin is not None
        self.process.stdin.write("epoch\n")
        self.process.stdin.flush()
        timing = self._read()
        return timing["wall_s"], timing["cpu_s"]

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def _grid_epoch(prog, state) -> tuple[float, float]:
    """Wall and CPU seconds of one training epoch and both evaluations."""
    wall, cpu = time.perf_counter(), time.process_time()
    state, _ = prog.pipeline.train_epoch(state, prog.hp, 1, lambda n: None)
    jax.block_until_ready([prog.pipeline.evaluate(state.params, prog.hp, s)
                           for s in ("val", "test")])
    return time.perf_counter() - wall, time.process_time() - cpu


AUTHORS = "the authors' SWAN (torch, 2 threads)"


def grid(per_size: tuple[int, int, int], repeat: int, authors: float | None,
         authors_python: str | None = None, ref: Path | None = None) -> dict[str, Any]:
    """The `--grid` comparison (module docstring): per program, median wall and CPU
    seconds per run and their ratios to the lone run's, round by round."""
    with tempfile.TemporaryDirectory() as tmp:
        progs = {name: _grid_program(*spec, per_size, f"{tmp}/{i}")
                 for i, (name, spec) in enumerate(GRID_PROGRAMS.items())}
        timed = {name: functools.partial(_grid_epoch, *prog) for name, prog in progs.items()}
        server = (AuthorsEpochs(authors_python, ref, f"{tmp}/splits.npz")
                  if authors_python and ref else None)
        if server is not None:
            timed = {AUTHORS: server.epoch, **timed}
        for epoch in timed.values():
            epoch()  # compiles (ours), warms up (theirs)
        rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in timed}
        for _ in range(repeat):
            for name, epoch in timed.items():
                wall, cpu = epoch()
                runs = len(progs[name][1].stopped) if name in progs else 1
                rounds[name].append((wall / runs, cpu / runs))
        if server is not None:
            server.close()
    lone = rounds["lone run"]
    out: dict[str, Any] = {"per_size": per_size, "load_average": os.getloadavg(),
                           "authors_epoch_s": authors, "programs": {}}
    if server is not None:
        out["authors_patches"] = server.patches
    for name, values in rounds.items():
        pairs = list(zip(values, lone, strict=True))
        out["programs"][name] = {
            "wall_s_per_run": statistics.median(w for w, _ in values),
            "cpu_s_per_run": statistics.median(c for _, c in values),
            "wall_ratio": statistics.median(v[0] / base[0] for v, base in pairs),
            "cpu_ratio": statistics.median(v[1] / base[1] for v, base in pairs)}
    return out


def grid_table(result: dict[str, Any]) -> str:
    authors = result["authors_epoch_s"]
    lone = result["programs"]["lone run"]["wall_s_per_run"]
    rows = ["| program | wall s per run | CPU s per run | x lone (wall) | x lone (CPU) |",
            "|---|---|---|---|---|"]
    if AUTHORS not in result["programs"]:
        rows.append(f"| {AUTHORS} | " + (
            f"{authors:.3g} ({authors / lone:.1f}x our lone run) | | | |" if authors
            else "not measured: no --authors-python (--authors-seconds) | | | |"))
    rows += [f"| {name} | {r['wall_s_per_run']:.3g} | {r['cpu_s_per_run']:.3g} | "
             f"{r['wall_ratio']:.2f} | {r['cpu_ratio']:.2f} |"
             for name, r in result["programs"].items()]
    return "\n".join(rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.epoch_anatomy",
                                description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    p.add_argument("--only", default=",".join(DEFAULT_WORKLOADS),
                   help=f"comma-separated workloads of {', '.join(WORKLOADS)}")
    p.add_argument("--epochs", type=int, default=3, help="epochs of each train call")
    p.add_argument("--repeat", type=int, default=3, help="repeats of each timed part")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                   "epoch_anatomy.json", help="where the JSON goes")
    p.add_argument("--report", action="store_true",
                   help="print the markdown table of --out and stop")
    p.add_argument("--grid", action="store_true",
                   help="a lone GraphProp run against 8-run programs, per run (see above)")
    p.add_argument("--per-size", default="512,128,256",
                   help="--grid: GraphProp graphs per node count, train,val,test")
    p.add_argument("--authors-seconds", type=float, default=None,
                   help="--grid: the authors' epoch, timed in a torch venv")
    p.add_argument("--authors-python", default=None,
                   help="--grid: a Python with torch and torch_geometric that times the "
                        "authors' epoch in every round (needs --ref)")
    p.add_argument("--ref", type=Path, default=None,
                   help="--grid: a gravins/SWAN checkout (with --authors-python)")
    args = p.parse_args(argv)
    if args.grid:
        sizes = tuple(int(v) for v in args.per_size.split(","))
        if len(sizes) != 3 or min(sizes) < 1:
            p.error(f"--per-size takes three positive numbers, got {args.per_size!r}")
        if (args.authors_python is None) != (args.ref is None):
            p.error("--authors-python and --ref go together: the Python with torch and "
                    "the gravins/SWAN checkout it loads")
        if args.ref is not None and not (args.ref / "graph_property_prediction" / "models"
                                         / "swan.py").is_file():
            p.error(f"--ref {args.ref}: no graph_property_prediction/models/swan.py there "
                    "(give the root of a gravins/SWAN checkout)")
        result = grid(sizes, args.repeat, args.authors_seconds,  # type: ignore[arg-type]
                      args.authors_python, args.ref)
        print(json.dumps(result, indent=1, default=float))
        print(grid_table(result))
        return 0
    if args.report:
        print(table(json.loads(args.out.read_text())))
        return 0
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown:
        p.error(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    results = {"machine": machine(), "quick": args.quick, "workloads": {}}
    for name in names:
        print(f"epoch anatomy: {name} ...", flush=True)
        try:
            results["workloads"][name] = anatomy(name, args.quick, args.epochs, args.repeat)
        except FileNotFoundError as err:  # Tolokers or Peptides files absent
            results["workloads"][name] = {"skipped": str(err).splitlines()[0]}
        print(json.dumps(results["workloads"][name], indent=1, default=float), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
