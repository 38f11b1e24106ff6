"""The benchmark hash a run's manifest records: every file of the audited tasks, by content.

Its own small module so that a worker process can compute it without importing the audit.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from metaeval.tasks.safe_files import link_text, open_checked, open_regular, walk_tree


def benchmark_hash(bench_dir: Path, task_dirs: list[Path]) -> str:
    """sha256 over every file of the audited tasks and the hints file.

    A symlink to a file inside its task counts with the file's content; a symlink leading
    outside the task with its link text (the target is never read); special files not at all.
    """
    digest = hashlib.sha256()
    hints = bench_dir / "benchguard_hints.yaml"
    if hints.is_file():
        _hash_file(digest, str(hints.relative_to(bench_dir)), hints, bench_dir)
    for root in task_dirs:
        prefix = str(root.relative_to(bench_dir)) + "/"
        entries = walk_tree(root, ignore_dirs=())
        # path order, part by part (as pathlib compares), without building a Path per entry
        for entry in sorted(entries, key=lambda e: e.rel.split("/")):
            if entry.kind in ("file", "link"):
                _hash_file(digest, prefix + entry.rel, entry.path, root, entry.kind == "file")
            elif entry.kind == "outside_link":
                digest.update(os.fsencode(prefix + entry.rel) + b"\0")
                digest.update(b"symlink:" + os.fsencode(link_text(entry.path)) + b"\0")
    return "sha256:" + digest.hexdigest()


def _hash_file(
    digest: Any, name: str, path: Path, boundary: Path, walked_file: bool = False
) -> None:
    digest.update(os.fsencode(name) + b"\0")  # a name need not be UTF-8
    try:
        # a plain file the walk found inside the task needs no path resolution; it is opened
        # without following a link that may have replaced it since
        fd = open_checked(path, follow_links=False) if walked_file else open_regular(path, boundary)
        try:
            while chunk := os.read(fd, 1 << 20):
                digest.update(chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        digest.update(f"unreadable:{exc}".encode())
    digest.update(b"\0")
