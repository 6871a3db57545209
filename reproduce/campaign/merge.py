"""A GPU window's work taken back into this tree.

A window (`reproduce/gpu_slice.sh`) returns `window.tar` (cut into `.partNN` files of
15 MiB when larger): `kind` (its device kind), `runs/<slug>/` (the results of each cell
it finished), `carried/` (the carried parts of each cell it left unfinished) and its
measurements `reproductions/<runtime|jacobian>-<kind>/`. `merge` collects each finished
cell into `reproductions/campaign-<group>-<kind>/`, takes the carried parts of each
unfinished one whose progress passes what this tree holds (its carried parts and its
run folder here), and copies the measurements.

    python -m reproduce.campaign merge runs/gpu_window/window.tar
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from pathlib import Path

from reproduce.campaign import carry, gather
from reproduce.campaign.cells import load_cells
from reproduce.campaign.loop import Options


def _unpacked(source: Path, into: Path) -> Path:
    """The window's folder: `source` itself, or its tar (joined from its parts) unpacked."""
    if source.is_dir():
        return source
    pieces = sorted(source.parent.glob(source.name + ".part[0-9][0-9]")) or [source]
    joined = into / "window.tar"
    with open(joined, "wb") as out:
        for piece in pieces:
            out.write(piece.read_bytes())
    with tarfile.open(joined) as tar:
        tar.extractall(into / "window", filter="data")
    return into / "window"


def merge_window(source: Path, opts: Options) -> list[str]:
    """Take the window at `source` into `opts.reproductions`; the lines to print."""
    with tempfile.TemporaryDirectory() as tmp:
        window = _unpacked(Path(source), Path(tmp))
        kind = (window / "kind").read_text().strip()
        by_slug = {c.slug: c for c in load_cells(opts.plan)}
        lines = []
        for run in sorted(p for p in (window / "runs").glob("*") if p.is_dir()):
            cell = by_slug.get(run.name)
            if cell is None or not carry.finished(run):
                lines.append(f"{run.name}: not a finished cell of {opts.plan}, left out")
                continue
            lines += gather.collect_cell(cell, run, opts.reproductions, kind,
                                         opts.note or f"campaign on {kind}")
            carry.remove(opts.carried, cell.slug)
        theirs = window / "carried"
        for slug in sorted({p.name.split(".tar.gz.")[0] for p in theirs.glob("*.tar.gz.*")}):
            if slug not in by_slug:
                lines.append(f"{slug}: not a cell of {opts.plan}, left out")
            elif carry.progress_of(theirs, slug) > max(carry.progress_of(opts.carried, slug),
                                                       carry.progress(opts.work / slug)):
                carry.remove(opts.carried, slug)
                opts.carried.mkdir(parents=True, exist_ok=True)
                for part in carry.parts(theirs, slug):
                    shutil.copyfile(part, opts.carried / part.name)
                shutil.rmtree(opts.work / slug, ignore_errors=True)  # the older copy
                lines.append(f"{by_slug[slug].id}: carried from the {kind} window "
                             f"({carry.progress_of(theirs, slug)[1]} epoch(s) under way)")
        for folder in sorted((window / "reproductions").glob("*")):
            shutil.rmtree(opts.reproductions / folder.name, ignore_errors=True)
            shutil.copytree(folder, opts.reproductions / folder.name)
            lines.append(f"{folder.name}: copied from the {kind} window")
    return lines or [f"{source}: nothing newer than this tree"]
