"""The integrity checks of `verify-release` that read no table: the release's tree holds only
regular files and directories, its record lines are not nested too deeply to parse, every file
has the SHA-256 that SHA256SUMS lists (and none is unlisted), every blob has the SHA-256 its
name says, and the pack's specs, question banks and prompt templates have the hashes the run's
manifest recorded for them (a manifest whose `layers` is not a list of objects, or that records
no hash for a released spec, is a problem, not a reason to skip the check)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

from metaeval.errors import ConfigError
from metaeval.tasks.safe_files import open_regular, read_regular, sha256_fd, walk_tree
from metaeval.tasks.safe_json import MAX_JSON_BYTES, json_type, parse_json

MAX_TEXT_BYTES = 64 * 1024 * 1024
"""SHA256SUMS and the pack's and prompts' text files: larger ones are not read."""


# ------------------------------------------------------------------------------- the tree


def release_files(root: Path) -> tuple[list[str], list[str]]:
    """(relative paths of the release's regular files, one problem per entry that is not a
    regular file or directory). Nothing is opened or followed."""
    files, problems = [], []
    for entry in walk_tree(root):
        if entry.kind == "file":
            files.append(entry.rel)
        elif entry.kind != "dir":
            problems.append(
                f"{entry.rel}: {entry.describe()}: a release holds only regular files "
                "and directories"
            )
    return files, problems


def _read_text(root: Path, rel: str) -> str:
    """A regular file of the release (no symlink), at most MAX_TEXT_BYTES, as text."""
    data = read_regular(root / rel, root, max_bytes=MAX_TEXT_BYTES, follow_inside_links=False)
    # as Path.read_text does: undecodable bytes replaced, universal newlines
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def file_sha256(root: Path, rel: str) -> str:
    """Hex SHA-256 of a regular file of the release (no symlink), read in chunks."""
    fd = open_regular(root / rel, root, follow_inside_links=False)
    try:
        return sha256_fd(fd)
    finally:
        os.close(fd)


def check_json_records(root: Path, files: list[str]) -> list[str]:
    """Lines of the released record files (``records/*.jsonl``) nested too deeply to read:
    the records' reader skips lines that are not JSON objects, but a line nested deeper than
    the parser can go would stop the verification without naming the file."""
    problems = []
    for rel in files:
        if not (rel.startswith("records/") and rel.endswith(".jsonl") and rel.count("/") == 1):
            continue
        fd = open_regular(root / rel, root, follow_inside_links=False)
        with os.fdopen(fd, "rb") as handle:
            for number, line in enumerate(iter(lambda: handle.readline(MAX_JSON_BYTES), b""), 1):
                if line.lstrip()[:1] not in (b"{", b"["):
                    continue  # not nested at all; the reader judges it
                try:
                    parse_json(line, f"{rel}: line {number}", expect=None)
                except ConfigError as exc:
                    if "nested deeper" in str(exc):
                        problems.append(str(exc))
    return problems


# ------------------------------------------------------------------------------- checksums


def check_checksums(root: Path, files: list[str] | None = None) -> list[str]:
    """Problems with SHA256SUMS: missing, unreadable lines, wrong hashes, unlisted files.
    `files` are the release's regular files (walked here when not given)."""
    from metaeval.protocols.buildfind.records import CHECKSUMS

    if files is None:
        files, problems = release_files(root)
        if problems:
            return problems
    present = set(files)
    if CHECKSUMS not in present:
        return [f"{CHECKSUMS}: missing"]
    problems, listed = [], set()
    for number, line in enumerate(_read_text(root, CHECKSUMS).splitlines(), 1):
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64 or rel.startswith("/") or ".." in rel.split("/"):
            problems.append(f"{CHECKSUMS}: line {number} is not '<sha256>  <relative path>'")
            continue
        listed.add(rel)
        if rel not in present:
            problems.append(f"{rel}: listed in {CHECKSUMS} but missing")
        elif file_sha256(root, rel) != digest:
            problems.append(f"{rel}: SHA-256 differs from {CHECKSUMS}")
    for rel in sorted(present - listed - {CHECKSUMS}):
        problems.append(f"{rel}: not listed in {CHECKSUMS}")
    return problems


BLOBS_DIR = "records/blobs/"
_BLOB_NAME = re.compile(r"^records/blobs/([0-9a-f]{2})/([0-9a-f]{64})$")


def check_blobs(root: Path, files: list[str]) -> list[str]:
    """Every file under records/blobs/ is `<hex[:2]>/<hex>` and its bytes hash to `<hex>` (a
    blob edited and re-listed in SHA256SUMS would otherwise pass)."""
    problems = []
    for rel in files:
        if not rel.startswith(BLOBS_DIR):
            continue
        named = _BLOB_NAME.match(rel)
        if named is None or not named.group(2).startswith(named.group(1)):
            problems.append(f"{rel}: not a blob name (records/blobs/<hex[:2]>/<sha256 hex>)")
        elif file_sha256(root, rel) != named.group(2):
            problems.append(f"{rel}: content does not hash to its name")
    return problems


# ------------------------------------------------------------------------------- inputs


def _recorded_hashes(manifest: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(the input hashes of the manifest's last layer, or of the manifest itself, problems of
    their shape: each one named, none skipping the check)."""
    where = "records/manifest.json"
    problems = []
    layers = manifest.get("layers", [])
    if not isinstance(layers, list) or not all(isinstance(item, dict) for item in layers):
        shown = json_type(layers) if not isinstance(layers, list) else "an array of non-objects"
        problems.append(f"{where}: field 'layers' is {shown}, not an array of objects")
        layers = []
    hashes = (layers[-1].get("hashes") if layers else None) or manifest.get("hashes") or {}
    if not isinstance(hashes, dict):
        problems.append(f"{where}: field 'hashes' is {json_type(hashes)}, not an object")
        hashes = {}
    return hashes, problems


def check_input_hashes(root: Path, manifest: dict[str, Any]) -> list[str]:
    """Specs, question banks and prompt templates against the hashes of the run's manifest;
    a released spec without a recorded hash is a problem too."""
    hashes, problems = _recorded_hashes(manifest)
    pack = root / "pack"
    if pack.is_dir():
        for task in sorted(p.name for p in pack.iterdir() if (p / "spec.yaml").is_file()):
            if f"spec:{task}" not in hashes:
                problems.append(f"pack/{task}/spec.yaml: records/manifest.json records no hash")
    for name, expected in sorted(hashes.items()):
        kind, _, key = name.partition(":")
        if kind == "spec":
            rel = f"pack/{key}/spec.yaml"
        elif kind == "question_bank":
            rel = f"pack/{key}/questions.yaml"
        elif kind == "prompt" and key.startswith("buildfind_"):
            rel = f"prompts/{key.removeprefix('buildfind_')}.txt"
        else:
            continue
        if not (root / rel).is_file():
            problems.append(f"{rel}: missing (the manifest records {name})")
            continue
        text = _read_text(root, rel)
        if "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest() != expected:
            problems.append(f"{rel}: differs from the {name} hash in records/manifest.json")
    return problems
