"""RESULTS.md's paper tables: one row per cell this code runs, ours beside the paper's,
from the best evidence for it (`choose`)."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reproduce.results import compare
from reproduce.results.blocks import (
    CELL_KEYS,
    TEXT,
    Evidence,
    cell_records,
    cell_rows,
    evidence,
    label_setting,
    short_device,
)
from reproduce.results.protocol import paper_cell_points
from reproduce.results.store import Run
from swan_jax.data.transfer import beta_matters

NAMES = {"swan": "SWAN", "swan-learn": "SWAN-learn", "adgn": "ADGN", "gcn": "GCN",
         "gin": "GIN", "sage": "GraphSAGE", "gat": "GAT", "gps": "GPS", "graphcon": "GraphCON",
         "swan-beta0": "SWAN (beta = 0)", "swan-ne": "SWAN-NE", "swan-learn-ne": "SWAN-learn-NE",
         "line": "Line", "ring": "Ring", "crossed-ring": "Crossed-Ring", "diameter": "Diameter",
         "sssp": "SSSP", "eccentricity": "Eccentricity", "peptides-func": "Peptides-func",
         "peptides-struct": "Peptides-struct", "pascalvoc-sp": "PascalVOC-sp",
         "tolokers": "Tolokers", "questions": "Questions", "ogbn-arxiv": "ogbn-arxiv"}
HEADER = ["Paper", "Ours", "Verdict", "Departures from the paper's protocol", "Converged",
          "Ran on", "Run"]


def name(key: Any) -> str:
    return NAMES.get(str(key), str(key))


@dataclasses.dataclass(frozen=True)
class Cell:
    """One cell of a paper table: its row labels, where our runs keep it, the paper's value."""
    labels: tuple[str, ...]
    experiment: str
    key: tuple
    metric: str
    paper: tuple[float, float | None] | None
    panel: str  # the figure's panel (a paper column) and the point's label in it
    point: str
    train_ms: tuple | None = None  # the paper's (training, inference) ms per epoch


@dataclasses.dataclass(frozen=True)
class PaperTable:
    """A table (or figure) of the paper as RESULTS.md shows it, from `paper[source]`."""
    name: str  # for the coverage table, e.g. "Table 1: graph property prediction"
    heading: str
    source: str  # its key in paper_values.json
    columns: tuple[str, ...]
    figure: str  # file name under reproductions/figures/
    ylabel: str
    intro: str
    notes: tuple[str, ...] = ()
    log: bool = False  # the figure's y axis on a log scale (MSE)
    cells: Sequence[Cell] = ()
    literature: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # other rows


def _validation_rank(summary: Mapping[str, Any]) -> float:
    val = summary.get("val_mean")
    if not compare.finite(val):
        return math.inf
    return -val if compare.higher_is_better(str(summary.get("metric", ""))) else val


def choose(cell: Cell, found: Sequence[tuple[Run, dict]], proto: Mapping[str, Any]
           ) -> tuple[Evidence | None, list[Evidence]]:
    """(the row's evidence, every candidate): full protocol first, then the best mean
    validation metric (the protocol's own selection rule), never the test metric."""
    candidates = []
    for run, summary in found:
        points = paper_cell_points(cell.experiment, summary)
        candidates.append(evidence(run, summary, proto, points, _row_note(cell, run, summary)))
    ranked = sorted(candidates, key=lambda e: (not e.full, _validation_rank(e.summary)))
    return (ranked[0] if ranked else None), candidates


# Until this time (the records' clock) the SWAN and ADGN blocks started their bias at 0
# and SWAN formed V', Z' from full matrices; both are the authors' since (a dated fact of
# the lab, not of the package). Paired reruns: reproductions/authors-init-formation/.
AUTHORS_FORM_SINCE = "2026-11-28 23:30"
PAIRED_RERUNS = "reproductions/authors-init-formation/REPORT.md"


def before_authors_form(run: Run, summary: Mapping[str, Any]) -> bool:
    """Whether a SWAN or ADGN cell's programs all ran before `AUTHORS_FORM_SINCE`."""
    model = str(summary.get("model") or summary.get("variant") or "")
    if not (model.startswith("swan") or model == "adgn"):
        return False
    dates = [str((rec.get("machine") or {}).get("date") or "")
             for rec in cell_records(run, summary)]
    return bool(dates) and all(date < AUTHORS_FORM_SINCE for date in dates)


