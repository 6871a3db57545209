"""Run folders carried between machines through git: compressed, in parts under 5 MB.

A cell's state is its run folder (`runs/campaign/<slug>/`, git-ignored). `pack` writes it
as one gzip tar (level 1: checkpoints' floats compress little, a window's minutes are
dear) cut into `reproductions/campaign/carried/<slug>.tar.gz.NN`; `unpack` writes it back
for the experiment's `--resume`. `progress` orders two copies: more finished programs,
then more trained epochs, is newer.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import tempfile
from pathlib import Path

MAX_MB = 4.5  # the repository takes no file over 5 MB
SKIPPED = ("submitit",)  # a SLURM run's logs and pickles: this machine's only


def parts(folder: Path, slug: str) -> list[Path]:
    """The carried parts of `slug` under `folder`, in order."""
    return sorted(folder.glob(f"{slug}.tar.gz.[0-9][0-9]"))


def finished(run: Path) -> bool:
    """Whether the run folder's sweep is done: its results written, every program of its
    plan among them (a stopped sweep writes the summaries of the programs it finished)."""
    path = run / "results.json"
    try:
        results = json.loads(path.read_text()) if path.is_file() else {}
    except json.JSONDecodeError:
        return False
    programs = results.get("programs") or {}
    return bool(results.get("cells")) and programs.get("done") == programs.get("planned")


def progress(run: Path) -> tuple[int, int]:
    """(finished programs, epochs in the histories of the programs under way)."""
    path = run / "results.json"
    records = json.loads(path.read_text()).get("records") or [] if path.is_file() else []
    done = {Path(str(r.get("checkpoint_dir"))).name for r in records}  # a program's folder
    epochs = sum(len(h.read_text().splitlines()) for h in run.rglob("history.jsonl")
                 if h.parent.name not in done)
    return len(records), epochs


def _skip(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return None if Path(info.name).name in SKIPPED else info


def pack(run: Path, folder: Path, slug: str, *, max_mb: float = MAX_MB) -> list[Path]:
    """`run` as `<folder>/<slug>.tar.gz.NN` (older parts of `slug` removed)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        tar.add(run, arcname=".", filter=_skip)
    data, size = buffer.getvalue(), int(max_mb * 2 ** 20)
    remove(folder, slug)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for index, start in enumerate(range(0, len(data), size)):
        path = folder / f"{slug}.tar.gz.{index:02d}"
        path.write_bytes(data[start:start + size])
        written.append(path)
    return written


def unpack(folder: Path, slug: str, run: Path) -> None:
    """The carried run folder of `slug` written to `run` (replacing what is there)."""
    data = b"".join(p.read_bytes() for p in parts(folder, slug))
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(run, filter="data")


def remove(folder: Path, slug: str) -> None:
    for path in parts(folder, slug):
        path.unlink()


def progress_of(folder: Path, slug: str) -> tuple[int, int]:
    """`progress` of the carried copy of `slug` ((-1, -1) when there is none)."""
    if not parts(folder, slug):
        return -1, -1
    with tempfile.TemporaryDirectory() as tmp:
        unpack(folder, slug, Path(tmp) / slug)
        return progress(Path(tmp) / slug)
