"""Benchmark 3: 4 seeds as one vmapped training step against 1 seed, on both paths.

Target on CPU: at most 2.5x the one-seed step (a Python loop over seeds costs 4x).
"""

from __future__ import annotations

from benchmarks.common import (
    PATHS,
    interleaved,
    lrgb_model,
    machine,
    on_path,
    peptide_batch,
    peptides_train,
    train_step_fn,
)


def run(quick: bool = False) -> dict:
    data, source = peptides_train(256)
    batch, _ = peptide_batch(data)
    record = {"benchmark": "seeds", "machine": machine(), "data": source, "target_ratio": 2.5,
              "paths": {}}
    fns = {}
    for path in PATHS:
        for seeds in (1, 4):
            once, _ = train_step_fn(lrgb_model("swan"), on_path(batch, path), seeds)
            fns[f"{path}/{seeds}"] = once
    timings = interleaved(fns, 3 if quick else 7)
    for path in PATHS:
        one, four = timings[f"{path}/1"]["median_s"], timings[f"{path}/4"]["median_s"]
        record["paths"][path] = {"seeds_1_s": one, "seeds_4_s": four, "ratio": four / one}
    return record


def summary(r: dict) -> str:
    parts = [f"{path}: 1 seed {p['seeds_1_s']:.3f} s/step, 4 vmapped {p['seeds_4_s']:.3f} s/step"
             f" = {p['ratio']:.2f}x" for path, p in r["paths"].items()]
    return "seeds (target <= 2.5x; a loop is 4x): " + "; ".join(parts)


if __name__ == "__main__":
    print(summary(run()))
