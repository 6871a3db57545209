"""RESULTS.md sections for what the paper has and the runs mostly do not yet: the ablation
(Table 3), the runtime table (RTX 3090), the Jacobian figure; the GraphProp differential
check against the authors' code and where the GraphProp plateau ends (each written by its
own session into `reproductions/graphprop-differential/section.md` and
`reproductions/graphprop-plateau/section.md`, included verbatim); and where the
reproduction campaign stands (`reproductions/campaign/`)."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reproduce.results import compare
from reproduce.results.blocks import (
    CELL_KEYS,
    NOT_RUN,
    cell_facts,
    cell_rows,
    device,
    table,
)
from reproduce.results.protocol import paper_cell_points
from reproduce.results.store import Run

DIFFERENTIAL = "graphprop-differential"
PLATEAU = "graphprop-plateau"
SECTION_FILE = "section.md"
CAMPAIGN = "campaign"


def ablation(graphprop: Sequence[Run], lrgb: Sequence[Run], paper: Mapping[str, Any]
             ) -> list[str]:
    """Table 3: SWAN-beta0, SWAN-NE, SWAN-learn-NE on GraphProp and Peptides."""
    spec = paper.get("ablation") or {}
    g, lr = paper["graphprop"], paper["lrgb"]
    g_rows, lr_rows = cell_rows(graphprop, CELL_KEYS["graphprop"]), cell_rows(
        lrgb, CELL_KEYS["lrgb"])
    body = []
    for task in g["tasks"]:
        for model in spec.get("graphprop_models", []):
            ref = g["values"].get(model, {}).get(task)
            body += _rows((task, "paper", model), g_rows, ref, "log10_mse", g, "graphprop")
    for dataset, variants in (spec.get("lrgb") or {}).items():
        for model, ref in variants.items():
            metric = lr["metrics"].get(dataset, "metric")
            body += _rows((dataset, model), lr_rows, ref, metric, lr, None)
    return [f"## SWAN variants (paper {spec.get('table', 'Table 3')}, ablation)", "",
            "Test metric of SWAN without its global term (beta = 0), non-expanding (NE) "
            "and learned non-expanding variants; the GraphProp rows use the label setting "
            "`paper`; the Peptides rows need the LRGB experiment to run these variants "
            "(not yet: `reproductions/campaign/plan.toml`, status needs code).", "",
            *table(["Data set / task", "Variant", "Ours: test", "Paper", "Verdict",
                    "Protocol", "Run (device)"], body)]


def _rows(key: tuple, rows: Mapping[tuple, list], ref: Any, metric: str,
          paper: Mapping[str, Any], experiment: str | None) -> list[list[Any]]:
    theirs = "–" if ref is None else compare.mean_std(*ref, metric)
    found = rows.get(key, [])
    if not found:
        return [[key[0], key[-1], NOT_RUN, theirs, "–", "", ""]]
    out = []
    for run, cell in found:
        scale = compare.scale(metric)
        mean = scale * cell["test_mean"]
        verdict = "–" if ref is None else compare.against_paper(mean, *ref, metric)[1]
        points = paper_cell_points(experiment, cell) if experiment else None
        facts = cell_facts(run, cell, paper, points)
        out.append([key[0], key[-1], compare.mean_std(mean, scale * (cell.get("test_std")
                                                                      or 0), metric),
                    theirs, verdict, facts.protocol, f"{run.name} ({facts.device})"])
    return out


FULL_PEPTIDES = {"train": 10873, "val": 2331, "test": 2331}


def runtime_protocol(run: Run) -> str:
    """"full" when the run timed whole Peptides-func epochs, else "reduced: ..."."""
    sizes = run.results.get("graphs") or {}
    short = [f"{sizes.get(k, 0)} of {n} {k} graphs" for k, n in FULL_PEPTIDES.items()
             if sizes.get(k, 0) < n]
    return "reduced: " + "; ".join(short) if short else "full"


def _seconds(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, int | float) else "–"


def _runtime_rows(paper_values: Mapping[str, Any], runs: Sequence[Run]) -> list[list[str]]:
    rows = []
    for model, theirs in paper_values.items():
        found = [(run, (run.results.get("models") or {}).get(model)) for run in runs]
        found = [(run, ours) for run, ours in found if ours]
        if not found:
            rows.append([model.upper(), NOT_RUN, theirs["train_s"], NOT_RUN,
                         theirs["inference_s"], "–", "", ""])
        for run, ours in found:
            ref = ((run.results.get("reference") or {}).get("models") or {}).get(model) or {}
            authors = (f"{_seconds(ref.get('train_s'))} / {_seconds(ref.get('inference_s'))}"
                       if ref else "–")
            rows.append([model.upper(), _seconds(ours.get("train_s")), theirs["train_s"],
                         _seconds(ours.get("inference_s")), theirs["inference_s"], authors,
                         runtime_protocol(run), f"{run.name} ({device(run)})"])
    return rows


def runtimes(paper: Mapping[str, Any], runs: Sequence[Run] = ()) -> list[str]:
    """The runtime table: the paper's RTX 3090 seconds per epoch beside each collected
    `runtime` run's (and the authors' PyTorch measured by the same run, where it was)."""
    spec = paper.get("runtimes") or {}
    intro = (f"{spec.get('reference', '')}; measured on {spec.get('machine', '?')}. Ours: "
             "`python -m reproduce.runtime` on the device named in each row, one `train` "
             "call per model on the device pipeline; training is the median training part "
             "of the epochs after the first (which compiles), inference the median "
             "evaluation of the validation and test splits (4,662 graphs; the paper does "
             "not say which graphs its inference column counts). Authors' PyTorch: their "
             "public SWAN and SWAN-learn timed by the same run on the same device and data "
             "(`benchmarks/reference_pytorch.py`), training / inference seconds.")
    if not runs:
        intro += " Not run here yet."
    return ["## Runtimes per epoch (paper tab:runtimes)", "", intro, "",
            *table(["Model", "Ours: training s", "Paper: training s", "Ours: inference s",
                    "Paper: inference s", "Authors' PyTorch, same device", "Protocol",
                    "Run (device)"], _runtime_rows(spec.get("values") or {}, runs))]


def jacobian(paper: Mapping[str, Any]) -> list[str]:
    spec = paper.get("jacobian") or {}
    return ["## Jacobian over layers (paper fig:jacobian_over_time)", "",
            f"{spec.get('reference', '')}. Not run here yet (campaign cell "
            "`jacobian/peptides-func`, needs a runner over `swan_jax.analysis` for trained "
            "models): " + ", ".join(m.upper() for m in spec.get("models", [])) + ".", ""]


def plateau(root: Path) -> list[str]:
    """Where the GraphProp plateau ends (issue 37): its own section, verbatim, when the
    measurement's folder has one."""
    path = root / PLATEAU / SECTION_FILE
    return [path.read_text().rstrip(), ""] if path.exists() else []


