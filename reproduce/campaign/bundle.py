"""Resume bundles: an unfinished cell's training state as compact files, for git.

A campaign cell trains in a work folder (`runs/campaign/<cell>/`): the sweep's
`results.json` (records of its finished programs) and, per program, a folder with
`run.json`, `history.jsonl` and orbax epoch checkpoints. None of that belongs in git.
`write_bundle` packs what a new machine needs to continue into one `.npz`:

    __meta__                   JSON: the cell, where / when it was written, the sweep's
                               finished records, and per unfinished program its folder
                               (relative to the work folder), run.json, history.jsonl,
                               the checkpoint's epoch and JSON metadata (host
                               bookkeeping: best metric, patience counters, history),
                               and the pytree's skeleton
    p<i>/<leaf>                the newest checkpoint's arrays (params, optimiser state,
                               best params, plateau state), float32 as saved

`restore_bundle` writes the work folder back: `results.json`, each program folder and
one orbax checkpoint at the saved epoch, so `run_sweep(..., resume=True)` continues
bit-identically (tests/test_campaign.py checks it against an uninterrupted run). Only
the newest checkpoint of each program is kept: a bundle is a few MB.

The repository takes no file over 5 MB, and a baseline's program (32 runs of a 10-layer
GIN: params, two Adam moments and best params) checkpoints about 5 MB: arrays past
`max_mb` go to parts beside the file, `<name>.part1.npz`, `<name>.part2.npz`, ... (an
array larger than a part is cut into flat pieces `<key>#<i>`). The meta counts the parts;
`bundle_files`, `copy_bundle` and `remove_bundle` treat a bundle and its parts as one.

The arrays are read from orbax without a template (nested dicts and lists, `None` for
empty optimiser states) and written back in the same shape; orbax matches leaves by
their key paths on restore, which the skeleton preserves.
"""

from __future__ import annotations

import io
import json
import shutil
import time
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from swan_jax.runs.io import write_text_atomic

META = "__meta__"
RESULTS = "results.json"
RUN_FILE = "run.json"
HISTORY = "history.jsonl"
MAX_MB = 4.5  # bundles are committed, and the repository takes no file over 5 MB
PART_MARGIN = 64 * 2 ** 10  # zip headers and the parts' names, beside the arrays' bytes


class BundleError(RuntimeError):
    """A bundle that cannot be written or read (one line naming the file)."""


# ====================================================================== pytree <-> npz


