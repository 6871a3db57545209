"""Run every benchmark, write `benchmarks/results/*.json`, one figure, and the table in
`BENCHMARKS.md` (between its `bench:begin` / `bench:end` markers; the text around them,
such as the current figures, is kept).

    python -m benchmarks.run_all            # all five (`make bench`)
    python -m benchmarks.run_all --quick    # fewer repeats and sizes, for a look
    python -m benchmarks.run_all --only solver,seeds
    python -m benchmarks.run_all --report-only   # figure and table from the saved JSON
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
import traceback

import numpy as np

from benchmarks.common import ROOT

NAMES = ("train_step", "solver", "seeds", "compiles", "scale")
RESULTS = ROOT / "benchmarks" / "results"
FIGURE = ROOT / "benchmarks" / "figures" / "benchmarks.png"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _train_step_rows(r: dict) -> list[str]:
    m, seg, gat = r["models"], r["paths"]["segment"], r["paths"]["gather"]
    rows = []
    for kind in ("swan", "swan-learn", "gcn"):
        cells = [f"{m[kind][p]['median_s']:.3f} s = {m[kind][p]['graphs_per_s']:.0f} graphs/s"
                 for p in ("segment", "gather")]
        rows.append(f"| 1 | step, {kind} ({m[kind]['params']:,} params) | {cells[0]} | "
                    f"{cells[1]} | | |")
    rates = r["matmul_rates_flops"]
    rows.append(
        f"| 1 | SWAN dense FLOPs on real nodes / matmul rate ({r['matmul_rate_flops'] / 1e9:.0f} "
        f"GFLOP/s, the higher of [N,d]x[d,d] {rates['square'] / 1e9:.0f} and [N,d]x[d,3d] "
        f"{rates['fused'] / 1e9:.0f}; floor {r['floor_s']:.3f} s) | "
        f"{_pct(seg['swan_efficiency'])} | {_pct(gat['swan_efficiency'])} (vs [N,d]x[d,d]: "
        f"{_pct(gat['swan_efficiency_by_rate']['square'])}) | >= 65% | "
        f"{_met(gat['swan_efficiency'] >= r['target_efficiency'])} |")
    rows.append(f"| 1 | SWAN-learn step / SWAN step | {seg['learn_over_swan']:.2f}x | "
                f"{gat['learn_over_swan']:.2f}x | <= 1.3x | "
                f"{_met(gat['learn_over_swan'] <= r['target_learn_over_swan'])} |")
    rows.append(f"| 1 | SWAN step / GCN step | {seg['swan_over_gcn']:.2f}x | "
                f"{gat['swan_over_gcn']:.2f}x | <= 1.5x | "
                f"{_met(gat['swan_over_gcn'] <= r['target_swan_over_gcn'])} |")
    rows.append(f"| 1 | padding: this batch / epoch mean / epoch worst ({r['epoch_batches']} "
                f"batches, budget {r['budget']['nodes']} nodes, slot width "
                f"{r['budget']['slot_width']}) | same batches | "
                f"{_pct(r['batch_padding_share'])} / {_pct(r['epoch_padding_share_mean'])} / "
                f"{_pct(r['epoch_padding_share_max'])} | real nodes >= 90% | "
                f"{_met(r['epoch_padding_share_mean'] <= 0.10)} |")
    pr = r.get("profile")
    if not pr:
        return rows
    cells = [f"{pr[p]['full_field_s']:.3f} / {pr[p]['dense_only_s']:.3f} / "
             f"{pr[p]['aggregation_only_s']:.3f} s" for p in ("segment", "gather")]
    rows.append(f"| 1 | profile: gradient of SWAN's 5 Euler steps (full field / dense part "
                f"alone / aggregations alone) | {cells[0]} | {cells[1]} | | |")
    return rows


def table(results: dict[str, dict]) -> str:
    """The Markdown table of every figure, segment-sum and gather paths side by side."""
    rows = ["| # | benchmark | segment-sum path | gather path | target | gather path |",
            "|---|---|---|---|---|---|"]
    if r := results.get("train_step"):
        rows += _train_step_rows(r)
    if r := results.get("solver"):
        p = r["paths"]
        rows.append(f"| 2 | diffrax Euler / hand loop, forward | "
                    f"{p['segment']['forward_s_ratio']:.2f}x | "
                    f"{p['gather']['forward_s_ratio']:.2f}x | | |")
        rows.append(f"| 2 | diffrax Euler / hand loop, gradient | "
                    f"{p['segment']['grad_s_ratio']:.2f}x | {p['gather']['grad_s_ratio']:.2f}x | "
                    f"<= 1.15x | {_met(p['gather']['grad_s_ratio'] <= 1.15)} |")
        rows.append(f"| 2 | same, gradient vmapped over 4 | "
                    f"{p['segment']['grad_vmap4_s_ratio']:.2f}x | "
                    f"{p['gather']['grad_vmap4_s_ratio']:.2f}x | | |")
    if r := results.get("seeds"):
        cells = [f"{q['ratio']:.2f}x ({q['seeds_4_s']:.3f} / {q['seeds_1_s']:.3f} s)"
                 for q in (r["paths"]["segment"], r["paths"]["gather"])]
        rows.append(f"| 3 | 4 seeds vmapped / 1 seed | {cells[0]} | {cells[1]} | <= 2.5x | "
                    f"{_met(r['paths']['gather']['ratio'] <= 2.5)} |")
    if r := results.get("compiles"):
        counts = " / ".join(str(e["compiles"]) for e in r["per_epoch"])
        rows.append(f"| 4 | compilations per epoch (epochs 1 / 2 / 3; training runs the gather "
                    f"path) | | {counts} | 0 after epoch 1 | "
                    f"{_met(r['second_epoch_compiles'] == 0)} |")
    if r := results.get("scale"):
        cells = []
        for path in ("segment", "gather"):
            times = ", ".join(f"{q['nodes']:.0e}: {q[path]['median_s']:.3g} s"
                              for q in r["points"])
            q = r["paths"][path]
            cells.append(f"slope {q['loglog_slope']:.2f} ({q['loglog_slope_from_1e4']:.2f} from "
                         f"1e4; {times})")
        slope = r["paths"]["gather"]["loglog_slope_from_1e4"]
        rows.append(f"| 5 | gradient step vs nodes | {cells[0]} | {cells[1]} | ~1 (linear) | "
                    f"{_met(abs(slope - 1) <= 0.15)} |")
    return "\n".join(rows)


def figure(results: dict[str, dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 5, figsize=(24, 4.2))
    paths = ("segment", "gather")

    def bars(ax, labels, values_by_path, ylabel, title):
        x = np.arange(len(labels))
        for i, path in enumerate(paths):
            ax.bar(x + 0.4 * i, values_by_path[path], width=0.4, label=path)
        ax.set_xticks(x + 0.2, labels)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend()

    if r := results.get("train_step"):
        kinds = ("swan", "swan-learn", "gcn")
        bars(axes[0], kinds, {p: [r["models"][k][p]["median_s"] for k in kinds] for p in paths},
             "seconds per training step", "1. Peptides step (batch 64, d 128, L 5)")
        axes[0].axhline(r["floor_s"], color="k", ls="--", lw=1)
    if r := results.get("solver"):
        keys = ("forward_s_ratio", "grad_s_ratio", "grad_vmap4_s_ratio")
        bars(axes[1], ["forward", "gradient", "grad x4 vmap"],
             {p: [r["paths"][p][k] for k in keys] for p in paths}, "diffrax / hand loop",
             "2. diffrax Euler vs hand loop")
    if r := results.get("seeds"):
        bars(axes[2], ["1 seed", "4 vmapped"],
             {p: [r["paths"][p]["seeds_1_s"], r["paths"][p]["seeds_4_s"]] for p in paths},
             "seconds per training step", "3. vmapped seeds")
    if r := results.get("compiles"):
        epochs = [str(i + 1) for i in range(len(r["per_epoch"]))]
        axes[3].bar(epochs, [e["compiles"] for e in r["per_epoch"]])
        axes[3].set_xlabel("epoch")
        axes[3].set_ylabel("XLA compilations")
        axes[3].set_title("4. compilations per epoch")
    if r := results.get("scale"):
        size = [q["nodes"] + q["edges"] for q in r["points"]]
        for path in paths:
            axes[4].loglog(size, [q[path]["median_s"] for q in r["points"]], "o-", label=path)
        axes[4].set_xlabel("|V| + |E|")
        axes[4].set_ylabel("seconds")
        axes[4].set_title("5. scale (gradient step)")
        axes[4].legend()
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=110)


def write_markdown(results: dict[str, dict]) -> None:
    path = ROOT / "BENCHMARKS.md"
    text = path.read_text() if path.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    any_result = next(iter(results.values()))
    m = any_result["machine"]
    dates = sorted(r["machine"]["date"] for r in results.values())
    when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    loads = sorted({tuple(r["machine"].get("load_average", [])) for r in results.values()})
    load = "; ".join("/".join(f"{x:.1f}" for x in la) for la in loads if la) or "unknown"
    block = (f"{BEGIN}\nLatest results ({when}) on {m['device_kind']} "
             f"({m['cpu_count']} CPU cores visible, {m['platform']}), jax {m['jax']}, flax "
             f"{m['flax']}, diffrax {m['diffrax']}; load average (1/5/15 min) at the start of "
             f"each benchmark: {load}. Data: {any_result.get('data', '-')}.\n\n"
             f"{table(results)}\n\n![benchmarks](benchmarks/figures/benchmarks.png)\n{END}")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    path.write_text(head + block + tail)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default=",".join(NAMES))
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing; redraw the figure and table from results/*.json")
    args = parser.parse_args(argv)
    names = [] if args.report_only else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; valid: {', '.join(NAMES)}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    failed = []
    for name in names:
        module = importlib.import_module(f"benchmarks.{name}")
        start = time.perf_counter()
        try:
            record = module.run(quick=args.quick)
        except Exception:  # one broken benchmark must not hide the others
            traceback.print_exc()
            failed.append(name)
            continue
        record["wall_s"] = time.perf_counter() - start
        (RESULTS / f"{name}.json").write_text(json.dumps(record, indent=2))
        print(f"[{record['wall_s']:.0f} s] {module.summary(record)}", flush=True)
    results = {n: json.loads((RESULTS / f"{n}.json").read_text())
               for n in NAMES if (RESULTS / f"{n}.json").exists()}
    # Results written before both paths were measured (no "paths") are left out.
    results = {n: r for n, r in results.items() if n == "compiles" or "paths" in r}
    if results:
        figure(results)
        write_markdown(results)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
