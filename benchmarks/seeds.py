"""Benchmark 3: 4 seeds as one vmapped training step against 1 seed.

Target on CPU: at most 2.5x the one-seed step (a Python loop over seeds costs 4x).
"""

from __future__ import annotations

from benchmarks.common import (
    lrgb_model,
    machine,
    peptide_batch,
    peptides_train,
    timeit,
    train_step_fn,
)


def run(quick: bool = False) -> dict:
    data, source = peptides_train(256)
    batch, _ = peptide_batch(data)
    record = {"benchmark": "seeds", "machine": machine(), "data": source, "target_ratio": 2.5}
    repeat = 3 if quick else 8
    for seeds in (1, 4):
        once, _ = train_step_fn(lrgb_model("swan"), batch, seeds)
        record[f"seeds_{seeds}_s"] = timeit(once, repeat)["median_s"]
    record["ratio"] = record["seeds_4_s"] / record["seeds_1_s"]
    return record


def summary(r: dict) -> str:
    return (f"seeds: 1 seed {r['seeds_1_s']:.3f} s/step, 4 seeds vmapped {r['seeds_4_s']:.3f} "
            f"s/step = {r['ratio']:.2f}x (target <= 2.5x; a loop is 4x)")


if __name__ == "__main__":
    print(summary(run()))
