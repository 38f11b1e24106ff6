"""What a task's Docker build context (environment/) holds: its file listing, and whether a
COPY source matches something in it."""

from __future__ import annotations

import fnmatch
import posixpath
from pathlib import Path

from metaeval.protocols.audit.static.task_context import TaskContext, skipped_path
from metaeval.tasks.safe_files import walk_tree


def environment_listing(ctx: TaskContext) -> list[str]:
    """Paths relative to environment/ of every file there (loaded, skipped, or on disk);
    computed once per task context."""
    cached = ctx.shared.get("environment_listing")
    if cached is not None:
        return cached
    names: set[str] = set()
    for path in list(ctx.files) + [skipped_path(s) for s in ctx.task.skipped_files]:
        if path.startswith("environment/"):
            names.add(path[len("environment/") :])
    env_dir = Path(ctx.task.root) / "environment"
    if env_dir.is_dir():  # iterative walk: a task nested deeper than Python's stack is fine
        for entry in walk_tree(env_dir, boundary=ctx.task.root):
            if entry.kind != "dir":
                names.add(entry.rel)
    listing = ctx.shared["environment_listing"] = sorted(names)
    return listing


def matches_listing(source: str, listing: list[str]) -> bool:
    source = posixpath.normpath(source).lstrip("/")  # "./.env" is ".env", not "env"
    if source in (".", ""):
        return True
    if any(ch in source for ch in "*?["):
        return any(
            fnmatch.fnmatchcase(name, source)
            or any(fnmatch.fnmatchcase(prefix, source) for prefix in _prefixes(name))
            for name in listing
        )
    return any(name == source or name.startswith(source.rstrip("/") + "/") for name in listing)


def _prefixes(name: str) -> list[str]:
    parts = name.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]