def _row_note(cell: Cell, run: Run, summary: Mapping[str, Any]) -> str:
    """Said beside a row's departures: why a transfer cell searched one beta (Psi vanishes
    on a regular graph); that a SWAN or ADGN cell ran before the authors' init and form."""
    notes = []
    if before_authors_form(run, summary):
        what = "init" if summary.get("model") == "adgn" else "init and V', Z'"
        notes.append(f"[before the authors' {what}]({PAIRED_RERUNS})")
    if cell.experiment == "transfer" and "beta" in (summary.get("best_hparams") or {}):
        variant = run.config.get("data_variant") or "paper"
        if not beta_matters(summary["topology"], summary["distance"], variant=variant):
            notes.insert(0, "beta not searched: no effect on a regular graph")
    return "; ".join(notes)


def judge(cell: Cell, summary: Mapping[str, Any], constants: Mapping[str, float]
          ) -> tuple[str, str, float]:
    """(ours, verdict, the value drawn) for one cell."""
    metric, ref = cell.metric, cell.paper
    if cell.experiment == "transfer":
        ours = summary["test_mean"]
        verdict = compare.orders(ours, ref[0])[1] if ref else "–"
        return compare.mean_std(ours, summary.get("test_std"), metric), verdict, ours
    if cell.experiment == "graphprop":
        return _graphprop(cell, summary, constants.get(cell.key[0]))
    mean, std = (compare.scale(metric) * (summary.get(k) or 0.0) for k in ("test_mean", "test_std"))
    verdict = "–" if ref is None else compare.against_paper(mean, ref[0], ref[1], metric)[1]
    return compare.mean_std(mean, std, metric), verdict, mean


def _graphprop(cell: Cell, summary: Mapping[str, Any], constant: float | None
               ) -> tuple[str, str, float]:
    """The authors' batch-averaged score where the run recorded it, else the pooled one;
    a model no better than the constant predictor is compared with it only."""
    authors = summary.get("authors_test_mean")
    score = summary["test_mean"] if authors is None else authors
    std = summary.get("test_std" if authors is None else "authors_test_std")
    ours = compare.mean_std(score, std, "log10_mse") + (" (pooled)" if authors is None
                                                          else "")
    if compare.at_floor(summary["test_mean"], constant):
        return ours, compare.against_constant(summary["test_mean"], constant)[1], score
    if cell.paper is None:
        return ours, "–", score
    return ours, compare.against_paper(score, *cell.paper, "log10_mse")[1], score


def constants(runs: Sequence[Run], setting: str = "paper") -> dict[str, tuple[float, str]]:
    """Task -> (the constant predictor's test log10 MSE, its run), from the
    `constant_predictor` list of a GraphProp results.json."""
    out: dict[str, tuple[float, str]] = {}
    for run in runs:
        for entry in run.results.get("constant_predictor") or []:
            if isinstance(entry, Mapping) and label_setting(entry) == setting:
                out.setdefault(entry["task"], (float(entry["test"]), run.name))
    return out


def _paper_table(spec: Mapping[str, Any]) -> PaperTable:
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in spec.items()}
    return PaperTable(**fields)


# The paper's tables in RESULTS.md's order (`{...}` in a text: filled by `paper_tables`).
TABLES = tuple(_paper_table(t) for t in TEXT["table"])


def table_cells(source: str, paper: Mapping[str, Any], authors: Mapping[str, Any]
                ) -> list[Cell]:
    """The cells of the paper table drawn from `paper[source]`, in the paper's order, each
    with the paper's value (Figure 3: the value the authors plot)."""
    g, lr, spec = paper["graphprop"], paper["lrgb"], paper[source]
    setting = (g.get("reported_labels") or ["paper"])[0]

    def graphprop(task, model, labels):
        return Cell(labels, "graphprop", (task, setting, model), "log10_mse",
                    tuple(g["values"][model][task]), name(task), name(model))

    def lrgb(dataset, model, value, labels):
        return Cell(labels, "lrgb", (dataset, model), lr["metrics"][dataset], tuple(value),
                    name(dataset), name(model))

    if source == "transfer":
        def plotted(t, d, m):
            ref = authors["values"].get(t, {}).get(str(d), {}).get(m)
            return None if ref is None else (ref["mean"], ref.get("std"))

        return [Cell((name(t), str(d), name(m)), source, (t, d, m), "mse", plotted(t, d, m),
                     t, m) for t, d, m in itertools.product(*spec["expected"].values())]
    if source == "graphprop":
        models = [m for m in g["values"] if m in g["expected"]["model"]]  # the paper's order
        return [graphprop(t, m, (name(m), name(t))) for m in models for t in g["tasks"]]
    if source == "lrgb":
        return [lrgb(d, m, lr["values"][d][m], (name(m), name(d)))
                for m in lr["expected"]["variant"] for d in lr["expected"]["dataset"]]
    if source == "ablation":
        return [graphprop(t, m, (name(t), name(m))) for t in g["tasks"]
                for m in spec["graphprop_models"]] + [
            lrgb(d, m, spec["lrgb"][d][m], (name(d), name(m)))
            for d, variants in spec["lrgb"].items() for m in variants]
    values = spec["values"]  # node classification, with the paper's ms per epoch
    return [Cell((name(m), name(d)), source, (d, m), spec["metrics"][d],
                 tuple(values[d][m]["score"]), name(d), name(m),
                 (values[d][m]["train_ms"], values[d][m]["inference_ms"]))
            for m in spec["expected"]["model"] for d in spec["expected"]["dataset"]]