def _skeleton(tree: Any, prefix: str, arrays: dict[str, np.ndarray]) -> Any:
    """`tree` with each array leaf replaced by its npz key (stored in `arrays`)."""
    if isinstance(tree, Mapping):
        return {str(k): _skeleton(v, f"{prefix}/{k}", arrays) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return [_skeleton(v, f"{prefix}/{i}", arrays) for i, v in enumerate(tree)]
    if tree is None:
        return None
    arrays[prefix] = np.asarray(tree)
    return {"__leaf__": prefix}


def _rebuild(skeleton: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    if isinstance(skeleton, dict) and set(skeleton) == {"__leaf__"}:
        return arrays[skeleton["__leaf__"]]
    if isinstance(skeleton, dict):
        return {k: _rebuild(v, arrays) for k, v in skeleton.items()}
    if isinstance(skeleton, list):
        return [_rebuild(v, arrays) for v in skeleton]
    return skeleton


# ====================================================================== program folders


def _checkpointed(folder: Path) -> int | None:
    steps = [int(p.name) for p in folder.iterdir() if p.is_dir() and p.name.isdigit()]
    return max(steps) if steps else None


def _read_checkpoint(folder: Path, epoch: int) -> tuple[Any, dict[str, Any]]:
    import orbax.checkpoint as ocp

    with ocp.CheckpointManager(folder.absolute()) as manager:
        restored = manager.restore(epoch, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(), meta=ocp.args.JsonRestore()))
    return restored["state"], restored["meta"]


def _program_entry(work: Path, folder: Path, index: int,
                   arrays: dict[str, np.ndarray]) -> dict[str, Any] | None:
    epoch = _checkpointed(folder)
    if epoch is None or not (folder / RUN_FILE).exists():
        return None
    state, meta = _read_checkpoint(folder, epoch)
    history = (folder / HISTORY).read_text() if (folder / HISTORY).exists() else ""
    kept = "".join(line + "\n" for line in history.splitlines()[:epoch])  # <= the save
    return {"folder": folder.relative_to(work).as_posix(), "epoch": epoch,
            "run_json": (folder / RUN_FILE).read_text(), "history": kept,
            "checkpoint_meta": meta,
            "skeleton": _skeleton(state, f"p{index}", arrays)}


def unfinished_programs(work: Path, finished: set[str]) -> list[Path]:
    """Program folders under `work` (any depth) whose program has no record yet."""
    out = []
    for run_file in sorted(work.rglob(RUN_FILE)):
        described = json.loads(run_file.read_text()).get("description") or {}
        if described.get("program") not in finished:
            out.append(run_file.parent)
    return out


# ========================================================================== the file


def write_bundle(work: str | Path, path: str | Path, *, cell: Mapping[str, Any],
                 device_kind: str, max_mb: float = MAX_MB) -> dict[str, Any]:
    """Pack the work folder of one cell into `path` (.npz) and, past `max_mb` per file, its
    parts; returns its metadata (`bytes`: all files together).

    Raises `BundleError` when nothing is checkpointed.
    """
    work, path = Path(work), Path(path)
    results = (json.loads((work / RESULTS).read_text()) if (work / RESULTS).exists()
               else {"records": []})
    records = results.get("records") or []
    arrays: dict[str, np.ndarray] = {}
    programs = [entry for i, folder in enumerate(
        unfinished_programs(work, {r["program"] for r in records}))
        if (entry := _program_entry(work, folder, i, arrays)) is not None]
    if not programs and not records:
        raise BundleError(f"{work}: no checkpoint and no finished program to bundle")
    meta = {"format": 1, "cell": dict(cell), "device_kind": device_kind,
            "written": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()) + " UTC",
            "records": records, "programs": programs}
    # The meta is stored deflated (a long run's history is MBs of JSON, a tenth deflated)
    limit = int(max_mb * 2 ** 20) - len(zlib.compress(json.dumps(meta).encode())) - PART_MARGIN
    if limit <= 0:
        raise BundleError(f"{path}: the bundle's metadata alone is over {max_mb:g} MB "
                          f"(--bundle-max-mb)")
    groups, meta["pieces"] = _grouped(arrays, limit)
    meta["parts"] = len(groups) - 1  # named after the file: a copy may be renamed
    files = [(_part_path(path, i), {}, group) for i, group in enumerate(groups) if i]
    sizes = [_write_npz(target, extra, group, max_mb)
             for target, extra, group in [*files, (path, {META: _encoded(meta)}, groups[0])]]
    for stale in bundle_files(path)[len(groups):]:  # parts of an earlier, larger bundle
        stale.unlink()
    return {**meta, "bytes": sum(sizes)}


def _encoded(meta: Mapping[str, Any]) -> np.ndarray:
    return np.frombuffer(json.dumps(meta).encode(), np.uint8)


def _part_path(path: Path, index: int) -> Path:
    return path if index == 0 else path.with_name(f"{path.stem}.part{index}{path.suffix}")


