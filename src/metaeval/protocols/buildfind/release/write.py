"""`metaeval buildfind release RUN_DIR -o OUT`: a self-verifying release of a finished run.

Layout of OUT (and of OUT.tar.gz, the same tree under one top directory)::

    README.md            what is here and how to check it
    pack/                the task pack as run: specs, question banks, task configs, references
    prompts/             the builder and finder prompt templates
    artifacts/           the generated repositories as probed (build outputs left out)
    records/             manifest, sessions, build/find/view-find records, blobs, summary
    data/                question_rows, view_rows and builds tables (Parquet and CSV)
    tables/              every analysis table (Parquet, CSV, README)
    reports/             report.md and report.html
    labels/              consensus prelabels, the review CSV, the evidence-audit sample,
                         PROVENANCE.md
    claims.json          the claim-evidence map (claims.py), with row counts
    croissant.json       Croissant 1.0 metadata of the rows tables and records
    LICENSE, LICENSES.md the pack's licence; third-party material and what is not included
    SHA256SUMS           SHA-256 of every other file (sha256sum -c format)

Everything is scrubbed on the way in (`scrub`). The tarball is deterministic: sorted
entries, fixed times and owners, gzip without a timestamp; gzip is in the standard library, so
a release needs no extra compressor to make or to open.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import re
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.records import CHECKSUMS, CLAIMS, CROISSANT, RECORD_FILES
from metaeval.protocols.buildfind.release.scrub import Scrubber
from metaeval.protocols.buildfind.release.texts import labels_provenance, license_files, readme
from metaeval.protocols.buildfind.tables.files import csv_escaped

_STRIPPED_DIRS = {"__pycache__", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
_BLOB_REF = re.compile(rb"sha256:[0-9a-f]{64}")


@dataclass
class Release:
    """What `build_release` made."""

    path: Path
    archive: Path | None
    files: int
    scrubbed: dict[str, int] = field(default_factory=dict)


def _check_inputs(run_dir: Path, out: Path) -> dict[str, Any]:
    manifest_path = run_dir / "manifest.json"
    if not manifest_path.is_file():
        raise ConfigError(
            "not a build-and-find run directory (no manifest.json)", file=str(run_dir)
        )
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"unreadable manifest: {exc}", file=str(manifest_path)) from exc
    if manifest.get("protocol") != "buildfind":
        raise ConfigError(
            f"run directory holds protocol '{manifest.get('protocol')}', not buildfind",
            file=str(run_dir),
        )
    for needed in ("question_rows.parquet", "tables", "report.md"):
        if not (run_dir / needed).exists():
            raise ConfigError(
                f"the run is not finalized ({needed} missing); run `metaeval buildfind run` "
                "or `label` first",
                file=str(run_dir),
            )
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError("release directory exists and is not empty", file=str(out))
    if out.resolve().is_relative_to(run_dir.resolve()):
        raise ConfigError("the release cannot be written inside the run directory", file=str(out))
    return manifest


class _Writer:
    """Writes files into the release directory, each scrubbed on the way in."""

    def __init__(self, root: Path, scrubber: Scrubber):
        self.root = root
        self.scrubber = scrubber

    def put(self, rel: str, data: bytes) -> None:
        target = self.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(self.scrubber.file(data, rel))

    def text(self, rel: str, text: str) -> None:
        self.put(rel, text.encode("utf-8"))

    def tree(self, source: Path, prefix: str) -> None:
        """Copy a directory tree (regular files only, build outputs left out)."""
        for path in sorted(source.rglob("*")):
            rel = path.relative_to(source)
            if any(part in _STRIPPED_DIRS for part in rel.parts) or path.suffix == ".pyc":
                continue
            if path.is_symlink() or not path.is_file():
                continue
            self.put(f"{prefix}/{rel.as_posix()}", path.read_bytes())


def _records(run_dir: Path, writer: _Writer) -> None:
    """Record files and blobs. A blob whose scrubbed bytes differ gets the hash of its new
    bytes, and every reference to it (in the records and in other blobs) is rewritten."""
    blobs: dict[str, bytes] = {}
    folder = run_dir / "blobs"
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if path.is_file():
            data = writer.scrubber.file(path.read_bytes(), f"records/blobs/{path.name}")
            blobs[f"sha256:{path.name}"] = data
    renamed: dict[str, str] = {}
    for _ in range(len(blobs) + 1):  # a blob naming a renamed blob changes too: to a fixpoint
        current = {old: _rename_refs(data, renamed) for old, data in blobs.items()}
        new = {old: "sha256:" + hashlib.sha256(data).hexdigest() for old, data in current.items()}
        new = {old: ref for old, ref in new.items() if ref != old}
        if new == renamed:
            break
        renamed = new
    for original in blobs.values():
        data = _rename_refs(original, renamed)
        digest = hashlib.sha256(data).hexdigest()
        target = writer.root / "records" / "blobs" / digest[:2] / digest
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    for name in RECORD_FILES:
        path = run_dir / name
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            text = _rename_refs(text.encode("utf-8"), renamed).decode("utf-8")
            writer.text(f"records/{name}", text)


def _rename_refs(data: bytes, renamed: dict[str, str]) -> bytes:
    if not renamed:
        return data
    return _BLOB_REF.sub(
        lambda m: renamed.get(m.group(0).decode(), m.group(0).decode()).encode(), data
    )


def _data(run_dir: Path, writer: _Writer) -> dict[str, pl.DataFrame]:
    """Rows tables and the builds table; returns the scrubbed frames by released path."""
    from metaeval.protocols.buildfind.record_files import RecordFiles
    from metaeval.protocols.buildfind.rows.extract import builds_table

    for stem in ("question_rows", "view_rows"):
        for ext in ("parquet", "csv"):
            path = run_dir / f"{stem}.{ext}"
            if path.is_file():
                writer.put(f"data/{stem}.{ext}", path.read_bytes())
    builds = builds_table(RecordFiles(run_dir))
    buf = io.BytesIO()
    builds.write_parquet(buf)
    writer.put("data/builds.parquet", buf.getvalue())
    writer.text("data/builds.csv", csv_escaped(builds).write_csv())
    frames = {
        "data/question_rows.parquet": pl.read_parquet(writer.root / "data/question_rows.parquet")
    }
    if (writer.root / "data/view_rows.parquet").is_file():
        frames["data/view_rows.parquet"] = pl.read_parquet(writer.root / "data/view_rows.parquet")
    return frames


def _prompts(writer: _Writer) -> None:
    from metaeval.protocols.buildfind.prompts import TEMPLATES

    for name, text in sorted(TEMPLATES.items()):
        writer.text(f"prompts/{name}.txt", text)


def checksums(root: Path) -> str:
    """sha256sum-format lines for every file under root except SHA256SUMS, sorted by path."""
    lines = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel != CHECKSUMS:
            lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {rel}")
    return "\n".join(lines) + "\n"


def build_release(run_dir: Path, out: Path, *, archive: bool = True) -> Release:
    """Write the release directory (and OUT.tar.gz) of a finalized run; see the module doc."""
    run_dir, out = Path(run_dir), Path(out)
    manifest = _check_inputs(run_dir, out)
    if importlib.util.find_spec("mlcroissant") is None:
        raise ConfigError(
            "releases validate their Croissant metadata with mlcroissant, which is not "
            "installed: pip install 'metaeval[release]'",
            field="mlcroissant",
        )
    pack = manifest.get("config", {}).get("pack")
    pack_dir = Path(pack) if pack and Path(pack).is_dir() else None
    scrubber = Scrubber(run_dir, pack_dir)
    existed = out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _fill(run_dir, out, manifest, pack_dir, scrubber, archive)
    except BaseException:
        # never leave a half-written release behind (it would not verify anyway)
        if existed:
            for child in out.iterdir():
                if child.is_dir():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        else:
            shutil.rmtree(out, ignore_errors=True)
        raise


def _fill(
    run_dir: Path,
    out: Path,
    manifest: dict[str, Any],
    pack_dir: Path | None,
    scrubber: Scrubber,
    archive: bool,
) -> Release:
    from metaeval.protocols.buildfind.release.croissant import write_croissant
    from metaeval.protocols.buildfind.release.croissant_check import validate_croissant
    from metaeval.protocols.buildfind.release.verify import load_released_tables
    from metaeval.protocols.buildfind.report.claims import claims, with_row_counts

    writer = _Writer(out, scrubber)
    if pack_dir is not None:
        writer.tree(pack_dir, "pack")
    _prompts(writer)
    if (run_dir / "artifacts").is_dir():
        writer.tree(run_dir / "artifacts", "artifacts")
    _records(run_dir, writer)
    frames = _data(run_dir, writer)
    writer.tree(run_dir / "tables", "tables")
    for name in ("report.md", "report.html"):
        if (run_dir / name).is_file():
            writer.put(f"reports/{name}", (run_dir / name).read_bytes())
    if (run_dir / "labels").is_dir():
        writer.tree(run_dir / "labels", "labels")
    rows = frames["data/question_rows.parquet"]
    writer.text("labels/PROVENANCE.md", labels_provenance(rows))
    tables = load_released_tables(out)
    claim_list = with_row_counts(claims(tables), frames)
    writer.text(CLAIMS, json.dumps(claim_list, indent=2, sort_keys=True) + "\n")
    licenses, declared = license_files(manifest, pack_dir)
    for rel, data in licenses.items():
        writer.put(rel, data)
    writer.text("README.md", readme(manifest, rows))
    write_croissant(out, manifest, declared)
    problems = validate_croissant(out)
    if problems:
        raise ConfigError(
            "Croissant metadata does not validate: " + "; ".join(problems),
            file=str(out / CROISSANT),
        )
    (out / CHECKSUMS).write_text(checksums(out), encoding="utf-8")
    tarball = _archive(out) if archive else None
    files = sum(1 for p in out.rglob("*") if p.is_file())
    return Release(out, tarball, files, dict(scrubber.changed))


def _archive(root: Path) -> Path:
    """OUT.tar.gz next to OUT: sorted entries, mtime 0, owner root, gzip without a timestamp."""
    target = root.parent / f"{root.name}.tar.gz"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in [root, *sorted(root.rglob("*"))]:
            info = tar.gettarinfo(str(path), arcname=path.relative_to(root.parent).as_posix())
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            info.mode = 0o755 if path.is_dir() else 0o644
            if path.is_file():
                with path.open("rb") as source:
                    tar.addfile(info, source)
            else:
                tar.addfile(info)
    with (
        target.open("wb") as handle,
        gzip.GzipFile(filename="", mode="wb", fileobj=handle, mtime=0, compresslevel=9) as gz,
    ):
        gz.write(raw.getvalue())
    return target
