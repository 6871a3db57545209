"""Run every benchmark, write `benchmarks/results/*.json`, one figure, and the table in
`BENCHMARKS.md` (between its `bench:begin` / `bench:end` markers; the text around them,
such as the profile notes, is kept).

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

from benchmarks.common import ROOT

NAMES = ("train_step", "solver", "seeds", "compiles", "scale")
RESULTS = ROOT / "benchmarks" / "results"
FIGURE = ROOT / "benchmarks" / "figures" / "benchmarks.png"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def table(results: dict[str, dict]) -> str:
    """The Markdown table of every figure against its target."""
    rows = ["| # | benchmark | measured | target | |", "|---|---|---|---|---|"]
    r = results.get("train_step")
    if r:
        m = r["models"]
        for kind in ("swan", "swan-learn", "gcn"):
            rows.append(f"| 1 | step, {kind} ({m[kind]['params']:,} params) | "
                        f"{m[kind]['median_s']:.3f} s = {m[kind]['graphs_per_s']:.0f} graphs/s"
                        " | | |")
        rows.append(f"| 1 | SWAN step / GCN step | {r['swan_over_gcn']:.2f}x | <= 1.15x | "
                    f"{_met(r['swan_over_gcn'] <= 1.15)} |")
        rows.append(f"| 1 | SWAN dense FLOP rate / matmul rate | "
                    f"{r['swan_flop_rate'] / 1e9:.1f} / {r['matmul_rate_flops'] / 1e9:.1f} "
                    f"GFLOP/s = {100 * r['swan_efficiency']:.0f}% (floor {r['floor_s']:.3f} s) "
                    f"| >= 70% | {_met(r['swan_efficiency'] >= 0.7)} |")
        pr = r["profile"]
        rows.append(f"| 1 | profile: gradient of SWAN's 5 Euler steps (full field / dense part "
                    f"alone / aggregations alone) | {pr['full_field_s']:.3f} / "
                    f"{pr['dense_only_s']:.3f} / {pr['aggregation_only_s']:.3f} s | | |")
    r = results.get("solver")
    if r:
        t = r["timings"]
        rows.append(f"| 2 | diffrax Euler / hand loop, forward | {r['forward_s_ratio']:.2f}x "
                    f"({t['diffrax']['forward_s']:.3f} / {t['loop']['forward_s']:.3f} s) | | |")
        rows.append(f"| 2 | diffrax Euler / hand loop, gradient | {r['grad_s_ratio']:.2f}x "
                    f"({t['diffrax']['grad_s']:.3f} / {t['loop']['grad_s']:.3f} s) | <= 1.15x | "
                    f"{_met(r['grad_s_ratio'] <= 1.15)} |")
        rows.append(f"| 2 | same, gradient vmapped over 4 | {r['grad_vmap4_s_ratio']:.2f}x | | |")
    r = results.get("seeds")
    if r:
        rows.append(f"| 3 | 4 seeds vmapped / 1 seed | {r['ratio']:.2f}x ({r['seeds_4_s']:.3f} / "
                    f"{r['seeds_1_s']:.3f} s) | <= 2.5x | {_met(r['ratio'] <= 2.5)} |")
    r = results.get("compiles")
    if r:
        counts = " / ".join(str(e["compiles"]) for e in r["per_epoch"])
        rows.append(f"| 4 | compilations per epoch (epochs 1 / 2 / 3) | {counts} | 0 after "
                    f"epoch 1 | {_met(r['second_epoch_compiles'] == 0)} |")
    r = results.get("scale")
    if r:
        times = ", ".join(f"{p['nodes']:.0e}: {p['median_s']:.3g} s" for p in r["points"])
        rows.append(f"| 5 | gradient step vs nodes ({times}) | log-log slope "
                    f"{r['loglog_slope']:.2f} ({r['loglog_slope_from_1e4']:.2f} from 1e4) | ~1 "
                    f"(linear) | {_met(abs(r['loglog_slope_from_1e4'] - 1) <= 0.15)} |")
    return "\n".join(rows)


def figure(results: dict[str, dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 5, figsize=(22, 4))
    if r := results.get("train_step"):
        kinds = ("swan", "swan-learn", "gcn")
        axes[0].bar(kinds, [r["models"][k]["median_s"] for k in kinds], color="C0")
        axes[0].axhline(r["floor_s"], color="k", ls="--", label="SWAN dense-FLOP floor")
        axes[0].set_ylabel("seconds per training step")
        axes[0].set_title("1. Peptides step (batch 64, d 128, L 5)")
        axes[0].legend()
    if r := results.get("solver"):
        keys = ("forward_s", "grad_s", "grad_vmap4_s")
        for i, name in enumerate(("diffrax", "loop")):
            axes[1].bar([j + 0.4 * i for j in range(3)], [r["timings"][name][k] for k in keys],
                        width=0.4, label=name)
        axes[1].set_xticks([j + 0.2 for j in range(3)], ["forward", "gradient", "grad x4 vmap"])
        axes[1].set_ylabel("seconds")
        axes[1].set_title("2. diffrax Euler vs hand loop")
        axes[1].legend()
    if r := results.get("seeds"):
        axes[2].bar(["1 seed", "4 vmapped", "4 x 1 seed"],
                    [r["seeds_1_s"], r["seeds_4_s"], 4 * r["seeds_1_s"]], color=["C0", "C1", "C7"])
        axes[2].set_ylabel("seconds per training step")
        axes[2].set_title("3. vmapped seeds")
    if r := results.get("compiles"):
        epochs = [str(i + 1) for i in range(len(r["per_epoch"]))]
        axes[3].bar(epochs, [e["compiles"] for e in r["per_epoch"]])
        axes[3].set_xlabel("epoch")
        axes[3].set_ylabel("XLA compilations")
        axes[3].set_title("4. compilations per epoch")
    if r := results.get("scale"):
        size = [p["nodes"] + p["edges"] for p in r["points"]]
        sec = [p["median_s"] for p in r["points"]]
        axes[4].loglog(size, sec, "o-", label="SWAN gradient step")
        axes[4].loglog(size, [sec[-1] * s / size[-1] for s in size], "k--", label="linear")
        axes[4].set_xlabel("|V| + |E|")
        axes[4].set_ylabel("seconds")
        axes[4].set_title("5. scale")
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
    block = (f"{BEGIN}\nLatest results ({when}) on {m['device_kind']} "
             f"({m['cpu_count']} CPU cores visible, {m['platform']}), jax {m['jax']}, flax "
             f"{m['flax']}, diffrax {m['diffrax']}. Data: {any_result.get('data', '-')}.\n\n"
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
    if results:
        figure(results)
        write_markdown(results)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