def _ms(pair: Sequence[Any]) -> str:
    return " / ".join("–" if v is None else f"{v:.1f}" for v in pair)


def paper_tables(paper: Mapping[str, Any], authors: Mapping[str, Any],
                 groups: Mapping[str, Sequence[Run]], runs_link: Callable[[str], str]
                 ) -> list[PaperTable]:
    """`TABLES` with their cells, the paper's rows out of scope and their texts filled."""
    constant = constants(groups.get("graphprop", []))
    floor = ", ".join(f"{name(t)} {v:.4f}" for t, (v, _) in constant.items())
    runs = ", ".join(dict.fromkeys(runs_link(r) for _, r in constant.values()))
    nc = paper["node_classification"]
    fill = {**authors["source"], "commit": authors["source"]["commit"][:7],
            "machine": nc["machine"], "protocol": nc["protocol"]["source"],
            "constant": floor and (f"Constant predictor (the best constant on the training "
                                   f"split; a model within 0.01 of it is compared with it "
                                   f"only): {floor} ({runs}).")}
    return [dataclasses.replace(
        table, cells=table_cells(table.source, paper, authors),
        literature=paper[table.source].get("literature") or {},
        intro=table.intro.format(**fill),
        notes=tuple(n.format(**fill) for n in table.notes if n.format(**fill)))
        for table in TABLES]


@dataclasses.dataclass
class Shown:
    """A paper table's rows: per cell its evidence (None: not run) and every candidate."""
    table: PaperTable
    rows: list[tuple[Cell, Evidence | None, list[Evidence]]]


def gather(tables: Sequence[PaperTable], paper: Mapping[str, Any],
           groups: Mapping[str, Sequence[Run]]) -> list[Shown]:
    found = {exp: cell_rows(groups.get(exp, []), key) for exp, key in CELL_KEYS.items()}
    return [Shown(t, [(cell, *choose(cell, found[cell.experiment].get(cell.key, []),
                                     paper[cell.experiment].get("protocol") or {}))
                      for cell in t.cells]) for t in tables]


def render_table(shown: Shown, constant: Mapping[str, tuple[float, str]],
                 runs_link: Callable[[str], str]) -> tuple[list[list[str]], list[tuple]]:
    """(markdown rows, figure points (panel, point, paper, ours))."""
    body, points = [], []
    values = {t: v for t, (v, _) in constant.items()}
    for cell, best, _ in shown.rows:
        ref = cell.paper
        theirs = "–" if ref is None else compare.mean_std(ref[0], ref[1], cell.metric)
        if cell.train_ms:
            theirs += f"; {_ms(cell.train_ms)} ms"
        if best is None:
            body.append([*cell.labels, theirs, "not run", "–", "", "", "", ""])
            points.append((cell.panel, cell.point, ref, None))
            continue
        ours, verdict, value = judge(cell, best.summary, values)
        if cell.train_ms:
            timed = [best.summary.get(f"{k}_ms_per_epoch") for k in ("train", "eval")]
            ours += f"; {_ms(timed)} ms"
        body.append([*cell.labels, theirs, ours, verdict, best.said,
                     best.converged, short_device(best.device),
                     runs_link(best.run.name)])
        std = best.summary.get("test_std") if cell.experiment != "graphprop" else None
        points.append((cell.panel, cell.point, ref,
                       (value, compare.scale(cell.metric) * (std or 0.0))))
    return body, points
