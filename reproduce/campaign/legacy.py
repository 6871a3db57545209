"""A reader for the campaign's former resume bundles (`reproductions/campaign/bundles/`).

The former campaign carried an unfinished cell as `<slug>.npz` (and `<slug>.partN.npz`):
a JSON meta (`__meta__`: the sweep's finished records; per program under way its
folder, `run.json`, `history.jsonl`, its checkpoint's epoch, metadata and pytree
skeleton) and the newest checkpoint's arrays (`p<i>/<leaf>`; an array larger than a part
cut into `<key>#<i>`). `restore` writes such a bundle back as a run folder, which the
experiment's `--resume` continues; the campaign does so for a cell that has neither a
run folder nor carried parts (`python -m reproduce.campaign convert` for all at once).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from swan_jax.runs.checkpoint import CheckpointStore
from swan_jax.runs.io import write_text_atomic

META = "__meta__"


def files(reproductions: Path, slug: str) -> list[Path]:
    """The former bundle of `slug` and its parts, in order."""
    return _parts(reproductions / "campaign" / "bundles" / f"{slug}.npz")


def remove(reproductions: Path, slug: str) -> None:
    for path in files(reproductions, slug):
        path.unlink()


def _parts(path: Path) -> list[Path]:
    """The bundle `path` (`<slug>.npz`) and its parts `<slug>.partN.npz`, in order."""
    found = [path] if path.exists() else []
    while (part := path.with_name(f"{path.stem}.part{len(found)}.npz")).exists():
        found.append(part)
    return found


def _rebuild(skeleton: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    if isinstance(skeleton, dict) and set(skeleton) == {"__leaf__"}:
        return arrays[skeleton["__leaf__"]]
    if isinstance(skeleton, dict):
        return {k: _rebuild(v, arrays) for k, v in skeleton.items()}
    if isinstance(skeleton, list):
        return [_rebuild(v, arrays) for v in skeleton]
    return skeleton


def _arrays(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(meta, every array of the bundle and its parts, cut arrays joined)."""
    arrays: dict[str, np.ndarray] = {}
    with np.load(path) as data:
        meta = json.loads(data[META].tobytes().decode())
    for file in _parts(path)[:meta.get("parts", 0) + 1]:
        with np.load(file) as data:
            arrays.update({k: data[k] for k in data.files if k != META})
    for key, (shape, dtype, count) in meta.get("pieces", {}).items():
        flat = np.concatenate([arrays.pop(f"{key}#{i}") for i in range(count)])
        arrays[key] = flat.astype(np.dtype(dtype), copy=False).reshape(shape)
    return meta, arrays


def restore(path: Path, run: Path) -> dict[str, Any]:
    """The bundle's records and program checkpoints written into `run`; its meta."""
    meta, arrays = _arrays(path)
    if meta["records"]:
        write_text_atomic(run / "results.json",
                          json.dumps({"records": meta["records"]}, indent=2))
    for program in meta["programs"]:
        folder = run / program["folder"]
        write_text_atomic(folder / "run.json", program["run_json"])
        write_text_atomic(folder / "history.jsonl", program["history"])
        store = CheckpointStore(folder)
        try:
            store.save(program["epoch"], _rebuild(program["skeleton"], arrays),
                       program["checkpoint_meta"])
        finally:
            store.close()
    return meta
