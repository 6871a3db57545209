"""The summary at the top of RESULTS.md: per paper table, its cells at the paper's full
protocol, at a reduced one, and not run (the paper's own cell count, every model it
shows, GPS included; only the label setting the paper reports)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reproduce.results import pending
from reproduce.results.blocks import (
    CELL_KEYS,
    cell_facts,
    cell_rows,
    device,
    table,
)
from reproduce.results.pending import runtime_protocol
from reproduce.results.protocol import paper_cell_points
from reproduce.results.store import JACOBIAN, RUNTIME, Run


def _status(rows: Sequence[tuple[Run, dict]], paper: Mapping[str, Any],
            experiment: str | None) -> str:
    """"full" when some row of the cell is at the paper's protocol, else "reduced"."""
    for run, cell in rows:
        points = paper_cell_points(experiment, cell) if experiment else None
        if cell_facts(run, cell, paper, points).full:
            return "full"
    return "reduced" if rows else "not run"


def _count(keys: Sequence[tuple], rows: Mapping[tuple, list], paper: Mapping[str, Any],
           experiment: str | None, missing: Callable[[tuple], bool] = lambda k: False
           ) -> dict[str, int]:
    out = {"full": 0, "reduced": 0, "not run": 0, "not implemented": 0}
    for key in keys:
        found = rows.get(key, [])
        status = "not implemented" if not found and missing(key) else _status(
            found, paper, experiment)
        out[status] += 1
    return out


def _line(name: str, counts: Mapping[str, int], runs: Sequence[Run]) -> list[str]:
    total = sum(counts.values())
    absent = counts["not run"] + counts["not implemented"]
    note = f" ({counts['not implemented']} not implemented)" if counts["not implemented"] else ""
    used = ", ".join(f"{r.name} ({device(r)})" for r in runs) or "–"
    return [name, str(total), str(counts["full"]), str(counts["reduced"]),
            f"{absent}{note}", used]


def _runtime_counts(paper: Mapping[str, Any], runs: Sequence[Run]) -> dict[str, int]:
    """The runtime table's models: full when some run timed whole epochs of it."""
    out = {"full": 0, "reduced": 0, "not run": 0, "not implemented": 0}
    for model in (paper.get("runtimes") or {}).get("values", {}):
        timed = [run for run in runs if pending.timed(run, model)]
        status = ("full" if any(runtime_protocol(r) == "full" for r in timed)
                  else "reduced" if timed else "not run")
        out[status] += 1
    return out


def _jacobian_counts(paper: Mapping[str, Any], runs: Sequence[Run]) -> dict[str, int]:
    """The figure's models: full when some run measured it at the full protocol."""
    out = {"full": 0, "reduced": 0, "not run": 0, "not implemented": 0}
    for model in (paper.get("jacobian") or {}).get("models", []):
        found = [run for run in runs if model in (run.results.get("models") or {})]
        status = ("full" if any(pending.jacobian_protocol(r) == "full" for r in found)
                  else "reduced" if found else "not run")
        out[status] += 1
    return out


def summary(paper: Mapping[str, Any], groups: Mapping[str, Sequence[Run]]) -> list[str]:
    """The coverage table: one line per paper table or figure."""
    transfer, graphprop = groups.get("transfer", []), groups.get("graphprop", [])
    lrgb, nodes = groups.get("lrgb", []), groups.get("node_classification", [])
    t, g, lr = paper["transfer"], paper["graphprop"], paper["lrgb"]
    t_keys = list(itertools.product(*t["expected"].values()))
    reported = g.get("reported_labels") or ["paper"]
    g_keys = [k for k in itertools.product(*g["expected"].values()) if k[1] in reported]
    ablation = paper.get("ablation") or {}
    a_graph = [(task, reported[0], m) for task in g["tasks"]
               for m in ablation.get("graphprop_models", [])]
    a_lrgb = [(d, m) for d in (ablation.get("lrgb") or {})
              for m in ablation["lrgb"][d]]
    lr_keys = list(itertools.product(*lr["expected"].values()))
    n_keys = list(itertools.product(*paper["node_classification"]["expected"].values()))
    g_rows = cell_rows(graphprop, CELL_KEYS["graphprop"])
    lr_rows = cell_rows(lrgb, CELL_KEYS["lrgb"])
    abl = _count(a_graph, g_rows, g, "graphprop")
    abl_lrgb = _count(a_lrgb, lr_rows, lr, None)
    lines = [
        _line("Figure 3: graph transfer", _count(
            t_keys, cell_rows(transfer, CELL_KEYS["transfer"]), t, "transfer",
            lambda k: k[2] in (t.get("not_implemented") or {})), transfer),
        _line("Table 1: graph property prediction", _count(g_keys, g_rows, g, "graphprop"),
              graphprop),
        _line("Table 2: LRGB", _count(lr_keys, lr_rows, lr, None), lrgb),
        _line("Table 3: SWAN variants (ablation)", {k: abl[k] + abl_lrgb[k] for k in abl},
              []),
        _line("Runtime table (tab:runtimes, RTX 3090)", _runtime_counts(
            paper, groups.get(RUNTIME, [])), groups.get(RUNTIME, [])),
        _line("Jacobian over layers (fig:jacobian_over_time)", _jacobian_counts(
            paper, groups.get(JACOBIAN, [])), groups.get(JACOBIAN, [])),
        _line("Scalability table (tab:additional_runtimes)", _count(
            n_keys, cell_rows(nodes, CELL_KEYS["node_classification"]),
            paper["node_classification"], None), nodes)]
    return table(["Paper table / figure", "Cells", "Full protocol", "Reduced protocol",
                  "Not run", "Collected runs (device)"], lines)
