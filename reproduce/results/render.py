"""`render`: RESULTS.md, reproductions/RUNS.md and their figures from committed files only:
`reproductions/` and the authors' transfer values (`experiments/references/`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reproduce.results import figures, measurements
from reproduce.results import runs as runs_md
from reproduce.results.blocks import TEXT, anchor, device, relative, short_device, table
from reproduce.results.sections import HEADER as COLUMNS
from reproduce.results.sections import Shown, gather, paper_tables, render_table
from reproduce.results.sections import constants as constant_scores
from reproduce.results.store import FIGURES, JACOBIAN, RUNTIME, Run, load_paper, load_runs
from swan_jax.experiments.transfer import authors_figure3
from swan_jax.runs.io import write_text_atomic

RUNS_FILE = "RUNS.md"


def coverage(shown: Sequence[Shown], paper: Mapping[str, Any],
             groups: Mapping[str, Sequence[Run]]) -> list[str]:
    """Per paper table: its cells, those in scope and how they stand, its other rows."""
    entries = [(s.table.name, ["not run" if b is None else "full" if b.full
                               else "reduced" for _, b, _ in s.rows],
                s.table.literature or {}, [b.run for _, b, _ in s.rows if b]) for s in shown]
    entries += [(name, status, {}, runs) for name, status, runs in measurements.counts(
        paper, groups.get(RUNTIME, []), groups.get(JACOBIAN, []))]
    body = [[name, len(status) + int(lit.get("cells", 0)), len(status), status.count("full"),
             status.count("reduced"), status.count("not run"), lit.get("rows") or "–",
             ", ".join(dict.fromkeys(f"{r.name} ({short_device(device(r))})"
                                     for r in runs)) or "–"]
            for name, status, lit, runs in entries]
    return ["## Coverage", "",
            "In scope: the cells of the models the authors' code runs and of SWAN's variants. "
            "The paper's other rows are listed, not run here.", "",
            *table(["Paper table / figure", "Paper cells", "In scope", "Full protocol",
                    "Reduced protocol", "Not run", "Rows out of scope",
                    "Runs behind the rows (device)"], body)]


def _figure(s: Shown, points: list, root: Path) -> bool:
    path = root / FIGURES / s.table.figure
    if s.table.figure == "transfer.png":
        distances: dict[tuple[str, str], list[int]] = {}
        for cell, _, _ in s.rows:
            distances.setdefault((cell.panel, cell.point), []).append(int(cell.key[1]))
        return figures.transfer_figure(points, distances, path)
    return figures.paired_figure(points, path, f"{s.table.heading}: ours vs the paper's "
                                 f"(the rows of RESULTS.md)", s.table.ylabel, s.table.log)


def document(root: Path, out: Path) -> tuple[str, str, list[str]]:
    """(RESULTS.md, RUNS.md, warnings); the figures are drawn."""
    paper = load_paper(root)
    runs, empty = load_runs(root)
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.experiment, []).append(run)
    runs_file = root / RUNS_FILE
    link = relative(runs_file, out)

    def runs_link(name: str) -> str:
        return f"[{name}]({link}#{anchor(name)})"

    shown = gather(paper_tables(paper, authors_figure3(), groups, runs_link), paper, groups)
    constant = constant_scores(groups.get("graphprop", []))
    parts = [TEXT["results_header"], f"The paper's numbers: {paper['paper']}; obtained on "
             f"{paper['devices']}.", "", *coverage(shown, paper, groups)]
    parts += [f"- Incomplete: {line}" for line in empty] + ([""] if empty else [])
    for s in shown:
        body, points = render_table(s, constant, runs_link)
        drawn = _figure(s, points, root)
        lit = (s.table.literature or {}).get("rows")
        parts += [f"## {s.table.heading}", "", s.table.intro, "",
                  *table([*s.table.columns, *COLUMNS], body)]
        parts += ([f"![{s.table.heading}]({relative(root / FIGURES / s.table.figure, out)})",
                   ""] if drawn else [])
        notes = [*s.table.notes, *([f"Rows out of scope, not run here: {lit}."] if lit else [])]
        parts += [*(f"- {n}" for n in notes), ""] if notes else []
    parts += measurements.runtimes(paper, groups.get(RUNTIME, []))
    parts += measurements.jacobian(paper, groups.get(JACOBIAN, []), out)
    parts += ["## Speed", "", "Step times, compilation counts and scaling are in "
              "[BENCHMARKS.md](BENCHMARKS.md) (`make bench`), each figure with its machine.", ""]
    warnings = list(empty) + [f"{run.folder}: {p}" for run in runs for p in run.problems]
    results = "\n".join(parts).rstrip() + "\n"
    return results, runs_md.document(shown, runs, paper, root), warnings


def render(root: str | Path = "reproductions", out: str | Path = "RESULTS.md") -> list[str]:
    """Write `out`, `root/RUNS.md` and the figures; the lines to print (what, warnings)."""
    root, out = Path(root), Path(out)
    for stale in (root / FIGURES).glob("*.png"):  # every figure is drawn again or not kept
        stale.unlink()
    results, runs_text, warnings = document(root, out)
    write_text_atomic(out, results)
    write_text_atomic(root / RUNS_FILE, runs_text)
    drawn = sorted(str(p) for p in (root / FIGURES).glob("*.png"))
    return [f"wrote {out}, {root / RUNS_FILE}" + (f" and {', '.join(drawn)}" if drawn
                                                   else "")] + [f"warning: {w}"
                                                                for w in warnings]
