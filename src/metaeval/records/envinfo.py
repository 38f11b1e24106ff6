"""Where a run came from: an environment fingerprint and git revisions."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

_DIST_DIR = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+?)\.(?:dist-info|egg-info)$")


def _name_version(dist: metadata.Distribution) -> tuple[str | None, str | None]:
    """Name and version from the ``name-version.dist-info`` directory when it has that
    shape (no file is read), else from the METADATA file."""
    path = getattr(dist, "_path", None)
    match = _DIST_DIR.match(getattr(path, "name", "") or "")
    if match:
        return match["name"], match["version"]
    name = dist.metadata["Name"] if dist.metadata else None
    return name, dist.version


def installed_distributions() -> list[str]:
    """Sorted, de-duplicated ``name==version`` of every installed distribution."""
    found: set[str] = set()
    for dist in metadata.distributions():
        name, version = _name_version(dist)
        if not name:
            continue
        norm = name.lower().replace("_", "-").replace(".", "-")
        found.add(f"{norm}=={version}")
    return sorted(found)


def environment_info() -> dict[str, Any]:
    """The inputs of `environment_hash`: python version, platform and distributions."""
    return {
        "python": sys.version,
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "distributions": installed_distributions(),
    }


@functools.cache
def environment_hash() -> str:
    """``sha256:<hex>`` over python version, platform and installed distributions.

    Computed once per process (listing the distributions takes a quarter of a second).
    """
    blob = json.dumps(environment_info(), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _git(checkout: Path, *args: str) -> str | None:
    """git about `checkout` alone (its own `.git`, no repository discovery upwards), through
    the one git helper; None when git fails or is not installed."""
    from metaeval.sandbox.git import GitError, git_tree

    try:
        return git_tree(checkout / ".git", checkout, *args, timeout_s=30)
    except GitError:
        return None


def git_revision(checkout: str | os.PathLike[str]) -> str | None:
    """HEAD of the git checkout whose root is `checkout`, plus "-dirty" with uncommitted
    changes.

    None when `checkout` has no `.git` of its own, the repository has no commits, or git is
    not installed. Only the checkout's own `.git` is asked: a repository around it is never
    discovered.
    """
    root = Path(checkout)
    if not root.is_dir():  # a file: the checkout it sits at the root of
        root = root.parent
    if not (root / ".git").exists():
        return None
    head = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    if not head or not head.strip():
        return None
    status = _git(root, "status", "--porcelain")
    dirty = "-dirty" if status is None or status.strip() else ""
    return head.strip() + dirty


def metaeval_git_revision() -> str | None:
    """Revision of metaeval's own source checkout, or None when metaeval is installed from a
    wheel (or its checkout is not a git repository).

    Only the checkout metaeval's package sits in (`<root>/src/metaeval`, with `<root>/.git`
    and `<root>/pyproject.toml`) is asked; never the current directory, which may be a
    benchmark with a hostile `.git` of its own, and never a repository that merely contains
    a virtual environment metaeval is installed in.
    """
    pkg_dir = Path(__file__).resolve().parent.parent
    root = pkg_dir.parent.parent
    if pkg_dir.parent.name != "src" or not (root / "pyproject.toml").is_file():
        return None
    if _git(root, "ls-files", "--error-unmatch", "src/metaeval/__init__.py") is None:
        return None
    return git_revision(root)
