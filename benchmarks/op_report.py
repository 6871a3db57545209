"""What `device_profile` and `step_ops` share: one main (workloads chosen with `--only`,
each measured in turn, the JSON rewritten after each), one markdown table renderer, and
the reading of XLA's optimised HLO text (computations, instructions, and each
instruction's name from the JAX code it came from).

Imports no JAX: `device_profile` sets `XLA_FLAGS` before JAX loads.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

# `%name (params...) -> type {`: a computation's first line (group 1: `ENTRY ` on the entry)
HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+) \(.*\{\s*$")
# `[ROOT ]%name = shape opcode(operands), attributes`: an instruction
INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+) = (.*)$")
_FIELD = re.compile(r'(\w+)=(?:"([^"]*)"|(\S+))')
_FIELD_PAIRS = re.compile(r"(\w+)=(\w+)")


def table(results: Mapping[str, Any], key: str, heading: Callable[[str, dict], str],
          columns: Sequence[str], row: Callable[[dict], Sequence[str]], rows: int) -> str:
    """Markdown: per item of `results[key]`, its heading and its `rows` first `top` rows."""
    lines: list[str] = []
    for name, item in results[key].items():
        lines += [heading(name, item), "", "| " + " | ".join(columns) + " |",
                  "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(row(t)) + " |" for t in item["top"][:rows]]
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None, *, prog: str, doc: str, what: str,
         choices: Iterable[str], default: str, key: str,
         add_arguments: Callable[[argparse.ArgumentParser], None],
         start: Callable[[argparse.Namespace, argparse.ArgumentParser], dict[str, Any]],
         measure: Callable[[argparse.Namespace, str], dict[str, Any]],
         render: Callable[[dict[str, Any], int], str]) -> int:
    """Parse `--only` (a comma-separated choice of `choices`), `--top` and the command's
    own flags; `start` gives the results' header (and checks the flags), `measure` one
    item, stored under `results[key]` and written to `--out` (when given) after each."""
    choices = list(choices)
    p = argparse.ArgumentParser(prog=prog, description=doc.strip().split("\n")[0])
    p.add_argument("--only", default=default,
                   help=f"comma-separated {what} of {', '.join(choices)}")
    p.add_argument("--top", type=int, default=25, help="operation groups kept per item")
    add_arguments(p)
    args = p.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - set(choices))
    if unknown:
        p.error(f"unknown {what} {', '.join(unknown)}; choose from {', '.join(choices)}")
    results = {**start(args, p), key: {}}
    for name in names:
        print(f"{prog.rsplit('.', 1)[-1].replace('_', ' ')}: {name} ...", flush=True)
        results[key][name] = measure(args, name)
        out: Path | None = args.out
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(results, indent=2))
    print(render(results, args.top))
    return 0


# ----------------------------------------------------------------- optimised HLO text

def _tables(lines: list[str]) -> dict[str, dict[int, str]]:
    """The optimised HLO's source tables (`FileNames`, `FunctionNames`, `FileLocations`,
    `StackFrames`): `{table: {id: entry}}`."""
    tables: dict[str, dict[int, str]] = {}
    current = None
    for line in lines:
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = tables.setdefault(line, {})
        elif current is not None and (row := re.match(r"^(\d+) (.*)$", line)):
            current[int(row.group(1))] = row.group(2).strip('"')
        else:
            current = None
    return tables


def _source(tables: dict[str, dict[int, str]], frame_id: str | None) -> str:
    """`file:line function` of a stack frame (the innermost, where the op was written)."""
    frame = tables.get("StackFrames", {}).get(int(frame_id or 0))
    if frame is None:
        return "?"
    frame_fields = dict(_FIELD_PAIRS.findall(frame))
    location = dict(_FIELD_PAIRS.findall(tables.get("FileLocations", {}).get(
        int(frame_fields.get("file_location_id", 0)), "")))
    file = Path(tables.get("FileNames", {}).get(int(location.get("file_name_id", 0)), "?")).name
    function = tables.get("FunctionNames", {}).get(int(location.get("function_name_id", 0)), "")
    return f"{file}:{location.get('line', '?')} {function}".strip()


def instruction_names(lines: list[str]) -> tuple[dict, dict, dict]:
    """Of one optimised HLO module's lines: per instruction its name `"primitive,
    forward|backward, file:line function"` (where it has metadata) and the computation it
    calls; per computation the name of its last instruction with metadata."""
    tables = _tables(lines)
    own, calls, computations, computation = {}, {}, {}, None
    for line in lines:
        header = HEADER.match(line)
        if header:
            computation = header.group(2)
            continue
        instruction = INSTRUCTION.match(line)
        if instruction is None:
            continue
        root = re.match(r"^\s*ROOT %?[\w.\-]+ = (\w+\[[\d,]*\])\S* (\w+)\(", line)
        if root and computation is not None:  # no metadata kept (a CPU matmul fusion)
            computations.setdefault(computation,
                                    f"{root.group(2)} {root.group(1)}, source not kept")
        called = re.search(r"calls=%?([\w.\-]+)", line)
        if called:
            calls[instruction.group(1)] = called.group(1)
        metadata = re.search(r"metadata=\{([^}]*)\}", line)
        fields = {k: a or b for k, a, b in _FIELD.findall(metadata.group(1))} if metadata else {}
        if "op_name" in fields:
            op_name = fields["op_name"]
            direction = "backward" if "transpose(" in op_name else "forward"
            own[instruction.group(1)] = name = (
                f"{op_name.rsplit('/', 1)[-1]}, {direction}, "
                f"{_source(tables, fields.get('stack_frame_id'))}")
            if computation is not None:
                computations[computation] = name  # the last one with metadata
    return own, calls, computations
