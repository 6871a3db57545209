"""RESULTS.md's measurement tables: the runtime table (tab:runtimes, RTX 3090) and the
Jacobian figure (fig:jacobian_over_time), each run beside the paper's numbers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from reproduce.results.blocks import TEXT, device, relative, table
from reproduce.results.store import Run

NOT_RUN = "not run"
FULL_PEPTIDES = {"train": 10873, "val": 2331, "test": 2331}


def peptides_protocol(run: Run, short: Sequence[str] = (), after: Sequence[str] = ()) -> str:
    """"full", or "reduced: ..." with the Peptides-func graphs it left out: the runtime
    table's whole protocol (`benchmarks.runtime_table` never times stand-ins)."""
    sizes = run.results.get("graphs") or {}
    items = [*short, *(f"{sizes.get(k, 0)} of {n} {k} graphs" for k, n in FULL_PEPTIDES.items()
                       if sizes.get(k, 0) < n), *after]
    return "reduced: " + "; ".join(items) if items else "full"


def jacobian_protocol(run: Run) -> str:
    """Also reduced when a model trained fewer than LRGB's 300 epochs (a checkpoint: full)."""
    epochs = [(kind, (m.get("training") or {}).get("epochs"))
              for kind, m in _models(run).items() if "epochs" in (m.get("training") or {})]
    return peptides_protocol(run, [f"first {run.config['limit']} raw rows"] if run.config.get(
        "limit") else [], [f"{k.upper()} trained {e} of 300 epochs" for k, e in epochs
                           if (e or 0) < 300])


def _models(run: Run) -> dict[str, Any]:
    return run.results.get("models") or {}


def _found(model: str, runs: Sequence[Run]) -> list[tuple[Run, dict[str, Any]]]:
    return [(run, _models(run)[model]) for run in runs if _models(run).get(model)]


def _seconds(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, int | float) else "–"


def _with_note(protocol: str, run: Run) -> str:
    """The protocol, the run's note, and on a CPU the load it ran under (shared cores)."""
    note = run.results.get("note")
    load = run.results.get("load_average") or []
    if len(load) == 3 and str(run.machine.get("device", "")).startswith("cpu"):
        note = (f"{note}; " if note else "") + ("load average " + " / ".join(
            f"{v:.0f}" for v in load) + " (1 / 5 / 15 min) at the end")
    return f"{protocol}; {note}" if note else protocol


def _runtime_rows(paper_values: Mapping[str, Any], runs: Sequence[Run]) -> list[list[str]]:
    rows = []
    for model, theirs in paper_values.items():
        name, found = theirs.get("label") or model.upper(), _found(model, runs)
        rows += [] if found else [[name, NOT_RUN, theirs["train_s"], NOT_RUN,
                                   theirs["inference_s"], "–", "", ""]]
        for run, ours in found:
            ref = ((run.results.get("reference") or {}).get("models") or {}).get(model) or {}
            authors = (f"{_seconds(ref.get('train_s'))} / {_seconds(ref.get('inference_s'))}"
                       if ref else "–")
            rows.append([name, _seconds(ours.get("train_s")), theirs["train_s"],
                         _seconds(ours.get("inference_s")), theirs["inference_s"], authors,
                         _with_note(peptides_protocol(run), run),
                         f"{run.name} ({device(run)})"])
    return rows


def runtimes(paper: Mapping[str, Any], runs: Sequence[Run] = ()) -> list[str]:
    spec = paper.get("runtimes") or {}
    intro = TEXT["runtimes_intro"].format(reference=spec.get("reference", ""),
                                          machine=spec.get("machine", "?"))
    return ["## Runtimes per epoch (paper tab:runtimes)", "",
            intro + ("" if runs else " Not run here yet."), "",
            *table(["Model", "Ours: training s", "Paper: training s", "Ours: inference s",
                    "Paper: inference s", "Authors' PyTorch, same device", "Protocol",
                    "Run (device)"], _runtime_rows(spec.get("values") or {}, runs))]


JACOBIAN_KINDS = {"field": "field J(t) at x(l)", "layer_map": "layer map x(l-1) -> x(l)"}


def _jacobian_rows(spec: Mapping[str, Any], runs: Sequence[Run]) -> list[list[str]]:
    theirs = spec.get("mean_relative_change") or {}
    rows = []
    for model in spec.get("models", []):
        paper = f"{100 * theirs[model]:.3g}%" if model in theirs else "–"
        found = _found(model, runs)
        rows += [] if found else [[model.upper(), "–", NOT_RUN, paper, "", "", ""]]
        for run, ours in found:
            nodes = (run.results.get("graphs") or {}).get("measured_nodes") or []
            test = (ours.get("training") or {}).get("test_ap")
            where = (f"{len(nodes)} test graphs of {', '.join(map(str, nodes))} nodes"
                     + (f"; epsilon {run.config.get('epsilon', 1.0):g}" if model == "swan"
                        else "")
                     + (f"; test AP {100 * test:.1f}" if isinstance(test, float) else ""))
            protocol = _with_note(f"{jacobian_protocol(run)}; {where}", run)
            rows += [[model.upper(), label, f"{100 * ours[key]['mean']:.3g}%", paper,
                      ", ".join(f"{100 * v:.3g}" for v in ours[key]["per_layer"]), protocol,
                      f"{run.name} ({device(run)})"]
                     for key, label in JACOBIAN_KINDS.items() if key in ours]
    return rows


def jacobian(paper: Mapping[str, Any], runs: Sequence[Run] = (),
             out: Path | None = None) -> list[str]:
    spec = paper.get("jacobian") or {}
    lines = ["## Jacobian over layers (paper fig:jacobian_over_time)", "",
             TEXT["jacobian_intro"].format(reference=spec.get("reference", ""))
             + ("" if runs else " Not run here yet."), ""]
    lines += table(["Model", "Jacobian", "Ours: mean relative change", "Paper",
                    "Ours per layer, %", "Protocol", "Run (device)"],
                   _jacobian_rows(spec, runs))
    for run in runs:
        figure = run.folder / "jacobian.png"
        if figure.exists() and out is not None:
            lines += [f"![Relative change of the Jacobian over layers, {run.name}]"
                      f"({relative(figure, out)})", ""]
    return lines


def counts(paper: Mapping[str, Any], runtime: Sequence[Run], jacobian_runs: Sequence[Run]
           ) -> list[tuple[str, list[str], list[Run]]]:
    """(name, each model's "full" / "reduced" / "not run", runs) of the runtime table and
    the Jacobian figure."""
    tables: list[tuple[str, Any, Sequence[Run], Callable[[Run], str]]] = [
        ("Runtime table (tab:runtimes, RTX 3090)",
         (paper.get("runtimes") or {}).get("values", {}), runtime, peptides_protocol),
        ("Jacobian over layers (fig:jacobian_over_time)",
         (paper.get("jacobian") or {}).get("models", []), jacobian_runs, jacobian_protocol)]
    return [(name, ["full" if any(proto(r) == "full" for r, _ in _found(m, runs))
                    else "reduced" if _found(m, runs) else NOT_RUN for m in models], list(runs))
            for name, models, runs, proto in tables]