def differential(root: Path) -> list[str]:
    """The GraphProp differential check's own section, verbatim, when it exists."""
    path = root / DIFFERENTIAL / SECTION_FILE
    if path.exists():
        return [path.read_text().rstrip(), ""]
    return ["## GraphProp: differential check against the authors' code", "",
            f"Not reported yet: the check trains the authors' public PyTorch SWAN and ours "
            f"on the same generated data and writes `reproductions/{DIFFERENTIAL}/"
            f"{SECTION_FILE}` (shown here verbatim) with its files.", ""]


def campaign(root: Path) -> list[str]:
    """Where the reproduction campaign stands: cells under way, bundles, measured pace."""
    folder = root / CAMPAIGN
    plan_file = folder / "plan.toml"
    if not plan_file.exists():
        return []
    cells = tomllib.loads(plan_file.read_text()).get("cell") or []
    state_file = folder / "state.json"
    state = json.loads(state_file.read_text()).get("cells", {}) if state_file.exists() else {}
    bundles = sorted(p.stem for p in (folder / "bundles").glob("*.npz"))
    runnable = sum(c.get("status") == "runnable" for c in cells)
    body = [[cid, info.get("status", "?"), info.get("programs", "?"),
             f"{100 * float(info.get('fraction', 0)):.0f}%",
             ", ".join(f"{k} {v:.3g} s" for k, v in (info.get("seconds_per_epoch")
                                                       or {}).items()) or "–",
             "yes" if cid.replace("/", "__") in bundles else "no", info.get("updated", "")]
            for cid, info in sorted(state.items())]
    lines = ["## Reproduction campaign", "",
             f"`python -m reproduce.campaign` (`make campaign`) trains the "
             f"{len(cells)} cells of `reproductions/campaign/plan.toml` ({runnable} runnable "
             f"now) at the paper's protocol, in budgeted calls on any machine; finished cells "
             f"are collected as `campaign-<group>` runs above, unfinished ones continue from "
             f"their bundle in `reproductions/campaign/bundles/`.", ""]
    if body:
        lines += table(["Cell", "Status", "Programs done", "Done", "Seconds per epoch",
                        "Bundle", "Updated"], body)
    return lines
