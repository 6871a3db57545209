"""Step operations: what one training step of the device pipeline compiles to, counted.

The H200 profile of SWAN-learn's Peptides-func epoch (docs/benchmarks-log.md, "Lease of
2026-11-28") found the device busy 20% of the epoch, in about 775 small operations per
step: the epoch is bound by launches and host round trips, not by arithmetic. The number
of operations a step compiles to is then the figure to cut, and it can be counted on any
machine: this tool lowers and compiles the device pipeline's scanned training call (the
jitted `lax.scan` over a chunk of steps that `DevicePipeline.train_epoch` runs) for a
Peptides-func-shaped program (batch 64, d 128, 5 Euler layers, the atom encoder, SWAN and
SWAN-learn), reads the optimised HLO, and counts per step (the scan's body and all it
calls, each nested loop's body once):

- `ops`: the operations that run as one unit each (a fusion, a gather, a dot, a copy,
  a loop, ...; not parameters, constants, tuples and bitcasts);
- `fusions`, `scatters` (a scatter or a fusion holding one), `whiles` (with how many have
  a trip count the compiler knows: the others read their condition back to the host
  each iteration on a GPU), `conditionals`;
- the operations grouped by the JAX primitive and source line XLA keeps in its metadata
  (`benchmarks.device_profile`'s naming), most first.

With `--lowered-for cuda` (the default) the program is also lowered, not compiled, for a
GPU, which needs no GPU: its loops, conditionals and scatters are counted in the StableHLO
(code that chooses by platform, `lax.platform_dependent`, takes the GPU's branch there).

The counts are of the compiled program, not of a run: a loop's body counts once however
often it runs. They depend on the backend's fusion decisions (a CPU fuses differently
from a GPU) but not on timing or load, so they are reproducible on the 2-core CPU and
show what a change removes.

    python -m benchmarks.step_ops                            # SWAN and SWAN-learn
    python -m benchmarks.step_ops --only swan-learn --top 40 --out /tmp/ops.json

The data are the first 600 Peptides-func graphs when `SWAN_DATA_DIR` (or
`../shared/data`) has them, else peptide-shaped stand-ins (`benchmarks.common`): the
budget (slot width, overflow rows) is printed with the counts, as it decides which loops
the layout needs.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import re
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from benchmarks import op_report
from benchmarks.common import machine
from benchmarks.epoch_anatomy import BUILD
from swan_jax.train import open_program

ROOT = Path(__file__).resolve().parents[1]
KINDS = {"swan": "peptides", "swan-learn": "peptides-learn"}
# Instructions that launch nothing: bookkeeping of values that are already there.
_FREE = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
         "opt-barrier", "partition-id", "replica-id", "add-dependency"}


@dataclasses.dataclass
class Instruction:
    name: str
    opcode: str
    line: str


def _opcode(rest: str) -> str:
    """The opcode of `shape opcode(operands), ...` (a tuple shape may nest parentheses)."""
    end, depth = 0, 0
    if rest.startswith("("):
        while end < len(rest):
            depth += (rest[end] == "(") - (rest[end] == ")")
            end += 1
            if depth == 0:
                break
    else:
        end = rest.find(" ") if " " in rest else len(rest)
    return rest[end:].strip().split("(", 1)[0]


def parse(text: str) -> tuple[dict[str, list[Instruction]], str]:
    """`{computation: [instructions]}` of an optimised HLO module, and its entry's name."""
    computations: dict[str, list[Instruction]] = {}
    entry, current = "", None
    for line in text.splitlines():
        header = op_report.HEADER.match(line)
        if header:
            current = computations.setdefault(header.group(2), [])
            entry = header.group(2) if header.group(1) else entry
            continue
        match = op_report.INSTRUCTION.match(line)
        if match and current is not None:
            current.append(Instruction(match.group(1), _opcode(match.group(2)), line))
    return computations, entry


def _called(instruction: Instruction) -> list[str]:
    """Computations an instruction runs as sequences of operations of their own (loop
    bodies and conditions, branches, calls); not a fusion's or a reduction's."""
    line, op = instruction.line, instruction.opcode
    if op == "while":
        return re.findall(r"(?:condition|body)=%?([\w.\-]+)", line)
    if op == "conditional":
        branches = re.search(r"branch_computations=\{([^}]*)\}", line)
        if branches:
            return [b.strip().lstrip("%") for b in branches.group(1).split(",")]
        return re.findall(r"(?:true|false)_computation=%?([\w.\-]+)", line)
    if op == "call":
        return re.findall(r"to_apply=%?([\w.\-]+)", line)
    return []


def _reachable(computations, start: list[str]) -> list[str]:
    seen, todo = [], list(start)
    while todo:
        name = todo.pop(0)
        if name in seen or name not in computations:
            continue
        seen.append(name)
        for instruction in computations[name]:
            todo.extend(_called(instruction))
    return seen


def _fused_opcodes(computations, instruction: Instruction) -> set[str]:
    called = re.search(r"calls=%?([\w.\-]+)", instruction.line)
    if instruction.opcode != "fusion" or called is None:
        return set()
    return {i.opcode for i in computations.get(called.group(1), [])}


