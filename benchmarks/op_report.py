"""What `device_profile` and `step_ops` share: one main (workloads chosen with `--only`,
each measured in turn, the JSON rewritten after each) and one markdown table renderer.

Imports no JAX: `device_profile` sets `XLA_FLAGS` before JAX loads.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


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
