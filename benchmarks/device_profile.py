"""Device profile: which compiled operations an epoch's device time goes to.

For workloads of the epoch anatomy (`benchmarks.epoch_anatomy.BUILD`), the device
pipeline's training epochs and its validation and test evaluations run under
`jax.profiler.trace` after a first epoch that compiles them. The trace's XLA operation
events (a GPU's "XLA Ops" line; on a CPU the runtime's thunk events) are summed per
operation, and each operation is named by the JAX code it came from: the `op_name` and
source line that XLA keeps in the optimised HLO, which this benchmark has XLA dump for
the purpose. Reported per workload: the traced window's wall time, the device's busy
time (the union of the operations' intervals) and share, operations per epoch, and the
operations that take the most time, grouped by their JAX name and source line.

Why: issue 19's open GPU figures (transfer line k = 10 at 22 ms per fused epoch of 64
runs, SWAN-learn's Peptides-func epoch at 0.82 s) are arithmetic or kernel launches,
and only a profile of the device says which, and where.

    python -m benchmarks.device_profile --only transfer,peptides-learn   # a lent GPU
    python -m benchmarks.device_profile --only transfer-cpu --quick      # a CPU smoke run

XLA_FLAGS is extended with `--xla_dump_to`: run it in a fresh process (the flags are
read when JAX starts its backend).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

# JAX, and what imports it (benchmarks.common, benchmarks.epoch_anatomy, swan_jax), load
# inside the functions: `_start` extends XLA_FLAGS first, which JAX reads when it loads.
from benchmarks import op_report

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "device_profile.json"
_MODULE_FILE = re.compile(r"module_(\d+)\.(.+?)\..*after_optimizations\.txt$")


def hlo_names(dump: Path) -> dict[tuple[str, str], str]:
    """`(module, instruction) -> "primitive, forward|backward, file:line function"` from
    XLA's dumped optimised HLO, for every module compiled so far; the module by its
    program id and by its name. A fusion without metadata of its own (a CPU matmul
    fusion) takes that of its fused computation's last instruction that has some."""
    names: dict[tuple[str, str], str] = {}
    for path in sorted(dump.glob("*after_optimizations.txt")):
        match = _MODULE_FILE.search(path.name)
        if match is None:
            continue
        lines = path.read_text(errors="replace").splitlines()
        own, calls, computation_names = op_report.instruction_names(lines)
        for instruction, computation in calls.items():
            if instruction not in own and computation in computation_names:
                own[instruction] = computation_names[computation]
        for instruction, name in own.items():
            names[(str(int(match.group(1))), instruction)] = name
            names.setdefault((match.group(2), instruction), name)
    return names


def op_events(trace_dir: Path) -> list[tuple[str, str, int, int]]:
    """`(module, hlo_op, start_ns, duration_ns)` of every XLA operation in the trace, the
    module named by its program id where the event has one: a device plane's "XLA Ops"
    line (else its stream lines) where there is a device plane (a GPU), else the host's
    thunk events (a CPU)."""
    from jax.profiler import ProfileData

    path = next(trace_dir.glob("**/*.xplane.pb"), None)
    if path is None:
        raise SystemExit(f"{trace_dir}: jax.profiler wrote no trace (*.xplane.pb)")
    device, host = [], []
    for plane in ProfileData.from_file(str(path)).planes:
        on_device = plane.name.startswith("/device:")
        lines = {line.name: [_op_row(e) for e in line.events] for line in plane.lines}
        lines = {k: [r for r in rows if r is not None] for k, rows in lines.items()}
        if on_device and lines.get("XLA Ops"):
            lines = {"XLA Ops": lines["XLA Ops"]}
        for rows in lines.values():
            (device if on_device else host).extend(rows)
    if not (device or host):
        raise SystemExit(f"{path}: the trace holds no XLA operation (no `hlo_op` events)")
    return device or host


def _op_row(event) -> tuple[str, str, int, int] | None:
    stats = dict(event.stats)
    if "hlo_op" not in stats:
        return None
    module = stats.get("program_id", stats.get("hlo_module", "?"))
    return str(module), str(stats["hlo_op"]), int(event.start_ns), int(event.duration_ns)


def busy_ns(events: list[tuple[str, str, int, int]]) -> int:
    """Time covered by at least one operation (the union of their intervals)."""
    total, end = 0, None
    for _, _, start, duration in sorted(events, key=lambda e: e[2]):
        stop = start + duration
        if end is None or start > end:
            total, end = total + duration, stop
        elif stop > end:
            total, end = total + stop - end, stop
    return total