def count_step(text: str, top: int = 25) -> dict[str, Any]:
    """Per-step counts of an optimised HLO module whose entry runs the steps in a loop:
    the step is the entry's loop with the most operations (see the module docstring)."""
    computations, entry = parse(text)
    names, calls, computation_names = op_report.instruction_names(text.splitlines())
    loops = [i for i in computations[entry] if i.opcode == "while"]
    if not loops:
        raise ValueError("the compiled program's entry runs no loop over steps")

    def ops_of(root: Instruction) -> list[Instruction]:
        return [i for c in _reachable(computations, _called(root)) for i in computations[c]
                if i.opcode not in _FREE]

    step = max(loops, key=lambda loop: len(ops_of(loop)))
    ops = ops_of(step)
    groups: collections.Counter = collections.Counter()
    for i in ops:
        called = re.search(r"calls=%?([\w.\-]+)", i.line)
        name = names.get(i.name) or (computation_names.get(called.group(1)) if called else None)
        groups[name or f"{i.opcode} (no source kept)"] += 1
    whiles = [i for i in ops if i.opcode == "while"]
    known = [i for i in whiles if "known_trip_count" in i.line]
    return {
        "ops": len(ops),
        "fusions": sum(i.opcode == "fusion" for i in ops),
        "scatters": sum(i.opcode == "scatter" or "scatter" in _fused_opcodes(computations, i)
                        for i in ops),
        "whiles": len(whiles), "whiles_known_trip_count": len(known),
        "conditionals": sum(i.opcode == "conditional" for i in ops),
        "while_sources": sorted(names.get(i.name, "?") for i in whiles),
        "scatter_sources": sorted(names.get(i.name, "?") for i in ops if i.opcode == "scatter"
                                  or "scatter" in _fused_opcodes(computations, i)),
        "top": [{"name": n, "count": c} for n, c in groups.most_common(top)],
    }


def lowered_counts(text: str) -> dict[str, int]:
    """Operations of a lowered (not yet optimised) StableHLO program that matter on a GPU:
    loops and conditionals (each is a host round trip there unless XLA knows its trip
    count or branch), scatters, and the barriers that store values instead of loops."""
    counts = {name: len(re.findall(rf'(?<!#)stablehlo\.{op}(?=["( ])', text))
              for name, op in (("whiles", "while"), ("scatters", "scatter"),
                               ("barriers", "optimization_barrier"), ("gathers", "gather"),
                               ("dots", "dot_general"))}
    # `lax.platform_dependent` lowers to a `case` on a constant (the platform's index),
    # which XLA folds away: only a case on a value computed from data is a conditional.
    constant, cases = set(), 0
    for line in text.splitlines():
        value = re.match(r"\s*(%[\w#]+)(?::\d+)? = (.*)$", line)
        if value is None:
            continue
        name, rest = value.groups()
        if rest.startswith("stablehlo.constant"):
            constant.add(name)
        elif rest.startswith('"stablehlo.case"('):
            selector = re.match(r'"stablehlo\.case"\((%[\w#]+)\)', rest)
            if selector and selector.group(1).split("#")[0] in constant:
                constant.add(name)
            else:
                cases += 1
    return {**counts, "conditionals": cases}


def compiled_step(kind: str, platform: str | None = None) -> tuple[str, Any]:
    """The optimised HLO text of the device pipeline's training call for `kind` and the
    program's budget; with `platform` (e.g. "cuda"), the StableHLO lowered for that
    platform instead (no compiler for it needed: nothing is compiled)."""
    work = BUILD[KINDS[kind]](True)
    cfg = dataclasses.replace(work.cfg, pipeline="device", progress=False, quiet=True)
    prog, state = open_program(work.model_fn, work.splits, cfg, work.grid)
    pipe = prog.pipeline
    chunk = pipe.chunk_size()
    ids = np.resize(pipe.epoch_ids(0), (chunk, prog.budget.n_graph - 1))
    args = (state.params, state.opt_state, prog.hp, pipe.placed["train"], ids,
            np.ones(chunk, bool), jnp.asarray(~state.stopped))
    if platform is not None:
        return (pipe._train.trace(*args).lower(lowering_platforms=(platform,)).as_text(),
                prog.budget)
    return pipe._train.lower(*args).compile().as_text(), prog.budget


def _heading(kind: str, r: dict[str, Any]) -> str:
    lowered = r.get("lowered")
    return (f"**{kind}** ({r['budget']}): {r['ops']} operations per step, {r['fusions']} "
            f"fusions, {r['scatters']} scatters, {r['whiles']} loops "
            f"({r['whiles_known_trip_count']} with a known trip count), "
            f"{r['conditionals']} conditionals"
            + (f"; lowered for {lowered['platform']} (before optimisation): "
               f"{lowered['whiles']} loops, {lowered['conditionals']} conditionals, "
               f"{lowered['scatters']} scatters" if lowered else ""))


def table(results: dict[str, Any], rows: int) -> str:
    return op_report.table(results, "kinds", _heading,
                           ["operation (JAX name, source)", "per step"],
                           lambda t: [f"`{t['name']}`", str(t["count"])], rows)


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=None, help="write the counts here as JSON")
    p.add_argument("--lowered-for", default="cuda",
                   help="also count the program lowered for this platform (its loops, "
                        "conditionals, scatters); empty for none")


def _measure(args: argparse.Namespace, kind: str) -> dict[str, Any]:
    text, budget = compiled_step(kind)
    counts: dict[str, Any] = {"budget": str(budget), **count_step(text, args.top)}
    if args.lowered_for:
        lowered, _ = compiled_step(kind, args.lowered_for)
        counts["lowered"] = {"platform": args.lowered_for, **lowered_counts(lowered)}
    return counts


def main(argv=None) -> int:
    return op_report.main(argv, prog="python -m benchmarks.step_ops", doc=__doc__ or "",
                          what="models", choices=KINDS, default="swan,swan-learn",
                          key="kinds", add_arguments=_arguments,
                          start=lambda args, p: {"machine": machine()}, measure=_measure,
                          render=table)


if __name__ == "__main__":
    raise SystemExit(main())
