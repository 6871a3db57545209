"""Benchmark 4: compilations during the second epoch of an LRGB run (target: zero).

Trains SWAN on a slice of Peptides-func through `swan_jax.train.train` (the experiments'
loop, on prepared batches: the gather path) for three epochs and counts traces and XLA
compilations per epoch.
"""

from __future__ import annotations

from benchmarks.common import BATCH, lrgb_model, machine, peptides_train
from swan_jax.compiles import CompileCounter
from swan_jax.train import TrainConfig, train


def run(quick: bool = False) -> dict:
    data, source = peptides_train(BATCH * 6)
    third = len(data) // 3
    splits = {"train": data.subset(range(third * 2)),
              "val": data.subset(range(third * 2, len(data)))}
    per_epoch: list[dict[str, int]] = []
    with CompileCounter() as counter:
        last = counter.snapshot()

        def on_epoch_end(epoch: int, record: dict) -> None:
            nonlocal last
            now = counter.snapshot()
            per_epoch.append({k: now[k] - last[k] for k in now} | {"seconds": record["seconds"]})
            last = now

        cfg = TrainConfig(epochs=3, batch_size=BATCH, optimizer="adamw", loss="bce",
                          metric="ap", task_level="graph", progress=False,
                          on_epoch_end=on_epoch_end)
        train(lambda hp: lrgb_model("swan"), splits, cfg)
    return {"benchmark": "compiles", "machine": machine(), "data": source,
            "train_graphs": len(splits["train"]), "per_epoch": per_epoch,
            "second_epoch_compiles": per_epoch[1]["compiles"], "target": 0}


def summary(r: dict) -> str:
    counts = ", ".join(f"epoch {i + 1}: {e['compiles']} compiles / {e['traces']} traces"
                       for i, e in enumerate(r["per_epoch"]))
    return f"compilations per epoch of an LRGB run ({counts}); target 0 after the first"


if __name__ == "__main__":
    print(summary(run()))
