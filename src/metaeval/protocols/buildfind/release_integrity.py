"""The integrity checks of `verify-release` that read no table: the release's tree holds only
regular files and directories, its record lines are not nested too deeply to parse, every file
has the SHA-256 that SHA256SUMS lists (and none is unlisted), and the pack's specs, question
banks and prompt templates have the hashes the run's manifest recorded for them."""

from __future__ import annotations

import hashlib
import os
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


# ------------------------------------------------------------------------------- inputs


def check_input_hashes(root: Path, manifest: dict[str, Any]) -> list[str]:
    """Specs, question banks and prompt templates against the hashes of the run's manifest."""
    layers = manifest.get("layers")
    last = layers[-1] if isinstance(layers, list) and layers else {}
    hashes = (last.get("hashes") if isinstance(last, dict) else None) or manifest.get("hashes")
    hashes = hashes or {}
    if not isinstance(hashes, dict):
        return [f"records/manifest.json: field 'hashes' is {json_type(hashes)}, not an object"]
    problems = []
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