def summarise(events, names: dict[tuple[str, str], str], wall_s: float, epochs: int,
              top: int) -> dict[str, Any]:
    """Busy share and the `top` operation groups by summed time."""
    groups: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for module, op, _, duration in events:
        name = names.get((module, op), f"{module}:{op}")
        groups[name][0] += duration
        groups[name][1] += 1
    busy = busy_ns(events) / 1e9
    ranked = sorted(groups.items(), key=lambda kv: -kv[1][0])[:top]
    summed = sum(d for d, _ in groups.values())
    return {"wall_s": wall_s, "epochs": epochs, "busy_s": busy,
            "busy_share": busy / wall_s if wall_s else None,
            "ops_per_epoch": len(events) / epochs, "op_time_per_epoch_s": summed / 1e9 / epochs,
            "top": [{"name": name, "ms_per_epoch": d / 1e6 / epochs, "share": d / summed,
                     "count_per_epoch": n / epochs} for name, (d, n) in ranked]}


def traced_epochs(name: str, quick: bool, epochs: int, trace_dir: Path) -> float:
    """Compile, then trace `epochs` device-pipeline epochs with their evaluations; the
    traced window's wall seconds."""
    import jax

    from benchmarks.epoch_anatomy import BUILD
    from swan_jax.train import open_program

    work = BUILD[name](quick)
    cfg = dataclasses.replace(work.cfg, pipeline="device", progress=False, quiet=True,
                              epochs=epochs + 1)
    prog, state = open_program(work.model_fn, work.splits, cfg, work.grid)
    pipe = prog.pipeline
    splits = [s for s in ("val", "test") if s in prog.data]

    def epoch(state, e):
        state, _ = pipe.train_epoch(state, prog.hp, e, lambda n: None)
        jax.block_until_ready([pipe.evaluate(state.params, prog.hp, s) for s in splits])
        return state

    state = epoch(state, 0)  # compiles
    with jax.profiler.trace(str(trace_dir)):
        start = time.perf_counter()
        for e in range(1, epochs + 1):
            state = epoch(state, e)
        jax.block_until_ready(state.params)
        wall = time.perf_counter() - start
    return wall


def table(results: dict[str, Any], rows: int = 12) -> str:
    """Markdown: per workload, its busy share and its heaviest operation groups."""
    return op_report.table(
        results, "workloads",
        lambda name, r: (f"**{name}**: {r['wall_s'] / r['epochs'] * 1e3:.1f} ms per epoch, "
                         f"device busy {100 * r['busy_share']:.0f}%, "
                         f"{r['ops_per_epoch']:.0f} operations per epoch "
                         f"({r['op_time_per_epoch_s'] * 1e3:.1f} ms of them summed)"),
        ["operation (JAX name, source)", "ms per epoch", "share", "calls per epoch"],
        lambda t: [f"`{t['name']}`", f"{t['ms_per_epoch']:.2f}", f"{100 * t['share']:.1f}%",
                   f"{t['count_per_epoch']:.0f}"], rows)


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    p.add_argument("--epochs", type=int, default=3, help="traced epochs per workload")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the JSON goes")


def _start(args: argparse.Namespace, p: argparse.ArgumentParser) -> dict[str, Any]:
    """The header; XLA's HLO dump switched on before JAX loads (the names' source)."""
    if args.epochs < 1:
        p.error(f"--epochs must be at least 1, got {args.epochs}")
    args.work = Path(tempfile.mkdtemp(prefix="swan_profile_"))
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + f" --xla_dump_to={args.work / 'hlo'} --xla_dump_hlo_as_text")
    import jax  # after XLA_FLAGS

    from benchmarks.common import machine

    return {"machine": machine(), "device": str(jax.devices()[0].device_kind),
            "quick": args.quick}


def _measure(args: argparse.Namespace, name: str) -> dict[str, Any]:
    wall = traced_epochs(name, args.quick, args.epochs, args.work / name)
    return summarise(op_events(args.work / name), hlo_names(args.work / "hlo"), wall,
                     args.epochs, args.top)


def main(argv=None) -> int:
    from benchmarks.epoch_anatomy import WORKLOADS

    return op_report.main(argv, prog="python -m benchmarks.device_profile", doc=__doc__ or "",
                          what="workloads", choices=WORKLOADS,
                          default="transfer,peptides-learn", key="workloads",
                          add_arguments=_arguments, start=_start, measure=_measure,
                          render=table)


if __name__ == "__main__":
    raise SystemExit(main())