def _grouped(arrays: Mapping[str, np.ndarray], limit: int
             ) -> tuple[list[dict[str, np.ndarray]], dict[str, list]]:
    """The arrays in groups of at most `limit` bytes (one group per file), arrays over it
    cut into flat pieces; and the cut arrays' `[shape, dtype, pieces]`."""
    groups: list[dict[str, np.ndarray]] = [{}]
    pieces: dict[str, list] = {}
    size = 0
    for key, value in arrays.items():
        parts = {key: value}
        if value.nbytes > limit:
            step = max(1, limit // max(1, value.itemsize))
            flat = value.reshape(-1)
            parts = {f"{key}#{i}": flat[start:start + step]
                     for i, start in enumerate(range(0, flat.size, step))}
            pieces[key] = [list(value.shape), value.dtype.str, len(parts)]
        for name, part in parts.items():
            if groups[-1] and size + part.nbytes > limit:
                groups.append({})
                size = 0
            groups[-1][name] = part
            size += part.nbytes
    return groups, pieces


def _write_npz(path: Path, extra: Mapping[str, np.ndarray], arrays: Mapping[str, np.ndarray],
               max_mb: float) -> int:
    """One compressed `.npz`, written atomically; its size in bytes."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **extra, **arrays)
    size = buffer.getbuffer().nbytes
    if size > max_mb * 2 ** 20:  # arrays that do not compress are at most `limit` bytes
        raise BundleError(f"{path}: the bundle would be {size / 2 ** 20:.1f} MB, over "
                          f"{max_mb:g} MB (--bundle-max-mb)")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(buffer.getvalue())
    tmp.replace(path)
    return size


def bundle_files(path: str | Path) -> list[Path]:
    """The bundle `path` and its parts that exist, in order."""
    path = Path(path)
    files = [path] if path.exists() else []
    index = 1
    while _part_path(path, index).exists():
        files.append(_part_path(path, index))
        index += 1
    return files


def copy_bundle(source: str | Path, target: str | Path) -> None:
    """Copy a bundle and its parts (named after `target`); stale parts of `target` go."""
    source, target = Path(source), Path(target)
    remove_bundle(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    for index, file in enumerate(bundle_files(source)):
        shutil.copyfile(file, _part_path(target, index))


def remove_bundle(path: str | Path) -> None:
    """Delete a bundle and its parts."""
    for file in bundle_files(path):
        file.unlink()


def read_meta(path: str | Path) -> dict[str, Any]:
    """The JSON metadata of a bundle (the arrays are not loaded)."""
    try:
        with np.load(path) as data:
            return json.loads(data[META].tobytes().decode())
    except (OSError, KeyError, ValueError) as err:
        raise BundleError(f"{path}: not a campaign bundle ({err})") from None


def restore_bundle(path: str | Path, work: str | Path) -> dict[str, Any]:
    """Write the bundle's results and program checkpoints into `work`; returns its meta.

    An existing checkpoint at or after the bundle's epoch wins (this machine is ahead).
    """
    from swan_jax.runs.checkpoint import CheckpointStore

    work, path = Path(work), Path(path)
    meta = read_meta(path)
    arrays = _read_arrays(path, meta)
    _merge_records(work / RESULTS, meta["records"])
    for program in meta["programs"]:
        folder = work / program["folder"]
        here = _checkpointed(folder) if folder.is_dir() else None
        if here is not None and here >= program["epoch"]:
            continue
        write_text_atomic(folder / RUN_FILE, program["run_json"])
        write_text_atomic(folder / HISTORY, program["history"])
        store = CheckpointStore(folder)
        try:
            store.save(program["epoch"], _rebuild(program["skeleton"], arrays),
                       program["checkpoint_meta"])
        finally:
            store.close()
    return meta


def _read_arrays(path: Path, meta: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Every array of the bundle and its parts, cut arrays joined again."""
    arrays: dict[str, np.ndarray] = {}
    for index in range(meta.get("parts", 0) + 1):
        try:
            with np.load(_part_path(path, index)) as data:
                arrays.update({k: data[k] for k in data.files if k != META})
        except (OSError, ValueError) as err:
            raise BundleError(f"{_part_path(path, index)}: a part of bundle {path} cannot "
                              f"be read ({err}); copy every {path.stem}.part*.npz beside it"
                              ) from None
    for key, (shape, dtype, count) in meta.get("pieces", {}).items():
        flat = np.concatenate([arrays.pop(f"{key}#{i}") for i in range(count)])
        arrays[key] = flat.astype(np.dtype(dtype), copy=False).reshape(shape)
    return arrays


def _merge_records(path: Path, records: list[dict[str, Any]]) -> None:
    """Add the bundle's finished records to `results.json` (by program and epochs)."""
    if not records:
        return
    current = json.loads(path.read_text()) if path.exists() else {"records": []}
    have = {(r["program"], r["epochs"]) for r in current.get("records") or []}
    current["records"] = (current.get("records") or []) + [
        r for r in records if (r["program"], r["epochs"]) not in have]
    write_text_atomic(path, json.dumps(current, indent=2))
